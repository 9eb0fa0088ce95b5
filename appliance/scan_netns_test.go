package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The scan tests of issue 40: a WAN host scans the LAN's /64 while other
// WAN hosts reach its hosts. (The IPv4 side has no such test: a port
// forward, or its range, goes to one LAN address, so the WAN cannot make
// the router resolve many; the nat package's unit tests scan the WAN's
// subnet from the LAN instead.)

// scanSource is the scanner's address: in the ISP's /64, as the pinger
// (2001:db8:64::1) is, so that the scan's share of its /64 is tested too.
var scanSource = netip.MustParseAddr("2001:db8:64::5ca")

// scanFrames returns the i-th frame of an ICMPv6 echo scan from src of
// random addresses of lan: random interface identifiers, identifiers
// and sequence numbers.
func scanFrames(boxMAC, srcMAC [6]byte, src netip.Addr, lan netip.Prefix) func(i int) []byte {
	rng := rand.New(rand.NewPCG(40, 1))
	payload := frametest.Payload(16)
	return func(int) []byte {
		dst := lan.Addr().As16()
		binary.BigEndian.PutUint64(dst[8:], rng.Uint64())
		ip := frametest.IPv6{Src: src.As16(), Dst: dst, HopLimit: 64}
		return frametest.Frame(boxMAC, srcMAC, frametest.EtherTypeIPv6, ip.ICMPPacket(frame.ICMPv6EchoRequest, 0, rng.Uint32(), payload))
	}
}

// TestIPv6Scan: the box in NAT mode routes a static /64 to h1; a WAN host
// scans random addresses of the /64 with echo requests at 20k/s for 10 s
// while the ISP pings h1 with ping -6 (30 probes during the scan, 20
// after: at least 90 % answered), and an address h1 adds during the scan
// answers the ISP's pings within 5 s.
func TestIPv6Scan(t *testing.T) {
	testenv.Require(t, "ping")
	lan := netip.MustParsePrefix("2001:db8:7700::/64")
	v, _ := newStaticV6Lab(t, "ip6scan", lan)
	h1 := v.slaac(t, lan)
	v.reach(t, h1) // h1's traffic through the box: a neighbour it knows
	boxMAC, ispMAC := macOf(t, v.box, "p1"), macOf(t, v.isp, "eth0")
	run := 0
	attempts(t, func() ([]string, string) {
		run++
		fresh := netip.MustParseAddr(fmt.Sprintf("2001:db8:7700::beef:%d", run))
		r := v.scan(t, h1, fresh, scanFrames(boxMAC, ispMAC, scanSource, lan))
		r.log(t)
		return r.problems(), busy(r.fr, floodRate, r.cpu)
	})
}

// scanRun is what one scan of TestIPv6Scan measured.
type scanRun struct {
	fr            floodResult
	cpu           cpuUse
	during, after int // probes to h1 answered, of 30 and 20
	// reached is how long after it appeared the new address answered
	// the ISP's ping; 0 if it did not within appearLimit.
	reached time.Duration
	drops   map[string]uint64 // the IPv6 router's drops during the scan
	// boxRx and ringDrops are the frames the WAN port received and its
	// rings dropped during the scan.
	boxRx, ringDrops uint64
}

// appearLimit is how long TestIPv6Scan waits for the new address.
const appearLimit = 12 * time.Second

// scan runs one scan of TestIPv6Scan.
func (v *v6Lab) scan(t *testing.T, h1, fresh netip.Addr, frames func(int) []byte) scanRun {
	var r scanRun
	s0 := v.stats(t)
	cpu := v.cpuMeter(t)
	flood := startFlood(t, v.isp, "eth0", floodAim, floodAim*int(floodTime/time.Second), frames)
	time.Sleep(500 * time.Millisecond)
	during := startPing(t, v.isp, h1, 30)
	time.Sleep(2 * time.Second)
	r.reached = v.appear(t, fresh)
	r.during = during()
	r.fr = flood()
	r.cpu = cpu.read(t)
	s1 := v.stats(t)
	r.after = startPing(t, v.isp, h1, 20)()
	r.drops = map[string]uint64{}
	for reason, n := range s1.IPv6.Drops {
		if d := n - s0.IPv6.Drops[reason]; d != 0 {
			r.drops[reason] = d
		}
	}
	wan0, wan1 := v.port(t, s0, "wan"), v.port(t, s1, "wan")
	r.boxRx, r.ringDrops = wan1.RxPackets-wan0.RxPackets, wan1.Ring.RxDrops-wan0.Ring.RxDrops
	return r
}

