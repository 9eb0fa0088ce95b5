package dhcpd

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConfigErrors(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // a substring of the error
	}{
		{"no interface", func(c *Config) { c.Interface = "" }, "Interface: is empty"},
		{"interface name too long", func(c *Config) { c.Interface = "a-very-long-ifname" }, "Interface: \"a-very-long-ifname\" is not an interface name"},
		{"no subnet", func(c *Config) { c.Subnet = netip.Prefix{} }, "Subnet: invalid Prefix is not an IPv4 prefix"},
		{"IPv6 subnet", func(c *Config) { c.Subnet = netip.MustParsePrefix("fd00::/64") }, "is not an IPv4 prefix"},
		{"subnet /31", func(c *Config) { c.Subnet = netip.MustParsePrefix("10.70.0.0/31") }, "prefix length must be 8..30"},
		{"server outside", func(c *Config) { c.ServerIP = a("10.71.0.1") }, "ServerIP 10.71.0.1: outside Subnet 10.70.0.0/24"},
		{"server is network", func(c *Config) { c.ServerIP = a("10.70.0.0") }, "ServerIP 10.70.0.0: is the network address"},
		{"server is broadcast", func(c *Config) { c.ServerIP = a("10.70.0.255") }, "ServerIP 10.70.0.255: is the broadcast address"},
		{"no server", func(c *Config) { c.ServerIP = netip.Addr{} }, "ServerIP invalid IP: not an IPv4 address"},
		{"pool start only", func(c *Config) { c.PoolStart = a("10.70.0.10") }, "PoolStart and PoolEnd: set both or neither"},
		{"pool reversed", func(c *Config) { c.PoolStart, c.PoolEnd = a("10.70.0.20"), a("10.70.0.10") }, "PoolStart 10.70.0.20 is after PoolEnd 10.70.0.10"},
		{"pool outside", func(c *Config) { c.PoolStart, c.PoolEnd = a("10.70.0.10"), a("10.70.1.10") }, "PoolEnd 10.70.1.10: outside Subnet"},
		{"pool only the server", func(c *Config) { c.PoolStart, c.PoolEnd = a("10.70.0.1"), a("10.70.0.1") }, "the pool has no address left"},
		{"lease too short", func(c *Config) { c.LeaseTime = time.Second }, "LeaseTime 1s: must be 1m0s.."},
		{"IPv6 DNS", func(c *Config) { c.DNS = []netip.Addr{a("fd00::53")} }, "DNS[0] fd00::53: not an IPv4 address"},
		{"bad NTP", func(c *Config) { c.NTP = []netip.Addr{a("10.70.0.1"), a("0.0.0.0")} }, "NTP[1] 0.0.0.0: not an IPv4 address"},
		{"bad domain", func(c *Config) { c.Domain = "my_lan" }, "Domain: \"my_lan\": label \"my_lan\": not a DNS label"},
		{"MTU too small", func(c *Config) { c.MTU = 60 }, "MTU 60: must be 68..65535"},
		{"exclude outside", func(c *Config) { c.Exclude = []netip.Addr{a("10.71.0.9")} }, "Exclude[0]: 10.71.0.9: not an address of Subnet"},
		{"static bad MAC", func(c *Config) { c.Static = []Static{{MAC: net.HardwareAddr{1, 2}, IP: a("10.70.0.9")}} }, "Static[0].MAC 01:02: not an Ethernet address"},
		{"static twice", func(c *Config) {
			c.Static = []Static{{MAC: hw(macA), IP: a("10.70.0.9")}, {MAC: hw(macA), IP: a("10.70.0.10")}}
		}, "Static[1].MAC 02:00:00:00:00:0a: listed twice"},
		{"static address twice", func(c *Config) {
			c.Static = []Static{{MAC: hw(macA), IP: a("10.70.0.9")}, {MAC: hw(macB), IP: a("10.70.0.9")}}
		}, "Static[1].IP 10.70.0.9: already Static[0]'s"},
		{"static outside", func(c *Config) { c.Static = []Static{{MAC: hw(macA), IP: a("10.70.9.9")}} }, "Static[0].IP 10.70.9.9: outside Subnet"},
		{"static on the server", func(c *Config) { c.Static = []Static{{MAC: hw(macA), IP: srvIP}} }, "Static[0].IP 10.70.0.1: is ServerIP"},
		{"static excluded", func(c *Config) {
			c.Exclude = []netip.Addr{a("10.70.0.9")}
			c.Static = []Static{{MAC: hw(macA), IP: a("10.70.0.9")}}
		}, "Static[0].IP 10.70.0.9: is excluded"},
		{"static bad hostname", func(c *Config) { c.Static = []Static{{MAC: hw(macA), IP: a("10.70.0.9"), Hostname: "a.b"}} }, "Static[0].Hostname \"a.b\": not a DNS label"},
		{"static hostname twice", func(c *Config) {
			c.Static = []Static{{MAC: hw(macA), IP: a("10.70.0.9"), Hostname: "nas"}, {MAC: hw(macB), IP: a("10.70.0.10"), Hostname: "NAS"}}
		}, "Static[1].Hostname \"nas\": already Static[0]'s"},
		{"relative lease file", func(c *Config) { c.LeaseFile = "leases.json" }, "LeaseFile \"leases.json\": not an absolute path"},
		{"negative MaxLeases", func(c *Config) { c.MaxLeases = -1 }, "MaxLeases -1: must be 1..65536"},
		{"probation too short", func(c *Config) { c.Probation = time.Second }, "Probation: 1s must be 10s..1h0m0s"},
		{"share over 100", func(c *Config) { c.UnprovenShare = 101 }, "UnprovenShare 101: must be 1..100"},
	} {
		cfg := testConfig()
		tc.edit(&cfg)
		_, err := New(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "dhcpd config: ") {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg := testConfig()
	cfg.Subnet = netip.MustParsePrefix("10.70.0.1/24") // host bits are ignored
	cfg.Domain = "Home.Arpa."
	cfg.LeaseTime = time.Hour + 1500*time.Millisecond
	cfg.Static = []Static{{MAC: hw("02:00:00:00:00:AA"), IP: netip.MustParseAddr("10.70.0.7"), Hostname: "NAS"}}
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Interface: "lan0", ServerIP: srvIP, Subnet: netip.MustParsePrefix("10.70.0.1/24"),
		LeaseTime: time.Hour + time.Second, DNS: []netip.Addr{srvIP}, Domain: "home.arpa",
		Static:    []Static{{MAC: hw("02:00:00:00:00:aa"), IP: netip.MustParseAddr("10.70.0.7"), Hostname: "nas"}},
		MaxLeases: 252, NewLeasesPerSecond: DefaultNewLeases, Probation: DefaultProbation, UnprovenShare: DefaultUnprovenShare,
	}
	if diff := cmp.Diff(want, s.Config(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	if got := s.Stats().PoolSize; got != 252 {
		t.Errorf("pool size %d, want 252 (254 hosts minus the server and the static address)", got)
	}

	big := testConfig()
	big.Subnet, big.ServerIP = netip.MustParsePrefix("10.0.0.0/8"), netip.MustParseAddr("10.0.0.1")
	s, err = New(big, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config().MaxLeases; got != DefaultMaxLeases {
		t.Errorf("MaxLeases of a /8: %d, want the cap %d", got, DefaultMaxLeases)
	}
	if got, want := s.Stats().PoolSize, 1<<24-3; got != want {
		t.Errorf("pool size of a /8: %d, want %d", got, want)
	}
}

// TestConfigCopies: the server keeps no slice of the caller's config and
// hands out none of its own.
func TestConfigCopies(t *testing.T) {
	cfg := testConfig()
	cfg.DNS = []netip.Addr{netip.MustParseAddr("10.70.0.53")}
	cfg.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100")}}
	s, _ := newTestServer(t, cfg)
	cfg.DNS[0] = netip.MustParseAddr("10.70.0.99")
	cfg.Static[0].MAC[5] = 0xff
	got := s.Config()
	got.DNS[0] = netip.MustParseAddr("10.70.0.98")
	got.Static[0].MAC[5] = 0xee
	for _, l := range s.Leases() {
		l.MAC[5] = 0xdd
	}
	want := Config{
		Interface: "lan0", ServerIP: srvIP, Subnet: lan, LeaseTime: DefaultLeaseTime, Domain: "lan",
		DNS: []netip.Addr{netip.MustParseAddr("10.70.0.53")}, Static: []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100")}},
		MaxLeases: 252, NewLeasesPerSecond: DefaultNewLeases, Probation: DefaultProbation, UnprovenShare: DefaultUnprovenShare,
	}
	if diff := cmp.Diff(want, s.Config(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Config after the caller changed its copies (-want +got):\n%s", diff)
	}
	if got := summary(s.Handle(discover(t, macS))); got != "OFFER 10.70.0.100" {
		t.Errorf("the static device got %q", got)
	}
}

func TestServeNoInterface(t *testing.T) {
	cfg := testConfig()
	cfg.Interface = "nosuchif0"
	s, _ := newTestServer(t, cfg)
	err := s.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "dhcpd: interface nosuchif0") {
		t.Errorf("Serve on a missing interface: %v", err)
	}
}
