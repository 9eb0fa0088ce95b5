package config

import (
	"net/netip"
	"testing"
	"time"

	"e1kbox/rules"
)

// TestValidateServices checks the router services: the DHCP and DNS servers and the NTP client (dhcp.go, dns.go, time.go).
func TestValidateServices(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "router services",
			edit: func(c *Config) {
				c.DHCP.Range = AddrRange{First: netip.MustParseAddr("192.168.1.200"), Last: netip.MustParseAddr("192.168.1.100")}
				c.DHCP.LeaseTime = Duration(time.Minute)
				c.DHCP.Static = []StaticLease{
					{MAC: rules.MAC{2, 0, 0, 0, 0, 1}, Address: netip.MustParseAddr("192.168.1.20"), Hostname: "nas"},
					{MAC: rules.MAC{2, 0, 0, 0, 0, 1}, Address: netip.MustParseAddr("192.168.1.20"), Hostname: "-bad"},
					{MAC: rules.MAC{1, 0, 0x5e, 0, 0, 1}, Address: netip.MustParseAddr("10.9.9.9")},
					{Address: netip.MustParseAddr("192.168.1.1")},
				}
				c.DNS.Domain = "bad_domain"
				c.DNS.CacheSize = -1
				c.DNS.Upstreams = []netip.Addr{netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.1"),
					netip.MustParseAddr("2620:fe::fe")}
				c.Time.Servers = []string{"pool.ntp.org", "not a name", "2001:db8::123", "192.0.2.123"}
			},
			want: map[string]string{
				"dhcp.range":              "range 192.168.1.200-192.168.1.100 is reversed",
				"dhcp.leaseTime":          "1m0s out of range 2m0s..720h0m0s",
				"dhcp.static[1].mac":      "02:00:00:00:00:01 already has a static lease at dhcp.static[0]",
				"dhcp.static[1].address":  "192.168.1.20 is already given to dhcp.static[0]",
				"dhcp.static[1].hostname": `"-bad" is not a DNS label`,
				"dhcp.static[2].mac":      "01:00:5e:00:00:01 is a multicast address",
				"dhcp.static[2].address":  "10.9.9.9 is not in the LAN 192.168.1.0/24",
				"dhcp.static[3].mac":      "missing",
				"dhcp.static[3].address":  "192.168.1.1 is the router's own LAN address",
				"dns.domain":              `"bad_domain" is not a domain name`,
				"dns.cacheSize":           "-1 out of range 0..1000000",
				"dns.upstreams[1]":        "127.0.0.1 is not a DNS server's address",
				"dns.upstreams[2]":        "192.168.1.1 is the router itself",
				"time.servers[1]":         `"not a name" is neither an address nor a host name`,
				"dns.upstreams[3]":        "2620:fe::fe is an IPv6 address: the box's own stack reaches the WAN over IPv4 only",
				"time.servers[2]":         "2001:db8::123 is an IPv6 address: the box's own stack reaches the WAN over IPv4 only",
			},
		},
		{
			name: "DHCP starvation limits out of range",
			edit: func(c *Config) {
				c.DHCP.Probation = Duration(5 * time.Second)
				c.DHCP.UnprovenShare = 101
				c.DHCP.NewDevicesPerSecond = -1
			},
			want: map[string]string{
				"dhcp.probation":           "5s out of range 10s..1h0m0s",
				"dhcp.unprovenShare":       "101 out of range 1..100",
				"dhcp.newDevicesPerSecond": "-1 out of range 1..10000",
			},
		},
		{
			name: "a DHCP range over the router's address",
			edit: func(c *Config) {
				c.DHCP.Range = AddrRange{First: netip.MustParseAddr("192.168.1.0"), Last: netip.MustParseAddr("192.168.1.50")}
			},
			want: map[string]string{"dhcp.range": "192.168.1.0 is the network or broadcast address"},
		},
		{
			name:   "bridge mode ignores the router services",
			bridge: true,
			edit: func(c *Config) {
				c.DHCP.Enabled = ptr(true)
				c.DHCP.Range = AddrRange{First: netip.MustParseAddr("10.0.0.9"), Last: netip.MustParseAddr("10.0.0.1")}
			},
		},
	})
}
