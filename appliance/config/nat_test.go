package config

import (
	"net/netip"
	"testing"
	"time"
)

// TestValidateNAT checks the NAT router's ports, WAN, gateway, masquerade ports and connection table (nat.go).
func TestValidateNAT(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "NAT without WAN",
			edit: func(c *Config) { c.Ports[0].Role = RoleLAN },
			want: map[string]string{
				"ports":                 "NAT mode needs exactly one enabled port with role wan, found none",
				"ports[1].addresses[0]": "the router has one LAN address (ports[0].addresses[0] already)",
			},
		},
		{
			name: "NAT with two WANs",
			edit: func(c *Config) { c.Ports[2].Role = RoleWAN; c.Ports[2].Enabled = ptr(true) },
			want: map[string]string{"ports[2].role": "NAT mode needs exactly one WAN port; ports[0] is already wan"},
		},
		{
			name: "NAT port without role",
			edit: func(c *Config) { c.Ports[1].Role = "" },
			want: map[string]string{
				"ports[1].role":         "missing; NAT mode needs every enabled port to be lan or wan",
				"ports":                 "at least one enabled port with role lan",
				"hostPort.addresses[0]": "on another segment",
			},
		},
		{
			name: "NAT needs a LAN address",
			edit: func(c *Config) { c.Ports[1].Addresses = nil },
			want: map[string]string{"ports[1].addresses": "NAT mode needs the router's LAN address"},
		},
		{
			name: "static WAN needs an address and a gateway",
			edit: func(c *Config) { c.Ports[0].Addresses = nil; c.NAT.Gateway = netip.Addr{} },
			want: map[string]string{
				"ports[0].addresses": "the WAN port needs a static IPv4 address",
				"nat.gateway":        "missing",
			},
		},
		{
			name: "gateway outside the WAN subnet",
			edit: func(c *Config) { c.NAT.Gateway = netip.MustParseAddr("198.51.100.1") },
			want: map[string]string{"nat.gateway": "198.51.100.1 is not in the WAN subnet 203.0.113.0/24"},
		},
		{
			name: "gateway is the WAN address",
			edit: func(c *Config) { c.NAT.Gateway = netip.MustParseAddr("203.0.113.2") },
			want: map[string]string{"nat.gateway": "is the box's own WAN address"},
		},
		{
			name: "DHCP WAN with static settings",
			edit: func(c *Config) { c.NAT.WANDHCP = true },
			want: map[string]string{
				"ports[0].addresses": "nat.wanDHCP is on",
				"nat.gateway":        "nat.wanDHCP is on",
			},
		},
		{
			// The WAN DHCP client gives the address and the gateway.
			name: "DHCP WAN",
			edit: func(c *Config) { c.NAT.WANDHCP = true; c.Ports[0].Addresses = nil; c.NAT.Gateway = netip.Addr{} },
			want: map[string]string{},
		},
		{
			name: "masquerade range reversed",
			edit: func(c *Config) { c.NAT.MasqueradePorts = PortRange{2000, 1000} },
			want: map[string]string{"nat.masqueradePorts": "range 2000-1000 is reversed (want 1000-2000)"},
		},
		{
			name: "masquerade range with port 0",
			edit: func(c *Config) { c.NAT.MasqueradePorts = PortRange{0, 100} },
			want: map[string]string{"nat.masqueradePorts": "port 0 is not usable"},
		},
		{
			name: "NAT MTU limits",
			edit: func(c *Config) { c.Ports[0].MTU = 576; c.Ports[1].MTU = 9216 },
		},
		{
			name: "conntrack limits",
			edit: func(c *Config) {
				c.NAT.Conntrack.Size = 10
				c.NAT.Conntrack.Timeouts.TCPEstablished = Duration(-time.Second)
				c.NAT.Conntrack.Timeouts.Generic = Duration(31 * 24 * time.Hour)
			},
			want: map[string]string{
				"nat.conntrack.size":                    "10 out of range 256..16777216",
				"nat.conntrack.timeouts.tcpEstablished": "-1s out of range",
				"nat.conntrack.timeouts.generic":        "744h0m0s out of range 1s..720h0m0s",
			},
		},
		{
			name: "what the NAT router cannot run",
			edit: func(c *Config) {
				c.Ports[0].Addresses = append(c.Ports[0].Addresses, prefixes("203.0.113.9/24", "2001:db8::2/64")...)
				c.Ports[1].VLANs = VLANs{Native: 1, Allowed: []uint16{10}}
				c.Ports[1].MTU = 500
				c.Ports[2].Enabled = nil
				c.Ports[2].Addresses = prefixes("192.168.2.1/24")
				c.NAT.Forwards[1].LANHost = netip.MustParseAddr("192.168.1.255")
			},
			want: map[string]string{
				"ports[0].addresses[1]":   "the router has one WAN address (ports[0].addresses[0] already)",
				"ports[0].addresses[2]":   "NAT mode routes IPv4 only",
				"ports[1].vlans":          "VLAN-aware ports are for bridge mode",
				"ports[1].mtu":            "500 is below 576",
				"ports[2].addresses[0]":   "the router has one LAN address (ports[1].addresses[0] already)",
				"nat.forwards[1].lanHost": "192.168.1.255 is the network or broadcast address of the LAN",
			},
		},
		{
			name: "NAT subnets /8 to /30",
			edit: func(c *Config) {
				c.Ports[0].Addresses = prefixes("203.0.113.2/31")
				c.NAT.Gateway = netip.MustParseAddr("203.0.113.3")
				c.Ports[1].Addresses = prefixes("10.0.0.1/7")
			},
			want: map[string]string{
				"ports[0].addresses[0]":   "203.0.113.2/31: the router's subnets are /8 to /30",
				"ports[1].addresses[0]":   "10.0.0.1/7: the router's subnets are /8 to /30",
				"nat.forwards[0].lanHost": "not in the LAN",
				"nat.forwards[1].lanHost": "not in the LAN",
			},
		},
		{
			name:   "bridge ignores roles and the NAT section",
			bridge: true,
			edit: func(c *Config) {
				c.Ports[0].Role = RoleWAN
				c.Ports[1].Role = RoleWAN
				c.NAT.Forwards = []Forward{{Proto: "sctp"}}
			},
		},
	})
}
