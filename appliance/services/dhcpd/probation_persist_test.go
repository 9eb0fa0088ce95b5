package dhcpd

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPersistProbation: a binding's proven state, the time it began and
// its port survive a restart, and a lease file from before probation
// loads its bindings as proven.
func TestPersistProbation(t *testing.T) {
	const e = "02:00:00:00:00:0e"
	file := func(t *testing.T, lan *fakeLAN) Config {
		cfg := testConfig()
		cfg.PoolStart, cfg.PoolEnd = netip.MustParseAddr("10.70.0.10"), netip.MustParseAddr("10.70.0.11")
		cfg.LeaseFile = filepath.Join(t.TempDir(), "leases.json")
		cfg.UnprovenShare = 100
		lan.wire(&cfg)
		return cfg
	}
	for _, tc := range []struct {
		name string
		// before fills the lease file: with a first server or as text.
		before     func(t *testing.T, cfg Config, lan *fakeLAN) (*fakeClock, string)
		wantLoaded []string
		wantPorts  []PortStats // after the restart
		// after a new device asks, the pool being short.
		wantOffer  string
		wantLeases []string
	}{
		{
			name: "an unproven binding stays unproven, with its age and port",
			before: func(t *testing.T, cfg Config, lan *fakeLAN) (*fakeClock, string) {
				lan.on(macB, "lan2")
				s1, clk := newTestServer(t, cfg)
				dora(t, s1, macA)
				clk.Add(time.Second)
				b := dora(t, s1, macB)
				clk.Add(time.Second)
				lan.use(b, macB, clk.Now())
				s1.prove()
				if err := s1.flush(); err != nil {
					t.Fatal(err)
				}
				return clk, ""
			},
			wantLoaded: []string{macA + " 10.70.0.10 bound unproven", macB + " 10.70.0.11 bound"},
			wantPorts:  []PortStats{{Port: "lan1", Unproven: 1}},
			wantOffer:  "OFFER 10.70.0.10", // A's, past its probation
			wantLeases: []string{e + " 10.70.0.10 offered", macB + " 10.70.0.11 bound"},
		},
		{
			name: "a file from before probation: its bindings count as proven",
			before: func(t *testing.T, cfg Config, lan *fakeLAN) (*fakeClock, string) {
				return newClock(), `{"version":1,"leases":[` +
					`{"mac":"02:00:00:00:00:0a","ip":"10.70.0.10","state":"bound","expiry":"2026-07-01T18:00:00Z","last_seen":"2026-07-01T11:00:00Z"},` +
					`{"mac":"02:00:00:00:00:0b","ip":"10.70.0.11","state":"bound","expiry":"2026-07-01T18:00:00Z","last_seen":"2026-07-01T11:00:00Z"}]}`
			},
			wantLoaded: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound"},
			wantOffer:  "",
			wantLeases: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lan := newFakeLAN("lan1")
			cfg := file(t, lan)
			clk, text := tc.before(t, cfg, lan)
			if text != "" {
				if err := os.WriteFile(cfg.LeaseFile, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s2, err := newServer(cfg, testLog(t), clk.Now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLoaded, leaseLines(s2)); diff != "" {
				t.Errorf("Leases after the restart (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPorts, s2.Stats().Ports); diff != "" {
				t.Errorf("Stats.Ports after the restart (-want +got):\n%s", diff)
			}
			checkInvariants(t, s2)
			clk.Add(2 * time.Minute)
			lan.on(e, "lan3")
			if got := summary(s2.Handle(discover(t, e))); got != tc.wantOffer {
				t.Errorf("a new device with the pool short: %q, want %q", got, tc.wantOffer)
			}
			if diff := cmp.Diff(tc.wantLeases, leaseLines(s2)); diff != "" {
				t.Errorf("Leases then (-want +got):\n%s", diff)
			}
			checkInvariants(t, s2)
		})
	}
}
