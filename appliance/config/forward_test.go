package config

import (
	"net/netip"
	"testing"
)

// TestValidateForwards checks the port forwards (forward.go).
func TestValidateForwards(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "forwards colliding",
			edit: func(c *Config) {
				c.NAT.Forwards = append(c.NAT.Forwards,
					Forward{Proto: "tcp", WANPorts: PortRange{400, 500}, LANHost: netip.MustParseAddr("192.168.1.12")},
					Forward{Proto: "udp", WANPorts: PortRange{443, 443}, LANHost: netip.MustParseAddr("192.168.1.12")},
					Forward{Proto: "udp", WANPorts: PortRange{6010, 6020}, LANHost: netip.MustParseAddr("192.168.1.12")})
			},
			want: map[string]string{
				"nat.forwards[2].wanPorts": "tcp 400-500 collides with nat.forwards[0] (tcp 443)",
				"nat.forwards[4].wanPorts": "udp 6010-6020 collides with nat.forwards[1] (udp 6000-6010)",
			},
		},
		{
			name: "bad forwards",
			edit: func(c *Config) {
				c.NAT.Forwards = []Forward{
					{Proto: "icmp", WANPorts: PortRange{80, 80}, LANHost: netip.MustParseAddr("10.9.9.9")},
					{Proto: "tcp", WANPorts: PortRange{90, 80}, LANHost: netip.MustParseAddr("192.168.1.1")},
					{Proto: "udp", WANPorts: PortRange{6000, 6010}, LANPort: 65530, LANHost: netip.MustParseAddr("2001:db8::1")},
					{Proto: "udp", WANPorts: PortRange{7000, 7000}},
				}
			},
			want: map[string]string{
				"nat.forwards[0].proto":    `want tcp or udp, got "icmp"`,
				"nat.forwards[0].lanHost":  "10.9.9.9 is not in the LAN (192.168.1.0/24)",
				"nat.forwards[1].wanPorts": "range 90-80 is reversed",
				"nat.forwards[1].lanHost":  "is the router's own LAN address",
				"nat.forwards[2].lanPort":  "the range 65530-65540 (one port per WAN port) ends past 65535",
				"nat.forwards[2].lanHost":  "not an IPv4 address",
				"nat.forwards[3].lanHost":  "missing",
			},
		},
	})
}
