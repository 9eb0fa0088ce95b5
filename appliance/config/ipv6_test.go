package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidateIPv6 checks the ipv6 section (ipv6.go).
func TestValidateIPv6(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "IPv6 prefix length",
			edit: func(c *Config) { c.IPv6.PrefixLength = 40 },
			want: map[string]string{"ipv6.prefixLength": "40 is not a delegated prefix length of 48 to 64"},
		},
		{
			name: "IPv6 WAN address",
			edit: func(c *Config) { c.IPv6.WANAddress = "stateless" },
			want: map[string]string{"ipv6.wanAddress": `want auto, slaac, dhcpv6 or off, got "stateless"`},
		},
		{
			name: "IPv6 WAN address by DHCPv6 with a static prefix",
			edit: func(c *Config) {
				c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7::/48")
				c.IPv6.WANAddress = WANAddressDHCPv6
			},
		},
		{
			name: "IPv6 static prefix and gateway",
			edit: func(c *Config) {
				c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7::/48")
				c.IPv6.Gateway = netip.MustParseAddr("fe80::1")
			},
		},
		{
			name: "IPv6 static /64 and a global gateway",
			edit: func(c *Config) {
				c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7:9::/64")
				c.IPv6.Gateway = netip.MustParseAddr("2001:db8:ffff::1")
			},
		},
		{
			name: "IPv6 static prefix longer than /64",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7:9::/80") },
			want: map[string]string{"ipv6.prefix": "2001:db8:7:9::/80: /80 is not a delegated prefix length of 48 to 64"},
		},
		{
			name: "IPv6 static prefix shorter than /48",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("2001:db8::/32") },
			want: map[string]string{"ipv6.prefix": "/32 is not a delegated prefix length of 48 to 64"},
		},
		{
			name: "IPv4 static prefix",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("10.0.0.0/8") },
			want: map[string]string{"ipv6.prefix": "10.0.0.0/8 is not an IPv6 prefix"},
		},
		{
			name: "IPv4-mapped static prefix",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("::ffff:10.0.0.0/56") },
			want: map[string]string{"ipv6.prefix": "is not an IPv6 prefix"},
		},
		{
			name: "link-local static prefix",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("fe80::/64") },
			want: map[string]string{"ipv6.prefix": "fe80::/64 is not a global unicast prefix"},
		},
		{
			name: "multicast static prefix",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("ff02::/64") },
			want: map[string]string{"ipv6.prefix": "is not a global unicast prefix"},
		},
		{
			name: "static prefix with host bits",
			edit: func(c *Config) { c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7:1::/48") },
			want: map[string]string{"ipv6.prefix": "2001:db8:7:1::/48 has bits set after its /48; want 2001:db8:7::/48"},
		},
		{
			name: "multicast gateway",
			edit: func(c *Config) { c.IPv6.Gateway = netip.MustParseAddr("ff02::2") },
			want: map[string]string{"ipv6.gateway": "ff02::2 is a multicast address"},
		},
		{
			name: "IPv4 gateway",
			edit: func(c *Config) { c.IPv6.Gateway = netip.MustParseAddr("192.0.2.1") },
			want: map[string]string{"ipv6.gateway": "192.0.2.1 is not an IPv6 address"},
		},
		{
			name: "unspecified gateway",
			edit: func(c *Config) { c.IPv6.Gateway = netip.MustParseAddr("::") },
			want: map[string]string{"ipv6.gateway": ":: is not a unicast address"},
		},
		{
			name: "loopback gateway",
			edit: func(c *Config) { c.IPv6.Gateway = netip.MustParseAddr("::1") },
			want: map[string]string{"ipv6.gateway": "::1 is not a unicast address"},
		},
		{
			name: "gateway with a zone",
			edit: func(c *Config) { c.IPv6.Gateway = netip.MustParseAddr("fe80::1%eth0") },
			want: map[string]string{"ipv6.gateway": "fe80::1%eth0: no zone"},
		},
		{
			name: "gateway inside the static prefix",
			edit: func(c *Config) {
				c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7::/48")
				c.IPv6.Gateway = netip.MustParseAddr("2001:db8:7:5::1")
			},
			want: map[string]string{"ipv6.gateway": "2001:db8:7:5::1 is inside ipv6.prefix 2001:db8:7::/48"},
		},
		{
			name: "both wrong at once",
			edit: func(c *Config) {
				c.IPv6.Prefix = netip.MustParsePrefix("2001:db8:7::/96")
				c.IPv6.Gateway = netip.MustParseAddr("ff05::1")
			},
			want: map[string]string{"ipv6.prefix": "/96", "ipv6.gateway": "multicast"},
		},
	})
}

