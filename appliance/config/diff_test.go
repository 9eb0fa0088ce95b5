package config

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/rules"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want Changes
	}{
		{"nothing", func(c *Config) {}, Changes{}},
		{"port mtu", func(c *Config) { c.Ports[1].MTU = 9000 }, Changes{Ports: []string{"lan1"}, Retune: true, Effect: Restart,
			Why: []string{"ports[1]: in NAT mode the router's MACs and MTUs come from its ports' interfaces"}}},
		{"port removed and added", func(c *Config) { c.Ports[2].Name = "lan3" }, Changes{Ports: []string{"lan2", "lan3"}, Retune: true}},
		{"port order only", func(c *Config) { c.Ports[0], c.Ports[1] = c.Ports[1], c.Ports[0] }, Changes{Effect: Restart,
			Why: []string{"ports: the enabled ports changed (wan,lan1 → lan1,wan); port ids follow their order"}}},
		{"rules", func(c *Config) { c.Rules.Rules[0].Comment = "x" }, Changes{Rules: true, Effect: Live}},
		{"policy", func(c *Config) { c.Rules.Policy[rules.Forward] = rules.Drop }, Changes{Rules: true, Effect: Live}},
		{"nat", func(c *Config) { c.NAT.Forwards = c.NAT.Forwards[:1] }, Changes{NAT: true, Effect: Live}},
		{"tuning", func(c *Config) { c.Tuning.Ports[0].RxRing = 2048 }, Changes{Tuning: true, Retune: true, Effect: Live}},
		{"bridge", func(c *Config) { c.Bridge.FDBSize = 100 }, Changes{Bridge: true, Effect: Restart,
			Why: []string{"bridge.fdbSize: the forwarding database is allocated once"}}},
		{"dashboard", func(c *Config) { c.Dashboard.Listen = ":9090" }, Changes{Dashboard: true}},
		{"host port", func(c *Config) { c.HostPort = nil }, Changes{HostPort: true, Effect: Restart,
			Why: []string{"hostPort: the host port's TAP device is created once"}}},
		{"mode", func(c *Config) { c.Mode = ModeBridge }, Changes{Mode: true, Effect: Restart, Why: []string{"mode: nat → bridge"}}},
		{"fast path", func(c *Config) { c.FastPath = FastPathOff }, Changes{FastPath: true, Effect: Restart,
			Why: []string{"fastPath: auto → off; the fast path is loaded when the dataplane starts"}}},
		{"several", func(c *Config) {
			c.Ports[0].Enabled = ptr(false)
			c.Tuning.Placement = "same"
			c.NAT.MSSClamp = ptr(false)
		},
			Changes{Ports: []string{"wan"}, NAT: true, Tuning: true, Retune: true, Effect: Restart,
				Why: []string{"ports: the enabled ports changed (wan,lan1 → lan1); port ids follow their order"}}},
		{"bridge mode: a port's MTU restarts that port", func(c *Config) {
			bridgeMode(c)
			c.Ports[1].MTU = 9000
		}, Changes{Ports: []string{"lan1"}, Retune: true, Effect: RestartPorts, Restart: []string{"lan1"},
			Why: []string{"ports[1]: a new interface or MTU reopens the port's rings"}}},
		{"aging, full policy, loop protection, statics and VLANs are live", func(c *Config) {
			c.Bridge.FDBAging = Duration(time.Second)
			c.Bridge.FDBFull = FDBRefuse
			c.Bridge.LoopProtection = ptr(false)
			c.Bridge.Static = nil
			c.Ports[1].VLANs = VLANs{Native: 5}
		}, Changes{Ports: []string{"lan1"}, Bridge: true, Retune: true, Effect: Live}},
		{"the router's LAN address", func(c *Config) { c.Ports[1].Addresses = []netip.Prefix{netip.MustParsePrefix("192.168.7.1/24")} },
			Changes{Ports: []string{"lan1"}, Retune: true, Effect: Restart,
				Why: []string{"the router's LAN address: the box's own stack on the host port has it"}}},
		{"conntrack size", func(c *Config) { c.NAT.Conntrack.Size = 4096 }, Changes{NAT: true, Effect: Restart,
			Why: []string{"nat.conntrack.size: the connection table is allocated once"}}},
		{"conntrack size default spelled out", func(c *Config) { c.NAT.Conntrack.Size = 0 }, Changes{NAT: true, Effect: Live}},
		{"roles", func(c *Config) { c.Ports[0].Role, c.Ports[1].Role = RoleLAN, RoleWAN }, Changes{Ports: []string{"lan1", "wan"}, Retune: true,
			Effect: Restart, Why: []string{"ports[0].role: the router's sides are fixed when it starts", "ports[1].role: the router's sides are fixed when it starts",
				"the router's LAN address: the box's own stack on the host port has it"}}},
		{"a static IPv6 prefix is live", func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7::/48") },
			Changes{Services: true, Effect: Live}},
		{"an IPv6 gateway is live", func(c *Config) { c.IPv6.Gateway = netip.MustParseAddr("fe80::1") },
			Changes{Services: true, Effect: Live}},
		{"the IPv6 WAN address setting is live", func(c *Config) { c.IPv6.WANAddress = WANAddressOff },
			Changes{Services: true, Effect: Live}},
		{"a disabled port", func(c *Config) { c.Ports[2].MTU = 9000 }, Changes{Ports: []string{"lan2"}, Retune: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, new := example(t), example(t)
			tt.edit(new)
			if tt.name == "bridge mode: a port's MTU restarts that port" {
				bridgeMode(old)
			}
			got := Diff(old, new)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if got.IsZero() != (tt.name == "nothing" || tt.name == "port order only") {
				t.Errorf("IsZero() = %v for %s", got.IsZero(), got)
			}
		})
	}
	b1, b2 := example(t), example(t)
	bridgeMode(b1)
	bridgeMode(b2)
	b2.Ports[1].MTU = 9000
	b2.Ports[0].Interface = "eth3"
	want := Changes{Ports: []string{"lan1", "wan"}, Retune: true, Effect: RestartPorts, Restart: []string{"lan1", "wan"},
		Why: []string{"ports[0]: a new interface or MTU reopens the port's rings", "ports[1]: a new interface or MTU reopens the port's rings"}}
	if diff := cmp.Diff(want, Diff(b1, b2)); diff != "" {
		t.Errorf("bridge mode, interface and MTU (-want +got):\n%s", diff)
	}
	if s := Diff(b1, b2).String(); s != "ports(lan1,wan): restart-ports(lan1,wan)" {
		t.Errorf("String() = %q", s)
	}
	all := Diff(nil, example(t))
	if !all.Mode || !all.Rules || len(all.Ports) != 3 || all.Effect != Restart || !all.Retune {
		t.Errorf("Diff(nil, c) = %s, want everything", all)
	}
	if s := (Changes{Ports: []string{"a", "b"}, Rules: true}).String(); s != "ports(a,b) rules" {
		t.Errorf("String() = %q", s)
	}
}

