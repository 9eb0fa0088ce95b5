package ispvm

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
)

// pppoeSessionFrames counts the PPPoE session frames among frames
// carrying a PPP packet (protocol field included) of n bytes.
func pppoeSessionFrames(frames [][]byte, n int) int {
	count := 0
	for _, f := range frames {
		if len(f) < 14 {
			continue
		}
		b := f[12:]
		if binary.BigEndian.Uint16(b) == 0x8100 && len(b) >= 4 {
			b = b[4:]
		}
		if len(b) >= 8 && binary.BigEndian.Uint16(b) == 0x8864 && b[2] == 0x11 && b[3] == 0 &&
			int(binary.BigEndian.Uint16(b[6:])) == n {
			count++
		}
	}
	return count
}

// drain returns the frames p received until it stays quiet for its
// receive timeout.
func (p *rawPort) drain() [][]byte {
	var frames [][]byte
	for f := p.recv(); f != nil; f = p.recv() {
		frames = append(frames, f)
	}
	return frames
}

// iperfRate is the receiver's rate in an iperf3 -f m report, in Mbit/s.
var iperfRate = regexp.MustCompile(`([0-9.]+) Mbits/sec\s+receiver`)

// checkKernelSession checks a session with the kernel-mode access
// concentrator: both ends' ppp0 at the configured MRU, pings of that size
// crossing the wire as single PPPoE frames both ways (no fragments), and
// iperf3 to the upstream host both ways (its rates logged).
func checkKernelSession(t *testing.T, ns *netnstest.Namespace, server, client *VM) {
	t.Helper()
	mru := server.Config.MRU
	for _, vm := range []*VM{server, client} {
		if got := strings.TrimSpace(vmRun(t, vm, "cat /sys/class/net/ppp0/mtu")); got != strconv.Itoa(mru) {
			t.Errorf("%s's ppp0 MTU %s, want %d", map[bool]string{true: "client", false: "ISP"}[vm.Config.client], got, mru)
		}
	}
	fromISP, fromClient := openRaw(t, ns, "isp0"), openRaw(t, ns, "cli0")
	fromISP.drain()
	fromClient.drain()
	vmRun(t, client, fmt.Sprintf("ping -c 3 -s %d -W 5 198.51.100.1", mru-28))
	if n := pppoeSessionFrames(fromClient.drain(), mru+2); n < 3 {
		t.Errorf("the client sent %d PPPoE frames of a %d-byte IP packet, want its 3 echo requests", n, mru)
	}
	if n := pppoeSessionFrames(fromISP.drain(), mru+2); n < 3 {
		t.Errorf("the ISP sent %d PPPoE frames of a %d-byte IP packet, want its 3 echo replies", n, mru)
	}
	for _, dir := range []string{"", " -R"} {
		start := time.Now()
		out := vmRun(t, client, "iperf3 -c 198.51.100.1 -t 2 -f m"+dir)
		m := iperfRate.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("iperf3%s: no receiver rate in %q", dir, out)
			continue
		}
		if rate, _ := strconv.ParseFloat(m[1], 64); rate <= 0 {
			t.Errorf("iperf3%s: %s Mbit/s", dir, m[1])
		}
		t.Logf("iperf3%s over the session at MRU %d (VM to VM, TCG): %s Mbit/s (%v)", dir, mru, m[1], time.Since(start).Round(100*time.Millisecond))
	}
}
