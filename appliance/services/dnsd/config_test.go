package dnsd

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var lan1 = netip.MustParseAddrPort("192.168.77.1:53")

// netipEq compares netip values by ==.
var netipEq = cmp.Options{
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func TestValidate(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error, nil for none
	}{
		{name: "minimal", cfg: Config{Listen: []netip.AddrPort{lan1}}},
		{name: "full", cfg: Config{
			Listen: []netip.AddrPort{lan1, ap("[fd77::1]:53")}, Upstreams: []netip.AddrPort{ap("198.51.100.1:53"), ap("[2001:db8::53]:53")},
			Domain: "home.arpa", Hostname: "router", Subnets: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")},
			MinTTL: time.Minute, MaxTTL: time.Hour, RateLimit: -1, UDPSize: 4096,
		}},
		{name: "no listen", cfg: Config{}, want: []string{"listen: no addresses"}},
		{name: "wildcard v4", cfg: Config{Listen: []netip.AddrPort{ap("0.0.0.0:53")}}, want: []string{"wildcard address refused"}},
		{name: "wildcard v6", cfg: Config{Listen: []netip.AddrPort{ap("[::]:53")}}, want: []string{"wildcard address refused"}},
		{name: "wildcard allowed", cfg: Config{Listen: []netip.AddrPort{ap("0.0.0.0:0")}, AllowWildcard: true}},
		{name: "listen twice", cfg: Config{Listen: []netip.AddrPort{lan1, lan1}}, want: []string{"listed twice"}},
		{name: "invalid listen", cfg: Config{Listen: []netip.AddrPort{{}}}, want: []string{"listen[0]: invalid address"}},
		{name: "upstream loop", cfg: Config{Listen: []netip.AddrPort{lan1}, Upstreams: []netip.AddrPort{lan1}}, want: []string{"query loop"}},
		{name: "upstream port 0", cfg: Config{Listen: []netip.AddrPort{lan1}, Upstreams: []netip.AddrPort{ap("198.51.100.1:0")}}, want: []string{"port 0"}},
		{name: "upstream wildcard", cfg: Config{Listen: []netip.AddrPort{lan1}, Upstreams: []netip.AddrPort{ap("0.0.0.0:53")}}, want: []string{"not a unicast address"}},
		{name: "bad domain", cfg: Config{Listen: []netip.AddrPort{lan1}, Domain: "a..b"}, want: []string{`domain "a..b"`}},
		{name: "reverse domain", cfg: Config{Listen: []netip.AddrPort{lan1}, Domain: "10.in-addr.arpa"}, want: []string{"under arpa"}},
		{name: "bad hostname", cfg: Config{Listen: []netip.AddrPort{lan1}, Hostname: "a.b"}, want: []string{`hostname "a.b"`}},
		{name: "ttl order", cfg: Config{Listen: []netip.AddrPort{lan1}, MinTTL: time.Hour, MaxTTL: time.Minute}, want: []string{"above maxTTL"}},
		{name: "negative", cfg: Config{Listen: []netip.AddrPort{lan1}, CacheSize: -1, CacheBytes: -1, Timeout: -1, LocalTTL: -time.Second, RateBurst: -1},
			want: []string{"cacheSize -1", "cacheBytes -1", "timeout -1ns", "localTTL -1s", "rateBurst -1"}},
		{name: "udp size", cfg: Config{Listen: []netip.AddrPort{lan1}, UDPSize: 100}, want: []string{"udpSize 100"}},
		{name: "all at once", cfg: Config{Listen: []netip.AddrPort{ap("0.0.0.0:53")}, Hostname: "-x"}, want: []string{"wildcard", `hostname "-x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to mention %q", err, w)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	st, err := newSettings(Config{Listen: []netip.AddrPort{lan1}, Hostname: "Router"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Listen: []netip.AddrPort{lan1}, Hostname: "Router", Domain: "lan",
		CacheSize: 10000, CacheBytes: 8 << 20, Timeout: 2 * time.Second, MaxTTL: 24 * time.Hour,
		NegativeMaxTTL: time.Hour, LocalTTL: time.Minute, RateLimit: 100, RateBurst: 300, UDPSize: 1232,
	}
	if diff := cmp.Diff(want, st.cfg, netipEq); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	got := []any{st.domain, st.hostname, st.minTTL, st.maxTTL, st.negMaxTTL, st.localTTL}
	if diff := cmp.Diff([]any{"lan.", "router", uint32(0), uint32(86400), uint32(3600), uint32(60)}, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
}
