package dhcpd

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// pstep is one step of a probation case: the clock moves by advance,
// then the device on moves to its port ("mac port"), the device use
// sends traffic through the box from the address it holds (or from the
// one it names: "mac ip"), the device forget is forgotten (Forget), the
// server's periodic check for use runs (prove), and req is handled, its
// reply summarized to want.
type pstep struct {
	advance time.Duration
	on      [2]string
	use     string
	forget  string
	prove   bool
	req     *dhcpv4.DHCPv4
	want    string
}

// probationCase is a server of its own on a 4-address pool (10.70.0.10-13),
// devices on port lan1 unless moved, through steps.
type probationCase struct {
	name       string
	cfg        func(*Config)
	steps      []pstep
	wantLeases []string
	wantPorts  []PortStats // nil: not checked
}

func runProbation(t *testing.T, cases []probationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.PoolStart, cfg.PoolEnd = netip.MustParseAddr("10.70.0.10"), netip.MustParseAddr("10.70.0.13")
			cfg.UnprovenShare = 100
			lan := newFakeLAN("lan1")
			lan.wire(&cfg)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			s, clk := newTestServer(t, cfg)
			for i, st := range tc.steps {
				clk.Add(st.advance)
				if st.on[0] != "" {
					lan.on(st.on[0], st.on[1])
				}
				if m, a, ok := strings.Cut(st.use, " "); ok {
					lan.use(netip.MustParseAddr(a), m, clk.Now())
				} else if st.use != "" {
					for _, l := range s.Leases() {
						if l.MAC.String() == st.use {
							lan.use(l.IP, st.use, clk.Now())
						}
					}
				}
				if st.forget != "" {
					if err := s.Forget(hw(st.forget)); err != nil {
						t.Errorf("step %d: Forget(%s): %v", i, st.forget, err)
					}
				}
				if st.prove {
					s.prove()
				}
				if st.req != nil {
					if got := summary(s.Handle(st.req)); got != st.want {
						t.Errorf("step %d (%s %s): got %q, want %q", i, st.req.MessageType(), st.req.ClientHWAddr, got, st.want)
					}
				}
				checkInvariants(t, s)
			}
			if diff := cmp.Diff(tc.wantLeases, leaseLines(s)); diff != "" {
				t.Errorf("Leases (-want +got):\n%s", diff)
			}
			if tc.wantPorts != nil {
				if diff := cmp.Diff(tc.wantPorts, s.Stats().Ports); diff != "" {
					t.Errorf("Stats.Ports (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// doraSteps are the steps of a DORA of mac, a second after the step
// before, that gets address a.
func doraSteps(t *testing.T, mac, a string) []pstep {
	return []pstep{
		{advance: time.Second, req: discover(t, mac), want: "OFFER " + a},
		{req: selecting(t, mac, a), want: "ACK " + a},
	}
}

func steps(parts ...[]pstep) []pstep {
	var out []pstep
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestProbation: which bindings are proven, and which unproven one goes
// first: the share of unproven bindings within their probation, the pool
// running short, offers, the per-port limit of new devices.
func TestProbation(t *testing.T) {
	const e, f = "02:00:00:00:00:0e", "02:00:00:00:00:0f"
	share50 := func(c *Config) { c.UnprovenShare = 50 } // 2 of the 4 addresses
	runProbation(t, []probationCase{
		{
			name: "a binding is unproven until its device uses the address",
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				[]pstep{{advance: 5 * time.Second, use: macA, prove: true}, {advance: 2 * time.Minute, prove: true}}),
			wantLeases: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound unproven"},
		},
		{
			name: "traffic from before the binding proves nothing",
			steps: steps([]pstep{{req: discover(t, macA), want: "OFFER 10.70.0.10"}},
				[]pstep{{use: macA, advance: time.Second}}, // the offer's address, before the ACK
				[]pstep{{advance: 2 * time.Second, req: selecting(t, macA, "10.70.0.10"), want: "ACK 10.70.0.10"}, {prove: true}}),
			wantLeases: []string{macA + " 10.70.0.10 bound unproven"},
		},
		{
			name: "past the share, a binding reclaims the oldest of the port holding the most",
			cfg:  share50,
			steps: steps([]pstep{{on: [2]string{macC, "lan2"}}},
				doraSteps(t, macC, "10.70.0.10"), // lan2
				doraSteps(t, macA, "10.70.0.11"), // lan1
				doraSteps(t, macB, "10.70.0.12"), // lan1: 3 > 2, A goes (lan1 holds 2)
				doraSteps(t, macD, "10.70.0.13"), // lan1: B goes
			),
			wantLeases: []string{macC + " 10.70.0.10 bound unproven", macD + " 10.70.0.13 bound unproven"},
			wantPorts: []PortStats{{Port: "lan1", Unproven: 1, Reclaimed: 2, Flooding: true},
				{Port: "lan2", Unproven: 1}},
		},
		{
			name: "the share counts only bindings within their probation",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				[]pstep{{advance: 2 * time.Minute}},
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13")),
			wantLeases: []string{macA + " 10.70.0.10 bound unproven", macB + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "a used binding is never reclaimed for the share",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), []pstep{{advance: time.Second, use: macA}},
				doraSteps(t, macB, "10.70.0.11"), doraSteps(t, macC, "10.70.0.12"),
				doraSteps(t, macD, "10.70.0.13")), // C's: A is found in use; D's: B goes
			wantLeases: []string{macA + " 10.70.0.10 bound", macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "the pool short: the oldest unused binding goes first",
			steps: steps(doraSteps(t, macA, "10.70.0.10"), []pstep{{advance: time.Second}},
				doraSteps(t, macB, "10.70.0.11"), []pstep{{advance: 2 * time.Minute, on: [2]string{macC, "lan2"}}},
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"),
				[]pstep{{on: [2]string{e, "lan3"}}},
				doraSteps(t, e, "10.70.0.10")), // A, past its probation
			wantLeases: []string{e + " 10.70.0.10 bound unproven", macB + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
			wantPorts: []PortStats{{Port: "lan1", Unproven: 2, Reclaimed: 1}, // not a flood: A was unused
				{Port: "lan2", Unproven: 1}, {Port: "lan3", Unproven: 1}},
		},
		{
			name: "the pool short, none unused: the oldest of the port holding the most in probation",
			steps: steps([]pstep{{on: [2]string{macA, "lan2"}}},
				doraSteps(t, macA, "10.70.0.10"), // lan2, the oldest of all
				doraSteps(t, macB, "10.70.0.11"), doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"),
				[]pstep{{on: [2]string{e, "lan2"}}},
				doraSteps(t, e, "10.70.0.11")), // B: lan1 holds 3
			wantLeases: []string{macA + " 10.70.0.10 bound unproven", e + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "the pool full of used bindings: no address for a new device",
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"),
				[]pstep{{advance: time.Second, use: macA}, {use: macB}, {use: macC}, {use: macD, prove: true},
					{advance: 2 * time.Minute, req: discover(t, e), want: ""}}),
			wantLeases: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound",
				macC + " 10.70.0.12 bound", macD + " 10.70.0.13 bound"},
		},
		{
			name: "use is looked for again just before a reclaim",
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"),
				[]pstep{{advance: 2 * time.Minute, use: macA}}, // after the last periodic check
				doraSteps(t, e, "10.70.0.11")),
			wantLeases: []string{macA + " 10.70.0.10 bound", e + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "offers are reclaimed from the port holding the most",
			steps: []pstep{
				{on: [2]string{macD, "lan2"}, req: discover(t, macD), want: "OFFER 10.70.0.10"}, // the oldest offer
				{req: discover(t, macA), want: "OFFER 10.70.0.11"},
				{req: discover(t, macB), want: "OFFER 10.70.0.12"},
				{req: discover(t, macC), want: "OFFER 10.70.0.13"},
				{on: [2]string{e, "lan3"}, req: discover(t, e), want: "OFFER 10.70.0.11"}, // A's: lan1 holds 3
				{req: selecting(t, macD, "10.70.0.10"), want: "ACK 10.70.0.10"},
				{req: selecting(t, e, "10.70.0.11"), want: "ACK 10.70.0.11"},
			},
			wantLeases: []string{macD + " 10.70.0.10 bound unproven", e + " 10.70.0.11 bound unproven",
				macB + " 10.70.0.12 offered", macC + " 10.70.0.13 offered"},
		},
		{
			name: "new devices are limited per port",
			cfg:  func(c *Config) { c.NewLeasesPerSecond = 1 }, // a burst of 2
			steps: []pstep{
				{req: discover(t, macA), want: "OFFER 10.70.0.10"}, {req: selecting(t, macA, "10.70.0.10"), want: "ACK 10.70.0.10"},
				{req: discover(t, macB), want: "OFFER 10.70.0.11"}, {req: selecting(t, macB, "10.70.0.11"), want: "ACK 10.70.0.11"},
				{req: discover(t, macC), want: "OFFER 10.70.0.12"},
				{req: selecting(t, macC, "10.70.0.12"), want: ""}, // lan1's limit
				{on: [2]string{macD, "lan2"}, req: discover(t, macD), want: "OFFER 10.70.0.13"},
				{req: selecting(t, macD, "10.70.0.13"), want: "ACK 10.70.0.13"}, // lan2's own
				{advance: time.Second, req: selecting(t, macC, "10.70.0.12"), want: "ACK 10.70.0.12"}},
			wantLeases: []string{macA + " 10.70.0.10 bound unproven", macB + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
			wantPorts: []PortStats{{Port: "lan1", Unproven: 3, Refused: 1, Flooding: true}, {Port: "lan2", Unproven: 1}},
		},
		{
			name: "a device seen using its address is no new device",
			cfg:  func(c *Config) { c.NewLeasesPerSecond = 1 },
			steps: steps(doraSteps(t, macA, "10.70.0.10"), []pstep{{advance: time.Second, use: macA, prove: true}},
				[]pstep{{advance: DefaultLeaseTime}},                               // A's lease ends
				doraSteps(t, macB, "10.70.0.11"), doraSteps(t, macC, "10.70.0.12"), // lan1's burst
				doraSteps(t, macA, "10.70.0.10")), // A: proven, not limited
			wantLeases: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven"},
		},
		{
			name: "a renewal keeps the binding's probation",
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"),
				[]pstep{{advance: 2 * time.Minute, req: renew(t, macA, "10.70.0.10"), want: "ACK 10.70.0.10"},
					{on: [2]string{e, "lan2"}}},
				doraSteps(t, e, "10.70.0.10")), // A, the oldest unused all the same
			wantLeases: []string{e + " 10.70.0.10 bound unproven", macB + " 10.70.0.11 bound unproven",
				macC + " 10.70.0.12 bound unproven", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "a reclaimed device that renews gets its address back while it is free",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), // A goes
				[]pstep{{advance: 10 * time.Second, req: renew(t, macA, "10.70.0.10"), want: "ACK 10.70.0.10"}}), // B goes
			wantLeases: []string{macA + " 10.70.0.10 bound unproven", macC + " 10.70.0.12 bound unproven"},
		},
		{
			name: "a reclaimed device seen using its address gets it back",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), // A goes
				[]pstep{{advance: 10 * time.Second, use: macA + " 10.70.0.10", prove: true}}),
			wantLeases: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound unproven", macC + " 10.70.0.12 bound unproven"},
		},
		{
			name: "... also when an unproven device holds it by then",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"), // A, B go
				doraSteps(t, e, "10.70.0.10"),                                            // C goes
				[]pstep{{advance: time.Second, use: macA + " 10.70.0.10", prove: true}}), // E goes
			wantLeases: []string{macA + " 10.70.0.10 bound", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "... but not when a device that uses it holds it",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"), // A, B go
				doraSteps(t, e, "10.70.0.10"), // C goes
				[]pstep{{advance: time.Second, use: e, prove: true}, {use: macA + " 10.70.0.10", prove: true}}),
			wantLeases: []string{e + " 10.70.0.10 bound", macD + " 10.70.0.13 bound unproven"},
		},
		{
			name: "... nor after its probation",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), // A goes
				[]pstep{{advance: 2 * time.Minute, prove: true}, {use: macA + " 10.70.0.10", prove: true}}),
			wantLeases: []string{macB + " 10.70.0.11 bound unproven", macC + " 10.70.0.12 bound unproven"},
		},
		{
			name: "... nor after it was forgotten",
			cfg:  share50,
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), // A goes
				[]pstep{{forget: macA}, {use: macA + " 10.70.0.10", prove: true}}),
			wantLeases: []string{macB + " 10.70.0.11 bound unproven", macC + " 10.70.0.12 bound unproven"},
		},
		{
			name: "without Activity every binding counts as proven",
			cfg:  func(c *Config) { c.Activity = nil; c.UnprovenShare = 25 },
			steps: steps(doraSteps(t, macA, "10.70.0.10"), doraSteps(t, macB, "10.70.0.11"),
				doraSteps(t, macC, "10.70.0.12"), doraSteps(t, macD, "10.70.0.13"),
				[]pstep{{advance: 2 * time.Minute, req: discover(t, e), want: ""}}),
			wantLeases: []string{macA + " 10.70.0.10 bound", macB + " 10.70.0.11 bound",
				macC + " 10.70.0.12 bound", macD + " 10.70.0.13 bound"},
		},
	})
}