func TestIPv6StaticRoundTrip(t *testing.T) {
	tests := []struct {
		name, json string
		want       IPv6
	}{
		{"none", `{}`, IPv6{Enabled: ptr(true), DHCPServer: ptr(true), WANAddress: WANAddressAuto, PrefixLength: DefaultIPv6PrefixLength}},
		{"prefix", `{"prefix": "2001:db8:7::/48"}`,
			IPv6{Enabled: ptr(true), DHCPServer: ptr(true), WANAddress: WANAddressAuto, PrefixLength: DefaultIPv6PrefixLength, Prefix: netip.MustParsePrefix("2001:db8:7::/48")}},
		{"WAN address by SLAAC only", `{"wanAddress": "slaac"}`,
			IPv6{Enabled: ptr(true), DHCPServer: ptr(true), WANAddress: WANAddressSLAAC, PrefixLength: DefaultIPv6PrefixLength}},
		{"prefix and gateway", `{"prefix": "2001:db8:7:1::/64", "gateway": "fe80::1"}`,
			IPv6{Enabled: ptr(true), DHCPServer: ptr(true), WANAddress: WANAddressAuto, PrefixLength: DefaultIPv6PrefixLength, Prefix: netip.MustParsePrefix("2001:db8:7:1::/64"),
				Gateway: netip.MustParseAddr("fe80::1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"version": 3, "mode": "nat", "ports": [{"name": "wan", "interface": "eth1", "role": "wan"},
				{"name": "lan", "interface": "eth2", "role": "lan"}], "ipv6": ` + tt.json + `}`
			c, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.IPv6, cmpConfig); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			b, err := Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse(Marshal): %v\n%s", err, b)
			}
			if diff := cmp.Diff(c.IPv6, again.IPv6, cmpConfig); diff != "" {
				t.Errorf("Parse(Marshal) (-want +got):\n%s", diff)
			}
			if got := strings.Contains(string(b), `"prefix"`); got != tt.want.Prefix.IsValid() {
				t.Errorf("Marshal has a prefix field: %v, want %v\n%s", got, tt.want.Prefix.IsValid(), b)
			}
		})
	}
}

// TestIPv6WANAddress: what each ipv6.wanAddress asks for, with a
// delegated and with a static prefix.
func TestIPv6WANAddress(t *testing.T) {
	for _, tc := range []struct {
		set         WANAddress
		static      bool
		slaac, iaNA bool
	}{
		{WANAddressAuto, false, true, true},
		{WANAddressAuto, true, true, false},
		{WANAddressSLAAC, false, true, false},
		{WANAddressDHCPv6, false, false, true},
		{WANAddressDHCPv6, true, false, true},
		{WANAddressOff, false, false, false},
		{"", false, true, true},
	} {
		s := IPv6{WANAddress: tc.set}
		if tc.static {
			s.Prefix = netip.MustParsePrefix("2001:db8:7::/48")
		}
		if got, want := [2]bool{s.WANSLAAC(), s.WANIANA()}, [2]bool{tc.slaac, tc.iaNA}; got != want {
			t.Errorf("%q (static prefix %v): SLAAC, IA_NA = %v, want %v", tc.set, tc.static, got, want)
		}
	}
}

// TestIPv6DHCPServerDefault: ipv6.dhcpServer defaults to ipv6.enabled (so
// on in NAT mode), an explicit value survives, and the server runs only
// while IPv6 does.
func TestIPv6DHCPServerDefault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ipv6      string
		stored    bool
		serverOn  bool
		ipv6Route bool
	}{
		{"NAT defaults", `{}`, true, true, true},
		{"IPv6 off", `{"enabled": false}`, false, false, false},
		{"server off", `{"dhcpServer": false}`, false, false, true},
		{"server on, IPv6 off", `{"enabled": false, "dhcpServer": true}`, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(`{"version": 3, "mode": "nat", "ports": [
				{"name": "wan", "interface": "eth1", "role": "wan", "addresses": ["192.0.2.2/24"]},
				{"name": "lan", "interface": "eth2", "role": "lan", "addresses": ["192.168.1.1/24"]}],
				"nat": {"gateway": "192.0.2.1"}, "ipv6": ` + tc.ipv6 + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(testEnv); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := [3]bool{c.IPv6.DHCPServer != nil && *c.IPv6.DHCPServer, c.IPv6.DHCPServerOn(), c.IPv6.IsEnabled()}
			if want := [3]bool{tc.stored, tc.serverOn, tc.ipv6Route}; got != want {
				t.Errorf("dhcpServer stored, DHCPServerOn, IsEnabled = %v, want %v", got, want)
			}
		})
	}
}
