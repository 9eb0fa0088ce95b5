package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBridgeLoop cables the segments of lan1 and lan2 together outside the
// box (a bridge in h1 and one in h2, joined by a veth) while h3 pings the
// other side: the appliance blocks one port of the loop within 2 s, says so
// on /api/dataplane and /metrics, h3 keeps reaching h1, and the alarm clears
// when the cable goes.
func TestBridgeLoop(t *testing.T) {
	l := newLab(t, 3)
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(threePortConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	// h1 and h2 put their eth0 into a bridge; their IPv4 address moves to
	// it. The bridge is given eth0's address: one without an address set
	// takes the lowest of its ports', so a cable veth with a lower random
	// address changed h2's twice (cable in, cable out), and h3's neighbour
	// entry, refreshed by h2's ARP while the cable was in, pointed to an
	// address h2 no longer answered to (CI failed 'h3 to h2 once lan2
	// forwards again'; a cable with address 02:00:00:00:00:00 fails it
	// every time without this).
	for i, h := range l.hosts[:2] {
		h.IP(t, "link", "add", "br0", "address", fmt.Sprintf("02:50:00:00:00:%02x", i+1), "type", "bridge", "stp_state", "0")
		h.IP(t, "link", "set", "eth0", "master", "br0")
		h.IP(t, "link", "set", "br0", "up")
		h.IP(t, "addr", "flush", "dev", "eth0")
		h.IP(t, "addr", "add", fmt.Sprintf("10.50.0.%d/24", i+1), "dev", "br0")
	}
	l.mustHost(t, 3, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.50.0.1")
	l.mustHost(t, 3, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.50.0.2")
	blockedMetric := func() string {
		_, body := l.boxGet("/metrics")
		var lines []string
		for _, ln := range strings.Split(body, "\n") {
			if strings.HasPrefix(ln, "e1kbox_port_loop_blocked{") && strings.HasSuffix(ln, " 1") {
				lines = append(lines, ln)
			}
		}
		return strings.Join(lines, "; ")
	}

	// The cable: a veth from h1's bridge to h2's.
	formed := time.Now()
	l.hosts[0].IP(t, "link", "add", "lp1", "type", "veth", "peer", "name", "lp2", "netns", l.hosts[1].Name())
	l.hosts[0].IP(t, "link", "set", "lp1", "master", "br0", "up")
	l.hosts[1].IP(t, "link", "set", "lp2", "master", "br0", "up")
	eventually(t, 5*time.Second, "a port of the loop blocked", func() (bool, string) {
		p := l.port(t, l.stats(t), "lan2")
		return p.Blocked && p.LoopWith == "lan1", fmt.Sprintf("lan2 %+v", p)
	})
	took := time.Since(formed)
	t.Logf("loop lan1-lan2: lan2 blocked %v after the cable went in", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("lan2 blocked %v after the loop formed, want within 2 s", took)
	}
	if m := blockedMetric(); !strings.Contains(m, `port="lan2"`) || strings.Contains(m, `port="lan1"`) {
		t.Errorf("blocked ports in /metrics: %q, want lan2 alone", m)
	}
	// Right after the block the looped segment's own no-STP bridges can
	// still hold MACs learned on the detour (docs/dataplane.md, Loop
	// protection): the first frames may be lost until the hosts relearn.
	// Within 2 s the path must work, and then without loss.
	eventually(t, 2*time.Second, "h3 reaches h1 once the loop is blocked", func() (bool, string) {
		out, err := l.host(3, "ping", "-c", "1", "-W", "1", "10.50.0.1")
		return err == nil, out
	})
	out, err := l.host(3, "ping", "-c", "10", "-i", "0.1", "-W", "1", "10.50.0.1")
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("h3 to h1 with the loop blocked: %v\n%s", err, out)
	}

	// Just before the cable goes, h2 broadcasts (an ARP request for h3):
	// with lan2 blocked it reaches the box over the detour, on lan1, and
	// the box learns h2 there. That entry must not outlive the block:
	// once lan2 forwards again, h3 must reach h2 at once.
	l.hosts[1].IP(t, "neigh", "flush", "dev", "br0")
	l.hosts[1].Output("ping", "-c", "1", "-W", "1", "10.50.0.3")
	l.hosts[0].IP(t, "link", "del", "lp1")
	// The alarm clears loopHold (2 s) after the last probe came back, once
	// the monitor has flushed the FDB; 10 s allow for a loaded machine.
	eventually(t, 10*time.Second, "the loop alarm cleared", func() (bool, string) {
		m := blockedMetric()
		return m == "" && !l.port(t, l.stats(t), "lan2").Blocked, m
	})
	out, err = l.host(3, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.50.0.2")
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("h3 to h2 once lan2 forwards again: %v\n%s", err, out)
	}
}
