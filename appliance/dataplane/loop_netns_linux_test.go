package dataplane

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
)

// TestLoopNetns joins the segments of ports p1 and p2 with a Linux bridge
// (no STP) in a segment namespace, which also holds host hs; h3 is on p3
// and sends broadcasts all along. The loop must be found and p2 blocked
// within 2 s of the bridge joining them, h3 and hs must reach each other
// (through p1), and p2 must forward again once the loop is gone.
func TestLoopNetns(t *testing.T) {
	requireNetns(t)
	box, seg, h3 := netnstest.New(t, "lpbox"), netnstest.New(t, "lpseg"), netnstest.New(t, "lph3")
	for _, p := range []string{"p1", "p2", "p3"} {
		peer, ns := "s"+p[1:], seg
		if p == "p3" {
			peer, ns = "eth0", h3
		}
		netnstest.Veth(t, netnstest.End{NS: box, Name: p, Off: netnstest.FrameOffloads},
			netnstest.End{NS: ns, Name: peer, Off: netnstest.FrameOffloads, Up: true})
		box.Sysctl(t, "net.ipv6.conf."+p+".disable_ipv6=1")
		box.IP(t, "link", "set", p, "up")
	}
	h3.IP(t, "addr", "add", "10.43.0.3/24", "dev", "eth0")
	seg.IP(t, "link", "add", "br0", "type", "bridge", "stp_state", "0")
	netnstest.Veth(t, netnstest.End{NS: seg, Name: "hs0", Off: netnstest.FrameOffloads},
		netnstest.End{NS: seg, Name: "hs", Off: netnstest.FrameOffloads})
	seg.IP(t, "link", "set", "hs0", "master", "br0")
	seg.IP(t, "link", "set", "hs0", "up")
	seg.IP(t, "link", "set", "s1", "master", "br0")
	seg.IP(t, "link", "set", "br0", "up")
	// hs in a namespace of its own: its end moves there.
	hs := netnstest.New(t, "lphs")
	seg.IP(t, "link", "set", "hs", "netns", hs.Name())
	hs.IP(t, "addr", "add", "10.43.0.10/24", "dev", "hs")
	hs.IP(t, "link", "set", "hs", "up")

	tp := &topo{t: t, box: box}
	e := tp.engine(&Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}, {Interface: "p3"}}})
	if out, err := h3.Output("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.43.0.10"); err != nil {
		t.Fatalf("before the loop: %v\n%s", err, out)
	}
	storm := h3.Command("ping", "-b", "-i", "0.05", "10.43.0.255")
	netnstest.Start(t, storm)

	// Join at a random phase of the probe period.
	time.Sleep(time.Second + rand.N(probeInterval))
	joined := time.Now()
	seg.IP(t, "link", "set", "s2", "master", "br0")
	p2 := waitPort(t, e, "p2", 5*time.Second, func(p PortStats) bool { return p.Blocked })
	took := time.Since(joined)
	t.Logf("loop p1-p2 found and p2 blocked %v after the bridge joined the segments", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("p2 blocked %v after the loop formed, want within 2 s", took)
	}
	if p2.LoopWith != "p1" || p2.Blocks != 1 {
		t.Errorf("p2: loopWith %q, blocks %d; want p1, 1", p2.LoopWith, p2.Blocks)
	}
	for _, p := range e.Snapshot().Ports {
		if p.Name != "p2" && p.Blocked {
			t.Errorf("port %s blocked too", p.Name)
		}
	}
	// The segment's bridge (no STP) learned addresses from the storm on
	// whichever of s1 and s2 they came in last; a MAC it holds on s2
	// (towards the blocked port) stays wrong until that host sends again.
	// h3 broadcasts all along; hs answers only, so it speaks first (its
	// first packet may still take a wrong turn).
	if out, err := hs.Output("ping", "-c", "3", "-i", "0.1", "-W", "1", "10.43.0.3"); err != nil {
		t.Errorf("hs to h3 with the loop blocked: %v\n%s", err, out)
	}
	out, err := h3.Output("ping", "-c", "10", "-i", "0.1", "-W", "1", "10.43.0.10")
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("h3 to hs with the loop blocked: %v\n%s", err, out)
		fdb, _ := seg.Output("bridge", "fdb", "show", "br", "br0")
		t.Logf("box FDB %+v\nbr0 FDB:\n%s\nports %+v", e.FDBEntries(), fdb, e.Snapshot().Ports)
	}

	seg.IP(t, "link", "set", "s2", "nomaster")
	gone := time.Now()
	waitPort(t, e, "p2", loopHold+3*time.Second, func(p PortStats) bool { return !p.Blocked })
	t.Logf("p2 forwards again %v after the loop went", time.Since(gone).Round(time.Millisecond))
}

// waitPort polls the engine's snapshot until port name satisfies ok and
// returns it, failing after timeout.
func waitPort(t *testing.T, e *Engine, name string, timeout time.Duration, ok func(PortStats) bool) PortStats {
	t.Helper()
	var found PortStats
	eventually(t, timeout, "port "+name+" as expected", func() (bool, string) {
		ports := e.Snapshot().Ports
		for _, p := range ports {
			if p.Name == name && ok(p) {
				found = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", ports)
	})
	return found
}
