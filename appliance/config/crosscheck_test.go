package config

import (
	"net/netip"
	"testing"
)

// TestValidateCrossSection checks what spans sections (crosscheck.go): names, interfaces and addresses used twice, the host port the router services need.
func TestValidateCrossSection(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "duplicate port name",
			edit: func(c *Config) { c.Ports[2].Name = "lan1" },
			want: map[string]string{"ports[2].name": `duplicate port name "lan1" (already at ports[1].name)`},
		},
		{
			name: "duplicate interface",
			edit: func(c *Config) { c.Ports[2].Interface = "eth2" },
			want: map[string]string{"ports[2].interface": `interface "eth2" is already used at ports[1].interface`},
		},
		{
			name: "host port name collides",
			edit: func(c *Config) { c.HostPort.Name = "wan" },
			want: map[string]string{"hostPort.name": `duplicate port name "wan" (already at ports[0].name)`},
		},
		{
			name: "host port interface collides",
			edit: func(c *Config) { c.HostPort.Interface = "eth1" },
			want: map[string]string{"hostPort.interface": `interface "eth1" is already used at ports[0].interface`},
		},
		{
			name: "overlapping addresses on different segments",
			edit: func(c *Config) { c.HostPort.Addresses = prefixes("203.0.113.7/24") },
			want: map[string]string{"hostPort.addresses[0]": "203.0.113.7/24 overlaps 203.0.113.2/24 at ports[0].addresses[0], which is on another segment (wan, not lan)"},
		},
		{
			name: "same address twice",
			edit: func(c *Config) { c.HostPort.Addresses = prefixes("192.168.1.1/24") },
			want: map[string]string{"hostPort.addresses[0]": "address 192.168.1.1 is already used at ports[1].addresses[0]"},
		},
		{
			name: "network and broadcast addresses",
			edit: func(c *Config) { c.Ports[1].Addresses = prefixes("192.168.1.0/24", "10.0.0.255/24", "::/64") },
			want: map[string]string{
				"ports[1].addresses[0]": "192.168.1.0 is the network address of 192.168.1.0/24; use a host address like 192.168.1.1",
				"ports[1].addresses[1]": "broadcast address",
				"ports[1].addresses[2]": "not a host address",
			},
		},
		{
			name: "prefix length 0 and missing prefix",
			edit: func(c *Config) { c.HostPort.Addresses = []netip.Prefix{netip.MustParsePrefix("192.168.1.7/0"), {}} },
			want: map[string]string{
				"hostPort.addresses[0]": "prefix length /0",
				"hostPort.addresses[1]": "missing",
			},
		},
		{
			name: "bridge mode takes no port addresses",
			edit: func(c *Config) { c.Mode = ModeBridge },
			want: map[string]string{
				"ports[0].addresses": "bridge mode forwards transparently",
				"ports[1].addresses": "put the box's address on hostPort.addresses",
			},
		},
		{
			name: "services need the host port",
			edit: func(c *Config) { c.HostPort = nil; c.Bridge.Static = nil },
			want: map[string]string{"hostPort": "the router's DHCP and DNS servers run on the host port",
				"ipv6.enabled": "the router advertisements come from the box's stack on the host port"},
		},
		{
			name: "IPv6 without the host port",
			edit: func(c *Config) {
				c.HostPort = nil
				c.Bridge.Static = nil
				c.DHCP.Enabled, c.DNS.Enabled = ptr(false), ptr(false)
			},
			want: map[string]string{"ipv6.enabled": "add \"hostPort\": {} or turn IPv6 off"},
		},
		{
			name: "IPv6 off without the host port",
			edit: func(c *Config) {
				c.HostPort = nil
				c.Bridge.Static = nil
				c.DHCP.Enabled, c.DNS.Enabled, c.IPv6.Enabled = ptr(false), ptr(false), ptr(false)
			},
		},
	})
}
