package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/ispvm"
	"e1kbox/internal/netnstest"
)

// The PPPoE MTU lab: like TestPPPoEWAN's, but the ISP VM runs the
// kernel-mode access concentrator (ispvm's KernelMode) and sits behind a
// bridge, where the frames the box sends can be captured (the box sends
// with PACKET_QDISC_BYPASS, which other sockets on its own port do not
// see):
//
//	ISP VM ─ isp0 (tap) ─ br0 ─ wan0 ═ p1 [box: wan by PPPoE, mru 1500 | lan 192.168.7.1/24] p2 ─ h1 192.168.7.10
//
// The middle namespace's links run at 1508, RFC 4638's 1500 plus the
// PPPoE header.
const pppoeMTULinks = 1508

// TestPPPoEMTU: the box asks for RFC 4638's MRU 1500 (nat.wan.pppoe.mru)
// and its WAN port runs at 1508. Against an access concentrator offering
// 1500 the session runs at 1500; against one at 1492 (no PPP-Max-Payload
// in its PADO and PADS) at 1492, with TCP SYNs to the WAN clamped to MSS
// 1452. Both ways a LAN host fetches and uploads 10 MiB with their
// SHA-256 and runs iperf3 (-R too, 2 s, at least 1 MiB) through the
// session; the rates are logged, not asserted (the ISP is a TCG VM).
func TestPPPoEMTU(t *testing.T) {
	for _, tc := range []struct {
		acMRU   int // what the access concentrator offers
		wantMTU int // the session's
		wantMSS int // a LAN SYN's on the WAN: 1460 from the host, clamped to the session's MTU-40
	}{
		{acMRU: 1500, wantMTU: 1500, wantMSS: 1460},
		{acMRU: 1492, wantMTU: 1492, wantMSS: 1452},
	} {
		t.Run(fmt.Sprintf("ac%d", tc.acMRU), func(t *testing.T) { pppoeMTU(t, tc.acMRU, tc.wantMTU, tc.wantMSS) })
	}
}

