package dataplane

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/rules"
)

// TestConfigCheck covers the engine's own invariants; a user's config is
// validated by package config (appliance/config), whose tests cover every
// refusal with its JSON path.
func TestConfigCheck(t *testing.T) {
	ok := func() *Config {
		return &Config{Ports: []Port{{Name: "lan", Interface: "eth1"}, {Interface: "eth2"}}, HostPort: &HostPort{}}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		errs   []string
	}{
		{"valid", func(*Config) {}, nil},
		{"no ports", func(c *Config) { c.Ports = nil }, []string{"no data ports"}},
		{"nat mode without a router", func(c *Config) { c.Mode = ModeNAT; c.Ports[0].Role = RoleWAN }, []string{"NAT mode without a router configuration"}},
		{"unknown mode", func(c *Config) { c.Mode = "router" }, []string{`mode "router"`}},
		{"duplicate name", func(c *Config) { c.Ports[1].Name = "lan" }, []string{"port names are not unique"}},
		{"static to unknown port", func(c *Config) {
			c.Bridge.Static = []StaticEntry{{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Port: "wan"}}
		}, []string{`static FDB entry 02:00:00:00:00:01: unknown port "wan"`}},
		{"rule with unknown port", func(c *Config) {
			c.Rules = &rules.Ruleset{Rules: []rules.Rule{{Match: rules.Match{InPort: "wan"}, Action: rules.Drop}}}
		}, []string{`rules: `, `unknown port "wan"`}},
		{"rule with the host port", func(c *Config) {
			c.Rules = &rules.Ruleset{Rules: []rules.Rule{{Chain: rules.Input, Match: rules.Match{InPort: "lan", OutPort: "host"}, Action: rules.Drop}}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok()
			tt.mutate(c)
			err := c.Check()
			if len(tt.errs) == 0 {
				if err != nil {
					t.Errorf("Check = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = nil, want %q", tt.errs)
			}
			for _, want := range tt.errs {
				if !bytes.Contains([]byte(err.Error()), []byte(want)) {
					t.Errorf("Check = %v, want it to contain %q", err, want)
				}
			}
		})
	}
	c := ok()
	if diff := cmp.Diff(map[string]uint16{"lan": 1, "eth2": 2, "host": 3}, c.PortNames()); diff != "" {
		t.Errorf("PortNames (-want +got):\n%s", diff)
	}
}

func TestNATConfigCheck(t *testing.T) {
	base := func() *Config {
		c := &Config{Ports: []Port{{Interface: "eth1"}, {Interface: "eth2"}}}
		c.Mode = ModeNAT
		c.Ports[0].Role, c.Ports[1].Role = RoleWAN, RoleLAN
		c.NAT = &NAT{LANAddr: netip.MustParsePrefix("192.168.1.1/24"), WANAddr: netip.MustParsePrefix("203.0.113.2/24"),
			Gateway: netip.MustParseAddr("203.0.113.1")}
		return c
	}
	if err := base().Check(); err != nil {
		t.Fatalf("valid NAT config: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no wan", func(c *Config) { c.Ports[0].Role = RoleLAN }, "NAT mode needs one WAN port and LAN ports, has 0 and 2"},
		{"two wans", func(c *Config) { c.Ports[1].Role = RoleWAN }, "NAT mode needs one WAN port and LAN ports, has 2 and 0"},
		{"no nat section", func(c *Config) { c.NAT = nil }, "without a router configuration"},
		{"bad mac", func(c *Config) { c.NAT.LANMAC = [6]byte{1, 0, 0x5e, 0, 0, 1} }, "not a unicast address"},
		{"gateway off the WAN", func(c *Config) { c.NAT.Gateway = netip.MustParseAddr("10.0.0.1") }, "gateway"},
		{"forward off the LAN", func(c *Config) {
			c.NAT.Forwards = []nat.PortForward{{Proto: frame.ProtoTCP, Port: 80, To: netip.MustParseAddrPort("10.9.9.9:80")}}
		}, "lan subnet"},
		{"unknown mode", func(c *Config) { c.Mode = "router" }, `mode "router"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(c)
			err := c.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestNATSameShape: what a NAT engine can take over in Apply and what
// needs a new engine (the appliance's config.Diff plans the same).
func TestNATSameShape(t *testing.T) {
	base := func() *Config {
		c := &Config{Ports: []Port{{Interface: "eth1"}, {Interface: "eth2"}, {Interface: "eth3"}}}
		natTestConfig(0)(c)
		return c
	}
	r, err := nat.New(base().natConfig(natPorts{wanID: 1, lanID: 2, wanMAC: [6]byte{2, 0, 0, 0, 0, 1}, lanMAC: [6]byte{2, 0, 0, 0, 0, 2}, wanMTU: 1500, lanMTU: 1500}))
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{tables: tables{natr: r}}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		same bool
	}{
		{"forwards and timeouts", func(c *Config) { c.NAT.Forwards = nil; c.NAT.Timeouts.UDPUnreplied = 1 }, true},
		{"WAN address", func(c *Config) {
			c.NAT.WANAddr, c.NAT.Gateway = netip.MustParsePrefix("198.18.0.2/24"), netip.MustParseAddr("198.18.0.1")
		}, true},
		{"table size", func(c *Config) { c.NAT.MaxConns = 4096 }, false},
		{"table size default spelled out", func(c *Config) { c.NAT.MaxConns = 65536 }, true},
		{"roles", func(c *Config) { c.Ports[0].Role, c.Ports[2].Role = RoleWAN, RoleLAN }, false},
		{"MAC", func(c *Config) { c.NAT.WANMAC = [6]byte{2, 0, 0, 0, 0, 7} }, false},
		{"mode", func(c *Config) { c.Mode = ModeBridge }, false},
		{"LAN MTU", func(c *Config) { c.Ports[1].MTU = 9000 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base()
			tc.mod(b)
			if got := e.sameShape(base(), b); got != tc.same {
				t.Errorf("sameShape = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestNATLinkMTU: the router's WAN MTU on a PPPoE WAN leaves the session
// header's 8 bytes of the port's MTU, also before a session (no WANMTU)
// and under a session MTU that the port could not carry.
func TestNATLinkMTU(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pppoe         bool
		port, session int
		want          int
	}{
		{"ethernet", false, 1500, 0, 1500},
		{"ethernet, DHCP MTU", false, 1500, 1400, 1400},
		{"PPPoE, no session", true, 1500, 0, 1492},
		{"PPPoE 1492", true, 1500, 1492, 1492},
		{"PPPoE 1500 on a 1500 port", true, 1500, 1500, 1492},
		{"PPPoE 1500 on a 1508 port", true, 1508, 1500, 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{NAT: &NAT{WANPPPoE: tc.pppoe, WANMTU: tc.session}}
			got := c.natConfig(natPorts{wanID: 1, lanID: 2, wanMTU: tc.port, lanMTU: 1500}).WAN.MTU
			if got != tc.want {
				t.Errorf("WAN MTU %d, want %d", got, tc.want)
			}
		})
	}
}
