package dataplane

import (
	"fmt"
	"testing"
	"time"
)

// TestLinkNotifications takes a port's carrier away and back (its veth
// peer down and up) with the periodic resync pushed out of reach: only the
// link notifications can tell the engine, and they must within moments.
func TestLinkNotifications(t *testing.T) {
	old := linkResync
	linkResync = time.Hour
	t.Cleanup(func() { linkResync = old })
	tp := newTopo(t, 2)
	e := tp.engine(&Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}}})
	if e.links == nil {
		t.Fatal("the engine polls the links: no notification subscription")
	}
	linkUp := func() bool {
		for _, p := range e.Snapshot().Ports {
			if p.Name == "p1" {
				return p.LinkUp
			}
		}
		t.Fatal("no port p1 in the snapshot")
		return false
	}
	// The kernel's link watch sends a carrier change up to a second late
	// (as it tells the kernel's own bridge); the limit leaves room for a
	// loaded machine and is still far from the resync.
	const within = 5 * time.Second
	for _, tc := range []struct {
		state string
		want  bool
	}{
		{"down", false},
		{"up", true},
		{"down", false},
		{"up", true},
	} {
		tp.hosts[0].IP(t, "link", "set", "eth0", tc.state)
		start := time.Now()
		eventually(t, within, fmt.Sprintf("peer %s: p1 link up %v", tc.state, tc.want), func() (bool, string) {
			up := linkUp()
			return up == tc.want, fmt.Sprintf("link up %v", up)
		})
		t.Logf("peer %s: p1 link up %v after %v", tc.state, tc.want, time.Since(start).Round(time.Millisecond))
	}
}

// TestIdleWorkerTakesUpdate restarts one port while the other's worker
// sleeps (no frames, no loop probes, an idle tick out of reach): Apply
// wakes it for its new TX socket instead of waiting for its tick, which
// would fail after updateTimeout.
func TestIdleWorkerTakesUpdate(t *testing.T) {
	old := pollTimeout
	pollTimeout = time.Minute
	t.Cleanup(func() { pollTimeout = old })
	tp := newTopo(t, 2)
	for _, h := range tp.hosts {
		h.Sysctl(t, "net.ipv6.conf.eth0.disable_ipv6=1") // no router solicitations or MLD reports
	}
	cfg := &Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}}}
	cfg.Bridge.NoLoopProtect = true
	e := tp.engine(cfg)
	time.Sleep(200 * time.Millisecond) // both workers asleep
	cfg2 := *cfg
	cfg2.Ports = []Port{{Interface: "p1"}, {Interface: "p2", MTU: 1400}}
	var err error
	start := time.Now()
	tp.box.Do(t, func() { err = e.Apply(&cfg2, "p2") })
	if err != nil {
		t.Fatalf("Apply with p2's MTU changed: %v", err)
	}
	if d := time.Since(start); d > updateTimeout/2 {
		t.Errorf("Apply took %v, want under %v", d, updateTimeout/2)
	} else {
		t.Logf("Apply took %v", d)
	}
	if err := tp.ping(1, "10.42.0.2"); err != nil {
		t.Errorf("after the change: %v", err)
	}
}

// TestRestartReadsLinks moves a port to another interface whose link is up
// and stays up, with the periodic resync pushed out of reach: no
// notification comes for it, so the restart itself must read its state.
func TestRestartReadsLinks(t *testing.T) {
	old := linkResync
	linkResync = time.Hour
	t.Cleanup(func() { linkResync = old })
	tp := newTopo(t, 3)
	cfg := &Config{Ports: []Port{{Name: "a", Interface: "p1"}, {Name: "b", Interface: "p2"}}}
	e := tp.engine(cfg)
	time.Sleep(200 * time.Millisecond) // the subscription's first notifications are in
	cfg2 := *cfg
	cfg2.Ports = []Port{{Name: "a", Interface: "p1"}, {Name: "b", Interface: "p3"}}
	var err error
	tp.box.Do(t, func() { err = e.Apply(&cfg2, "b") })
	if err != nil {
		t.Fatalf("Apply with port b moved to p3: %v", err)
	}
	start := time.Now()
	// Without the restart's own read, the link would be read at the next
	// resync, an hour away.
	eventually(t, 5*time.Second, "port b on p3 with its link up", func() (bool, string) {
		ports := e.Snapshot().Ports
		for _, p := range ports {
			if p.Name == "b" {
				return p.LinkUp && p.Interface == "p3", fmt.Sprintf("%+v", p)
			}
		}
		return false, fmt.Sprintf("no port b in %+v", ports)
	})
	t.Logf("port b on p3 up %v after the restart", time.Since(start).Round(time.Millisecond))
	if err := tp.ping(1, "10.42.0.3"); err != nil {
		t.Errorf("h1 → h3 after the move: %v", err)
	}
}
