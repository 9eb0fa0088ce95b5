package config

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidatePorts checks the data ports one by one (ports.go).
func TestValidatePorts(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "unknown interface",
			edit: func(c *Config) { c.Ports[1].Interface = "eth9" },
			want: map[string]string{"ports[1].interface": `unknown interface "eth9" (this box has: eth0, eth1, eth2, eth3, lo)`},
		},
		{
			name: "disabled port may name a missing interface",
			edit: func(c *Config) { c.Ports[2].Interface = "eth9" },
		},
		{
			name: "bad port names",
			edit: func(c *Config) { c.Ports[2].Name = "lan 2"; c.Ports[1].Name = "" },
			want: map[string]string{
				"ports[1].name":         "missing",
				"ports[2].name":         "characters other than",
				"bridge.static[0].port": `unknown port "lan1"`,
				"rules.rules[0].iif":    `unknown port "lan1"`,
			},
		},
		{
			name: "unknown role",
			edit: func(c *Config) { c.Ports[2].Role = "dmz" },
			want: map[string]string{"ports[2].role": `want lan or wan, got "dmz"`},
		},
		{
			name:   "VLANs out of range",
			bridge: true,
			edit:   func(c *Config) { c.Ports[1].VLANs = VLANs{Native: 4095, Allowed: []uint16{10, 0, 5000}} },
			want: map[string]string{
				"ports[1].vlans.native":     "VLAN 4095 out of range 1..4094",
				"ports[1].vlans.allowed[1]": "VLAN 0 out of range 1..4094",
				"ports[1].vlans.allowed[2]": "VLAN 5000 out of range 1..4094",
			},
		},
		{
			name:   "VLAN listed twice or native",
			bridge: true,
			edit:   func(c *Config) { c.Ports[1].VLANs = VLANs{Native: 10, Allowed: []uint16{20, 20, 10}} },
			want: map[string]string{
				"ports[1].vlans.allowed[1]": "VLAN 20 already listed at allowed[0]",
				"ports[1].vlans.allowed[2]": "VLAN 10 is the native VLAN",
			},
		},
		{
			name: "MTU out of range",
			edit: func(c *Config) { c.Ports[0].MTU = 67; c.Ports[1].MTU = 9217 },
			want: map[string]string{
				"ports[0].mtu": "67 out of range 68..9216",
				"ports[1].mtu": "9217 out of range 68..9216",
			},
		},
		{
			name:   "MTU limits",
			bridge: true,
			edit:   func(c *Config) { c.Ports[0].MTU = 68; c.Ports[1].MTU = 9216 },
		},
		{
			name:   "no enabled port",
			bridge: true,
			edit: func(c *Config) {
				for i := range c.Ports {
					c.Ports[i].Enabled = ptr(false)
				}
			},
			want: map[string]string{"ports": "no enabled port"},
		},
	})
}

func TestValidatePortCount(t *testing.T) {
	c := bridgeConfig(t)
	for i := range 29 {
		c.Ports = append(c.Ports, Port{Name: fmt.Sprintf("x%d", i), Interface: fmt.Sprintf("x%d", i)})
	}
	if err := c.Validate(Env{}); err != nil { // 32 ports with the host port
		t.Fatalf("32 ports: %v", err)
	}
	c.Ports = append(c.Ports, Port{Name: "x29", Interface: "x29"})
	err := c.Validate(Env{})
	if diff := cmp.Diff(Errors{{Path: "ports", Message: "33 enabled ports (the host port included); the dataplane runs at most 32"}}, AsErrors(err)); diff != "" {
		t.Errorf("33 ports (-want +got):\n%s", diff)
	}
}
