package dhcpd

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// simDevice is a real device in a starvation run: it does DORA on port
// from start, asking again every retry until it is bound (as udhcpc -T 1
// does), then uses its address after a delay and renews every renew.
type simDevice struct {
	mac, port     string
	start, delay  time.Duration
	retry, renew  time.Duration
	addr          netip.Addr
	boundAt       time.Duration // -1 while not bound
	used, lost    bool
	next, renewed time.Duration
}

// step acts at time now (since the run's start).
func (d *simDevice) step(t *testing.T, s *Server, lan *fakeLAN, clk *fakeClock, now time.Duration) {
	switch {
	case now < d.start || now < d.next:
	case d.boundAt < 0:
		d.next = now + d.retry
		offer := s.Handle(discover(t, d.mac))
		if offer == nil {
			return
		}
		a := ip4(offer.YourIPAddr)
		if summary(s.Handle(selecting(t, d.mac, a.String()))) == "ACK "+a.String() {
			d.addr, d.boundAt, d.next = a, now, now+d.delay
		}
	case !d.used:
		lan.use(d.addr, d.mac, clk.Now())
		d.used, d.next = true, now+d.renew
	default:
		d.next = now + d.renew
		d.renewed = now
		if got := summary(s.Handle(renew(t, d.mac, d.addr.String()))); got != "ACK "+d.addr.String() {
			t.Errorf("%v: %s (%s) renewing %v got %q", now, d.mac, d.port, d.addr, got)
			d.lost = true
		}
		lan.use(d.addr, d.mac, clk.Now())
	}
}

// TestStarvation: a host on port lan1 runs a DHCP starvation, DISCOVER
// and REQUEST from 2000 random MACs over 20 s, at a pool of 150
// addresses with the default limits. A device on lan2 that uses its
// lease keeps and renews it; new devices get a lease and keep it: one on
// lan3 (another port) at once, two on lan1 (the flood's) within 30 s, one
// of them silent for 5 s after it is bound; the flood holds at most the
// share of unproven bindings; the flooding port is named.
func TestStarvation(t *testing.T) {
	cfg := testConfig()
	cfg.PoolStart, cfg.PoolEnd = netip.MustParseAddr("10.70.0.100"), netip.MustParseAddr("10.70.0.249")
	lan := newFakeLAN("lan1")
	lan.wire(&cfg)
	s, clk := newTestServer(t, cfg)
	s.log = testLogAt(t, slog.LevelWarn) // not every lease bound
	devs := []*simDevice{
		{mac: macA, port: "lan2", start: 0, delay: 500 * time.Millisecond, retry: time.Second, renew: 2 * time.Second},
		{mac: macB, port: "lan3", start: 10 * time.Second, delay: 500 * time.Millisecond, retry: time.Second, renew: 5 * time.Second},
		{mac: macC, port: "lan1", start: 5 * time.Second, delay: 500 * time.Millisecond, retry: time.Second, renew: 5 * time.Second},
		// A slow one on the flood's port: reclaimed, then given back.
		{mac: macD, port: "lan1", start: 12 * time.Second, delay: 5 * time.Second, retry: time.Second, renew: 5 * time.Second},
	}
	for _, d := range devs {
		d.boundAt = -1
		lan.on(d.mac, d.port)
	}
	const (
		flood = 2000
		over  = 20 * time.Second
		tick  = 10 * time.Millisecond
	)
	rng := rand.New(rand.NewPCG(11, 12))
	sent, bound, maxFlood := 0, 0, 0
	for now := time.Duration(0); now <= over+10*time.Second; now += tick {
		clk.Add(tick)
		// The devices act before or after the flood's frames of the
		// tick, as it happens.
		first := rng.IntN(2) == 0
		if first {
			for _, d := range devs {
				d.step(t, s, lan, clk, now)
			}
		}
		for ; now < over && sent < int(now*flood/over)+1; sent++ {
			m := net.HardwareAddr{0x02, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
			if offer := s.Handle(discover(t, m.String())); offer != nil &&
				strings.HasPrefix(summary(s.Handle(selecting(t, m.String(), ip4(offer.YourIPAddr).String()))), "ACK") {
				bound++
			}
		}
		if !first {
			for _, d := range devs {
				d.step(t, s, lan, clk, now)
			}
		}
		if now%time.Second == 0 {
			s.prove()
		}
		if now%sweepEvery == 0 {
			s.sweep()
		}
		st := s.Stats()
		maxFlood = max(maxFlood, st.Unproven)
	}
	checkInvariants(t, s)
	st := s.Stats()
	for _, d := range devs {
		switch {
		case d.boundAt < 0:
			t.Errorf("%s on %s got no lease", d.mac, d.port)
		case d.boundAt-d.start > 30*time.Second:
			t.Errorf("%s on %s got a lease %v after it asked, more than 30 s", d.mac, d.port, d.boundAt-d.start)
		case d.lost:
			t.Errorf("%s on %s lost its lease", d.mac, d.port)
		}
		t.Logf("%s on %s: asked at %v, bound %v after, last renewed at %v", d.mac, d.port, d.start, d.boundAt-d.start, d.renewed)
	}
	if maxFlood > s.pol.unproven {
		t.Errorf("the flood held up to %d unproven bindings, more than the share %d", maxFlood, s.pol.unproven)
	}
	var flooding []string
	for _, p := range st.Ports {
		if p.Flooding {
			flooding = append(flooding, p.Port)
		}
	}
	if fmt.Sprint(flooding) != "[lan1]" || st.Reclaimed == 0 || st.Ports[0].Revived == 0 {
		t.Errorf("ports flooding %v, %d reclaimed, %+v; want lan1 alone, some reclaimed and the slow device's given back", flooding, st.Reclaimed, st.Ports)
	}
	t.Logf("%d MACs over %v: %d bound a lease, at most %d unproven at once (share %d of the pool's %d); %d reclaimed, %d refused; ports %+v",
		sent, over, bound, maxFlood, s.pol.unproven, st.PoolSize, st.Reclaimed, st.Refused, st.Ports)
}