// startPing starts ping -6 of addr from ns with count probes 0.25 s
// apart; wait returns how many were answered. The test's cleanup kills a
// ping still running.
func startPing(t *testing.T, ns *netnstest.Namespace, addr netip.Addr, count int) (wait func() int) {
	t.Helper()
	cmd := ns.Command("ping", "-6", "-n", "-c", strconv.Itoa(count), "-i", "0.25", "-W", "2", addr.String())
	out := &netnstest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("ping %v: %v", addr, err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return func() int {
		t.Helper()
		cmd.Wait() // ping exits 1 when probes went unanswered
		done = true
		m := regexp.MustCompile(`(\d+) received`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("ping %v: no summary in its output:\n%s", addr, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
}

// appear adds addr to h1 and returns how long until the ISP's pings of it
// are answered (0: not within appearLimit).
func (v *v6Lab) appear(t *testing.T, addr netip.Addr) time.Duration {
	t.Helper()
	v.hosts[0].IP(t, "-6", "addr", "add", addr.String()+"/64", "dev", "eth0", "nodad")
	start := time.Now()
	for time.Since(start) < appearLimit {
		if out, err := v.isp.Output("ping", "-6", "-n", "-c", "1", "-W", "1", addr.String()); err == nil && strings.Contains(out, "1 received") {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0
}

func (r *scanRun) log(t *testing.T) {
	var drops []string
	for reason, n := range r.drops {
		drops = append(drops, fmt.Sprintf("%s=%d", reason, n))
	}
	slices.Sort(drops)
	t.Logf("attack: name=ipv6_scan sent=%d took=%v rate=%.0f/s box_rx=%d box_ring_drops=%d box_cpu=%.0f%% box_cpu_wait=%.0f%% cpu_pressure=%s",
		r.fr.Sent, r.fr.Took.Round(time.Millisecond), r.fr.Rate(), r.boxRx, r.ringDrops, r.cpu.Used, r.cpu.Waited, cpuPressure())
	t.Logf("attack: name=ipv6_scan probes_during=%d/30 probes_after=%d/20 new_address_s=%.2f drops: %s",
		r.during, r.after, r.reached.Seconds(), strings.Join(drops, " "))
}

// problems lists what the run's hosts saw that they should not have.
func (r *scanRun) problems() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if r.fr.Rate() < floodRate || r.fr.Took < floodTime-100*time.Millisecond {
		add("the generator reached only %v, want at least %d/s for %v: is the machine too loaded to run this test? (send error: %v)",
			r.fr, floodRate, floodTime, r.fr.Err)
	}
	if ok := r.during + r.after; ok < 45 {
		add("%d of 50 pings of the known LAN host answered (%d/30 during the scan, %d/20 after), want at least 45", ok, r.during, r.after)
	}
	switch {
	case r.reached == 0:
		add("the address added during the scan did not answer the ISP's pings within %v", appearLimit)
	case r.reached > 5*time.Second:
		add("the address added during the scan answered the ISP's pings after %v, want within 5 s", r.reached.Round(10*time.Millisecond))
	}
	var dropped uint64
	for _, n := range r.drops {
		dropped += n
	}
	if dropped < uint64(r.fr.Sent)/2 {
		add("the IPv6 router dropped %d frames during a scan of %d: did the scan reach the box?", dropped, r.fr.Sent)
	}
	return p
}