func pppoeMTU(t *testing.T, acMRU, wantMTU, wantMSS int) {
	requireNetns(t)
	l := &lab{t: t, dir: t.TempDir()}
	l.box = netnstest.New(t, "e1kpm")
	l.box.IP(t, "link", "set", "lo", "up")
	h := netnstest.New(t, "e1kpmh")
	h.IP(t, "link", "set", "lo", "up")
	isp := netnstest.New(t, "e1kpmi")
	isp.IP(t, "link", "add", "br0", "type", "bridge")
	isp.IP(t, "link", "set", "br0", "mtu", fmt.Sprint(pppoeMTULinks), "up")
	isp.IP(t, "tuntap", "add", "dev", "isp0", "mode", "tap")
	isp.IP(t, "link", "set", "isp0", "mtu", fmt.Sprint(pppoeMTULinks), "master", "br0", "up")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p1", Off: noOff, Up: true},
		netnstest.End{NS: isp, Name: "wan0", MTU: pppoeMTULinks, Off: noOff, Up: true})
	l.box.Sysctl(t, "net.ipv6.conf.p1.disable_ipv6=1")
	isp.IP(t, "link", "set", "wan0", "master", "br0")
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:77:00:00:00:01", Addrs: []string{"192.168.7.10/24"}, Up: true})
	h.IP(t, "route", "add", "default", "via", svcRouter)
	l.hosts = []*netnstest.Namespace{h}
	vm := ispvm.Start(t, ispvm.Config{Netns: isp.Name(), Tap: "isp0", CHAP: true, Password: pppoeLabPassword,
		KernelMode: true, MRU: acMRU})
	// LCP echo every 5 s: iperf3 at full speed can starve the TCG VM's
	// pppd on a loaded host for the 3 s that 1 s allows.
	cfg := strings.Replace(pppoeLabConfig(0), `"lcpEchoInterval": "1s"`, `"lcpEchoInterval": "5s", "mru": 1500`, 1)
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	start := time.Now()
	ev, err := vm.WaitEvent(90*time.Second, "up")
	if err != nil {
		t.Fatalf("no PPPoE session: %v", err)
	}
	t.Logf("session up %v after the start", time.Since(start).Round(time.Millisecond))

	// The session's MTU: the ISP's pppd takes the smaller of its own and
	// the box's MRU for its ppp interface.
	out, err := vm.Run("cat /sys/class/net/"+ev.Args[0]+"/mtu", 10*time.Second)
	if err != nil || strings.TrimSpace(out) != fmt.Sprint(wantMTU) {
		t.Errorf("the ISP's %s MTU: %q %v, want %d", ev.Args[0], out, err, wantMTU)
	}
	if out := l.box.IP(t, "-o", "link", "show", "p1"); !strings.Contains(out, fmt.Sprintf(" mtu %d ", pppoeMTULinks)) {
		t.Errorf("the box's WAN port: %s, want mtu %d", out, pppoeMTULinks)
	}
	up := vm.Config.Upstream4.String()
	eventually(t, 30*time.Second, "h1's ping to the ISP's upstream answered through the session", func() (bool, string) {
		out, err := l.host(1, "ping", "-c", "1", "-W", "1", up)
		return err == nil, fmt.Sprintf("%v %s", err, out)
	})
	// A packet of the session's MTU crosses unfragmented (DF), one byte
	// more does not.
	if out, err := l.host(1, "ping", "-c", "1", "-W", "3", "-M", "do", "-s", fmt.Sprint(wantMTU-28), up); err != nil {
		t.Errorf("a %d-byte ping (DF) through the session: %v %s", wantMTU, err, out)
	}
	if wantMTU < 1500 {
		if out, err := l.host(1, "ping", "-c", "1", "-W", "3", "-M", "do", "-s", fmt.Sprint(wantMTU-27), up); err == nil {
			t.Errorf("a %d-byte ping (DF) crossed a session of MTU %d: %s", wantMTU+1, wantMTU, out)
		}
	}

	// Download /big (the capture on the ISP's side sees its SYN), then
	// upload it to the sink, which answers its SHA-256.
	wan := isp.OpenPackets(t, "wan0", true)
	fetch := time.Now()
	big := filepath.Join(l.dir, "big")
	out, err = l.host(1, "sh", "-c", "curl -sS --max-time 120 -o "+big+" http://"+up+"/big && sha256sum "+big)
	if err != nil || !strings.HasPrefix(out, vm.Image.BigSHA256) {
		t.Fatalf("fetching /big through the session: %v %q, want SHA-256 %s", err, out, vm.Image.BigSHA256)
	}
	took := time.Since(fetch)
	t.Logf("download of /big (%d MiB) at MTU %d: %v (%.1f Mbit/s)", ispvm.BigSize>>20, wantMTU, took.Round(time.Millisecond),
		float64(ispvm.BigSize)*8/took.Seconds()/1e6)
	wan.Close()
	if mss := synMSS(wan.Frames(), 80); len(mss) == 0 {
		t.Errorf("no TCP SYN to port 80 with an MSS in the PPPoE session frames from the box")
	} else if mss[0] != wantMSS {
		t.Errorf("the SYN to port 80 left the box with MSS %d, want %d (all: %v)", mss[0], wantMSS, mss)
	}
	upload := time.Now()
	sum, err := uploadSHA256(h, net.JoinHostPort(up, "9000"), big)
	if err != nil || sum != vm.Image.BigSHA256 {
		t.Errorf("uploading /big through the session: the sink answered %q (%v), want %s", sum, err, vm.Image.BigSHA256)
	}
	took = time.Since(upload)
	t.Logf("upload of %d MiB at MTU %d: %v (%.1f Mbit/s)", ispvm.BigSize>>20, wantMTU, took.Round(time.Millisecond),
		float64(ispvm.BigSize)*8/took.Seconds()/1e6)

	// iperf3 both ways: tcpRuns retries a run that a lost first segment
	// (a 1 s retransmission timeout on a loaded machine) left empty.
	for _, dir := range [][]string{nil, {"-R"}} {
		r := l.tcpRuns(t, 1, 1<<20, append([]string{up}, dir...)...)
		t.Logf("iperf3 %v at MTU %d: %.1f Mbit/s received, %d retransmits", dir, wantMTU,
			r.End.SumReceived.BitsPerSecond/1e6, r.End.SumSent.Retransmits)
	}
}

// synMSS returns the MSS options of the TCP SYNs (no ACK) to port in
// the PPPoE session frames (IPv4), in order.
func synMSS(frames [][]byte, port uint16) []int {
	var mss []int
	for _, f := range frames {
		if len(f) < 22 || binary.BigEndian.Uint16(f[12:]) != 0x8864 || binary.BigEndian.Uint16(f[20:]) != 0x0021 {
			continue
		}
		ip := f[22:]
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 6 {
			continue
		}
		tcp := ip[int(ip[0]&0xf)*4:]
		if len(tcp) < 20 || binary.BigEndian.Uint16(tcp[2:]) != port || tcp[13]&0x12 != 0x02 {
			continue
		}
		opts := tcp[20:min(int(tcp[12]>>4)*4, len(tcp))]
		for len(opts) > 0 {
			if opts[0] == 0 {
				break
			}
			if opts[0] == 1 {
				opts = opts[1:]
				continue
			}
			if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
				break
			}
			if opts[0] == 2 && opts[1] == 4 {
				mss = append(mss, int(binary.BigEndian.Uint16(opts[2:])))
			}
			opts = opts[opts[1]:]
		}
	}
	return mss
}

// uploadSHA256 sends the file to the ISP's upload sink at addr from ns,
// closes its sending side and returns the SHA-256 the sink answers.
func uploadSHA256(ns *netnstest.Namespace, addr, file string) (string, error) {
	c, err := ns.Dial("tcp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(120 * time.Second))
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(c, f); err != nil {
		return "", fmt.Errorf("sending: %w", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	answer, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	s := strings.Fields(string(answer))
	if len(s) == 0 {
		return "", fmt.Errorf("an empty answer")
	}
	if _, err := hex.DecodeString(s[0]); err != nil || len(s[0]) != 2*sha256.Size {
		return "", fmt.Errorf("answer %q: not a SHA-256", answer)
	}
	return s[0], nil
}
