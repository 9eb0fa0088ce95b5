package dhcpd

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestFlood sends DISCOVERs from 10,000 random MACs (one per millisecond
// of the fake clock) at a LAN with 20 known devices and two static ones.
// Throughout the flood the known devices renew and keep their addresses,
// a static device that was never seen gets its address, a new device gets
// a lease, and the table stays within its bound.
func TestFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"/24, default rate limit", func(c *Config) {}},
		{"/24, no rate limit", func(c *Config) { c.NewLeasesPerSecond = -1 }},
		{"/16, MaxLeases 4096", func(c *Config) {
			c.Subnet, c.ServerIP = netip.MustParsePrefix("10.70.0.0/16"), srvIP
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const floodSize = 10000
			cfg := testConfig()
			cfg.Static = []Static{
				{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.200")},
				{MAC: hw("02:00:00:00:00:06"), IP: netip.MustParseAddr("10.70.0.201")},
			}
			tc.cfg(&cfg)
			s, clk := newTestServer(t, cfg)
			known := map[string]netip.Addr{}
			for i := range 20 {
				m := macN(0x100 + i)
				known[m] = dora(t, s, m)
			}
			known[macS] = dora(t, s, macS)

			rng := rand.New(rand.NewPCG(1, 2))
			flood := make([]*dhcpv4.DHCPv4, floodSize)
			for i := range flood {
				m := net.HardwareAddr{0x02, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
				flood[i] = discover(t, m.String())
			}
			renewals := make([]*dhcpv4.DHCPv4, 0, len(known))
			var knownMACs []string
			for m, a := range known {
				knownMACs = append(knownMACs, m)
				renewals = append(renewals, renew(t, m, a.String()))
			}

			var floodTime time.Duration
			newDevices := 0
			for i, req := range flood {
				clk.Add(time.Millisecond)
				start := time.Now()
				s.Handle(req)
				floodTime += time.Since(start)
				if i%100 == 0 {
					k := i / 100 % len(renewals)
					if got, want := summary(s.Handle(renewals[k])), "ACK "+known[knownMACs[k]].String(); got != want {
						t.Fatalf("flood packet %d: %s renewing got %q, want %q", i, knownMACs[k], got, want)
					}
				}
				if i == floodSize/2 {
					if got := summary(s.Handle(discover(t, "02:00:00:00:00:06"))); got != "OFFER 10.70.0.201" {
						t.Errorf("the unseen static device was offered %q, want its 10.70.0.201", got)
					}
					if got := summary(s.Handle(selecting(t, "02:00:00:00:00:06", "10.70.0.201"))); got != "ACK 10.70.0.201" {
						t.Errorf("the unseen static device got %q", got)
					}
				}
				if i%2500 == 1234 {
					// A new device completes DORA in the middle of the flood.
					m := macN(0x200 + i)
					offer := s.Handle(discover(t, m))
					if offer == nil {
						t.Errorf("flood packet %d: a new device got no offer", i)
						continue
					}
					if got, want := summary(s.Handle(selecting(t, m, ip4(offer.YourIPAddr).String()))), "ACK "+ip4(offer.YourIPAddr).String(); got != want {
						t.Errorf("flood packet %d: a new device's request got %q, want %q", i, got, want)
					}
					newDevices++
				}
			}
			checkInvariants(t, s)
			for m, a := range known {
				if got := summary(s.Handle(renew(t, m, a.String()))); got != "ACK "+a.String() {
					t.Errorf("after the flood %s renewing %v got %q", m, a, got)
				}
			}
			st := s.Stats()
			s.mu.Lock()
			entries, offers := len(s.byKey), len(s.offers)
			s.mu.Unlock()
			if bound := s.pol.maxLeases + len(s.static); entries > bound {
				t.Errorf("%d entries after the flood, more than MaxLeases+statics %d", entries, bound)
			}
			if st.LeasesInUse != len(known)+1+newDevices {
				t.Errorf("%d leases in use after the flood, want the %d known devices, the static one and %d new ones",
					st.LeasesInUse, len(known), newDevices)
			}
			t.Logf("10k DISCOVER flood: %v in Handle (%v per packet); %d entries (%d offers), MaxLeases %d; stats %+v",
				floodTime, floodTime/floodSize, entries, offers, s.pol.maxLeases, st)
			if floodTime > 10*time.Second {
				t.Errorf("the flood took %v in Handle", floodTime)
			}
		})
	}
}

// TestRequestFlood: clients that complete DHCPREQUESTs (a pool starvation
// attack) are slowed by the new-lease rate limit and can never take a
// bound lease's address; known devices keep renewing.
func TestRequestFlood(t *testing.T) {
	cfg := testConfig()
	cfg.Subnet = netip.MustParsePrefix("10.70.0.0/16") // a pool larger than the rate limit lets through
	s, clk := newTestServer(t, cfg)
	known := dora(t, s, macA)
	rng := rand.New(rand.NewPCG(3, 4))
	bound := 0
	for i := range 10000 {
		clk.Add(time.Millisecond)
		m := net.HardwareAddr{0x02, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
		offer := s.Handle(discover(t, m.String()))
		if offer != nil && strings.HasPrefix(summary(s.Handle(selecting(t, m.String(), ip4(offer.YourIPAddr).String()))), "ACK") {
			bound++
		}
		if i%500 == 0 {
			if got := summary(s.Handle(renew(t, macA, known.String()))); got != "ACK "+known.String() {
				t.Fatalf("packet %d: the known device renewing got %q", i, got)
			}
		}
	}
	// 10 s at 50/s plus a burst of 100: at most 600 of the 10,000 bound.
	if limit := 2*DefaultNewLeases + 10*DefaultNewLeases; bound > limit {
		t.Errorf("%d attackers bound a lease in 10 s, more than the rate limit's %d", bound, limit)
	}
	t.Logf("%d of 10000 attacking clients bound a lease in 10 s (the pool has %d addresses)", bound, s.Stats().PoolSize)
	checkInvariants(t, s)
}