// bridgeMode turns the NAT example into a bridge config.
func bridgeMode(c *Config) {
	c.Mode = ModeBridge
	for i := range c.Ports {
		c.Ports[i].Role, c.Ports[i].Addresses = RoleNone, nil
	}
}

// TestDiffWANVLAN: the WAN link's VLAN id and priorities are live;
// tagging the WAN on or off restarts the WAN port only.
func TestDiffWANVLAN(t *testing.T) {
	vlan7 := LinkVLAN{ID: 7, PCP: 1, ControlPCP: 6}
	restart := Changes{NAT: true, Effect: RestartPorts, Restart: []string{"wan"},
		Why: []string{"nat.wan.vlan.id: tagging the WAN on or off resizes the WAN port's ring of tagged frames"}}
	for _, tc := range []struct {
		name     string
		old, new LinkVLAN
		want     Changes
	}{
		{"tagging on", LinkVLAN{}, vlan7, restart},
		{"tagging off", vlan7, LinkVLAN{}, restart},
		{"another VLAN", vlan7, LinkVLAN{ID: 10, PCP: 1, ControlPCP: 6}, Changes{NAT: true, Effect: Live}},
		{"priorities", vlan7, LinkVLAN{ID: 7, ControlPCP: 5}, Changes{NAT: true, Effect: Live}},
		{"same", vlan7, vlan7, Changes{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, new := example(t), example(t)
			old.NAT.WAN.VLAN, new.NAT.WAN.VLAN = tc.old, tc.new
			if diff := cmp.Diff(tc.want, Diff(old, new)); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
		})
	}
}
