package config

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/rules"
)

var testEnv = Env{Interfaces: []string{"lo", "eth0", "eth1", "eth2", "eth3"}}

// example returns a fresh copy of testdata/example.json.
func example(t testing.TB) *Config {
	t.Helper()
	b, err := os.ReadFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(example.json): %v", err)
	}
	return c
}

// bridgeConfig returns a small valid bridge-mode config.
func bridgeConfig(t testing.TB) *Config {
	t.Helper()
	c, err := Parse([]byte(`{"version": 2, "mode": "bridge",
		"ports": [{"name": "port1", "interface": "eth1"}, {"name": "port2", "interface": "eth2"}],
		"hostPort": {"addresses": ["192.168.1.2/24"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestValidateExamples(t *testing.T) {
	for name, c := range map[string]*Config{"example.json": example(t), "bridge": bridgeConfig(t)} {
		if err := c.Validate(testEnv); err != nil {
			t.Errorf("%s: Validate: %v", name, err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		bridge bool // start from bridgeConfig instead of example.json
		edit   func(c *Config)
		// want maps each expected error path to a substring of its message.
		want map[string]string
	}{
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
			name: "unknown role",
			edit: func(c *Config) { c.Ports[2].Role = "dmz" },
			want: map[string]string{"ports[2].role": `want lan or wan, got "dmz"`},
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
			name: "bridge mode takes no port addresses",
			edit: func(c *Config) { c.Mode = ModeBridge },
			want: map[string]string{
				"ports[0].addresses": "bridge mode forwards transparently",
				"ports[1].addresses": "put the box's address on hostPort.addresses",
			},
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
			name: "NAT MTU limits",
			edit: func(c *Config) { c.Ports[0].MTU = 576; c.Ports[1].MTU = 9216 },
		},
		{
			name: "rules errors",
			edit: func(c *Config) {
				c.Rules.Rules[0].DstPort = &rules.PortRange{Lo: 2000, Hi: 1000}
				c.Rules.Rules[2].InPort = "eth7"
				c.Rules.Policy[rules.Forward] = rules.Reject
			},
			want: map[string]string{
				"rules.rules[0].dport": "reversed",
				"rules.policy.forward": "a policy is accept or drop",
			},
		},
		{
			name: "rules name unknown ports",
			edit: func(c *Config) { c.Rules.Rules[2].InPort = "eth7" },
			want: map[string]string{"rules.rules[2].iif": `unknown port "eth7"`},
		},
		{
			name: "tuning errors",
			edit: func(c *Config) {
				c.Tuning.Ports[0].RxRing = 5
				c.Tuning.Ports = append(c.Tuning.Ports, c.Tuning.Ports[0])
				c.Tuning.Ports[1].Name = "eth9"
				c.Tuning.Placement = "random"
			},
			want: map[string]string{
				"tuning.placement":       `"random" is not one of`,
				"tuning.ports[0].rxRing": "5 out of range 64..4096",
				"tuning.ports[1].rxRing": "5 out of range 64..4096",
				"tuning.ports[1].name":   `unknown interface "eth9"`,
			},
		},
		{
			name: "static FDB entries",
			edit: func(c *Config) {
				c.Bridge.Static = append(c.Bridge.Static,
					StaticFDB{MAC: rules.MAC{0x01, 0, 0x5e, 0, 0, 1}, Port: "nope", VLAN: 4095},
					StaticFDB{Port: "host"},
					c.Bridge.Static[0])
			},
			want: map[string]string{
				"bridge.static[1].mac":  "multicast",
				"bridge.static[1].port": `unknown port "nope" (ports: host, lan1, lan2, wan)`,
				"bridge.static[1].vlan": "VLAN 4095 out of range",
				"bridge.static[2].mac":  "missing",
				"bridge.static[3]":      "duplicate entry for 02:00:5e:10:00:01 (VLAN 10), already at bridge.static[0]",
			},
		},
		{
			name: "bridge limits",
			edit: func(c *Config) {
				c.Bridge.FDBAging = Duration(500 * time.Millisecond)
				c.Bridge.FDBSize = 8
				c.Bridge.FDBFull = "oldest"
			},
			want: map[string]string{
				"bridge.fdbAging": "500ms out of range 1s..",
				"bridge.fdbSize":  "8 out of range 16..4194304",
				"bridge.fdbFull":  `unknown policy "oldest"; want "evict" or "refuse"`,
			},
		},
		{
			name: "fast path",
			edit: func(c *Config) { c.FastPath = "ebpf" },
			want: map[string]string{"fastPath": `want auto, tcx, xdp or off, got "ebpf"`},
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
			name: "dashboard",
			edit: func(c *Config) {
				c.Dashboard.Listen = "8080"
				c.Dashboard.ConfirmTimeout = Duration(time.Second)
			},
			want: map[string]string{
				"dashboard.listen":         `"8080" is not a listen address`,
				"dashboard.confirmTimeout": "1s out of range 5s..1h0m0s",
			},
		},
		{
			name: "dashboard host and port",
			edit: func(c *Config) { c.Dashboard.Listen = "example.com:99999" },
			want: map[string]string{"dashboard.listen": `port "99999": want a number 1..65535`},
		},
		{
			name: "update key not a key",
			edit: func(c *Config) { c.Dashboard.UpdateKey = "AAAA" },
			want: map[string]string{"dashboard.updateKey": "not an ed25519 public key"},
		},
		{
			name: "update key not base64",
			edit: func(c *Config) { c.Dashboard.UpdateKey = "not base64!" },
			want: map[string]string{"dashboard.updateKey": "not an ed25519 public key"},
		},
		{
			name: "internet probe IPv6",
			edit: func(c *Config) { c.Dashboard.InternetProbe = "2001:db8::1" },
			want: map[string]string{"dashboard.internetProbe": "the probe pings IPv4"},
		},
		{
			name: "internet probe not a name",
			edit: func(c *Config) { c.Dashboard.InternetProbe = "no such host!" },
			want: map[string]string{"dashboard.internetProbe": "neither an IPv4 address nor a host name"},
		},
		{
			name: "version and mode",
			edit: func(c *Config) { c.Version = 4; c.Mode = "router" },
			want: map[string]string{
				"version": "is 4; want 3",
				"mode":    `want bridge or nat, got "router"`,
			},
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
			name: "a DHCP range over the router's address",
			edit: func(c *Config) {
				c.DHCP.Range = AddrRange{First: netip.MustParseAddr("192.168.1.0"), Last: netip.MustParseAddr("192.168.1.50")}
			},
			want: map[string]string{"dhcp.range": "192.168.1.0 is the network or broadcast address"},
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
		{
			name:   "bridge mode ignores the router services",
			bridge: true,
			edit: func(c *Config) {
				c.DHCP.Enabled = ptr(true)
				c.DHCP.Range = AddrRange{First: netip.MustParseAddr("10.0.0.9"), Last: netip.MustParseAddr("10.0.0.1")}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := example(t)
			if tt.bridge {
				c = bridgeConfig(t)
			}
			tt.edit(c)
			err := c.Validate(testEnv)
			got := map[string]string{}
			for _, fe := range AsErrors(err) {
				if _, dup := got[fe.Path]; dup {
					got[fe.Path] += " | "
				}
				got[fe.Path] += fe.Message
			}
			wantPaths, gotPaths := keys(tt.want), keys(got)
			if diff := cmp.Diff(wantPaths, gotPaths); diff != "" {
				t.Fatalf("error paths (-want +got):\n%s\nerrors: %v", diff, err)
			}
			for path, sub := range tt.want {
				if !strings.Contains(got[path], sub) {
					t.Errorf("%s: message %q does not contain %q", path, got[path], sub)
				}
			}
		})
	}
}

func keys(m map[string]string) []string {
	return append([]string{}, slices.Sorted(maps.Keys(m))...)
}

func TestErrorsJSON(t *testing.T) {
	c := example(t)
	c.Ports[0].MTU = 1
	err := c.Validate(testEnv)
	b, jerr := json.Marshal(err)
	if jerr != nil {
		t.Fatal(jerr)
	}
	want := `[{"path":"ports[0].mtu","message":"1 out of range 68..9216"}]`
	if string(b) != want {
		t.Errorf("json.Marshal(err) = %s, want %s", b, want)
	}
	if got := err.Error(); got != "ports[0].mtu: 1 out of range 68..9216" {
		t.Errorf("Error() = %q", got)
	}
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

func TestValidateWithoutEnv(t *testing.T) {
	c := example(t)
	c.Ports[0].Interface = "eth42"
	if err := c.Validate(Env{}); err != nil {
		t.Errorf("Validate without interface list: %v", err)
	}
	if err := c.Validate(testEnv); err == nil {
		t.Error("Validate with interface list accepted an unknown interface")
	}
}

func TestTuningPlan(t *testing.T) {
	c := example(t)
	p := c.TuningPlan()
	var names []string
	for _, pp := range p.Ports {
		if !pp.Data {
			t.Errorf("tuning port %s is not a data port", pp.Name)
		}
		names = append(names, pp.Name)
	}
	// eth1 is listed in tuning; eth2 is added; eth3 is disabled.
	if diff := cmp.Diff([]string{"eth1", "eth2"}, names); diff != "" {
		t.Errorf("TuningPlan ports (-want +got):\n%s", diff)
	}
	if p.Ports[1].Offloads["rx-gro"] {
		t.Error("added data port keeps GRO on")
	}
	if len(c.Tuning.Ports) != 1 {
		t.Errorf("TuningPlan modified the config: %d tuning ports", len(c.Tuning.Ports))
	}
}

func TestUpdateKey(t *testing.T) {
	key := make([]byte, 32)
	key[0] = 7
	d := Dashboard{UpdateKey: base64.StdEncoding.EncodeToString(key)}
	if got := d.UpdatePublicKey(); len(got) != 32 || got[0] != 7 {
		t.Errorf("UpdatePublicKey = %v", got)
	}
	if (&Dashboard{}).UpdatePublicKey() != nil {
		t.Error("no key configured, but a key")
	}
}
