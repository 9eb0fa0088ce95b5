package ra

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSubnet(t *testing.T) {
	for _, tc := range []struct {
		delegated string
		id        uint64
		want      string // "" for an error
	}{
		{"2001:db8:8600::/56", 0, "2001:db8:8600::/64"},
		{"2001:db8:8600::/56", 0xff, "2001:db8:8600:ff::/64"},
		{"2001:db8:8600::/56", 0x100, ""},
		{"2001:db8:8600::/60", 15, "2001:db8:8600:f::/64"},
		{"2001:db8:8600::/64", 0, "2001:db8:8600::/64"},
		{"2001:db8:8600::/64", 1, ""},
		{"2001:db8:8600::/72", 0, ""},
		{"10.0.0.0/8", 0, ""},
	} {
		got, err := Subnet(netip.MustParsePrefix(tc.delegated), tc.id)
		if tc.want == "" {
			if err == nil {
				t.Errorf("Subnet(%s, %d) = %v, want an error", tc.delegated, tc.id, got)
			}
			continue
		}
		if err != nil || got != netip.MustParsePrefix(tc.want) {
			t.Errorf("Subnet(%s, %d) = %v, %v; want %s", tc.delegated, tc.id, got, err, tc.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Interface: "lan"}, true},
		{"full", Config{Interface: "lan", MTU: 1500, MaxInterval: 30 * time.Second, DNS: []netip.Addr{netip.MustParseAddr("2001:db8::1")}, Domains: []string{"lan"}}, true},
		{"no interface", Config{}, false},
		{"MTU below 1280", Config{Interface: "lan", MTU: 1000}, false},
		{"interval 1 s", Config{Interface: "lan", MaxInterval: time.Second}, false},
		{"router lifetime below interval", Config{Interface: "lan", MaxInterval: 60 * time.Second, RouterLifetime: 30 * time.Second}, false},
		{"IPv4 DNS", Config{Interface: "lan", DNS: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}, false},
		{"empty domain", Config{Interface: "lan", Domains: []string{""}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.check(); (err == nil) != tc.ok {
				t.Errorf("check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestAdvertisement: lifetimes are what is left, capped at 2700/5400 s; a
// removed prefix is announced 0/0 until its valid time; without a valid
// prefix the router lifetime and DNS lifetimes are 0; with nothing at all
// there is no RA.
func TestAdvertisement(t *testing.T) {
	dns := netip.MustParseAddr("2001:db8:1::1")
	s, err := New(Config{Interface: "lan", MTU: 1480, MaxInterval: 100 * time.Second, DNS: []netip.Addr{dns}, Domains: []string{"lan.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ra := s.advertisement(t0, nil); ra != nil {
		t.Fatalf("with no prefixes: %+v, want no RA", ra)
	}
	a, b := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	s.SetPrefixes([]Prefix{{a, t0.Add(10 * time.Hour), t0.Add(20 * time.Hour)}})
	s.SetPrefixes([]Prefix{{b, t0.Add(100*time.Second + 500*time.Millisecond), t0.Add(200 * time.Second)}})
	ra := s.advertisement(t0, nil)
	want := &ndp.RouterAdvertisement{CurrentHopLimit: 64, RouterLifetime: 300 * time.Second, Options: []ndp.Option{
		pio(b, 100*time.Second, 200*time.Second),
		pio(a, 0, 0),
		ndp.NewMTU(1480),
		&ndp.RecursiveDNSServer{Lifetime: 300 * time.Second, Servers: []netip.Addr{dns}},
		&ndp.DNSSearchList{Lifetime: 300 * time.Second, DomainNames: []string{"lan.example"}},
	}}
	opts := cmpopts.EquateComparable(netip.Addr{})
	if diff := cmp.Diff(want, ra, opts); diff != "" {
		t.Errorf("RA (-want +got):\n%s", diff)
	}
	// Past b's valid time only a's deprecation is left, without a router.
	ra = s.advertisement(t0.Add(300*time.Second), nil)
	want = &ndp.RouterAdvertisement{CurrentHopLimit: 64, Options: []ndp.Option{
		pio(a, 0, 0), ndp.NewMTU(1480),
		&ndp.RecursiveDNSServer{Servers: []netip.Addr{dns}},
		&ndp.DNSSearchList{DomainNames: []string{"lan.example"}},
	}}
	if diff := cmp.Diff(want, ra, opts); diff != "" {
		t.Errorf("RA with no valid prefix (-want +got):\n%s", diff)
	}
	// Long delegations are capped (RFC 9096).
	s.SetPrefixes([]Prefix{{a, t0.Add(10 * time.Hour), t0.Add(20 * time.Hour)}})
	if _, dep := s.Prefixes(); len(dep) != 1 || dep[0].Prefix != b {
		t.Errorf("deprecated %v, want only %v (a is back)", dep, b)
	}
	ra = s.advertisement(t0, nil)
	if got := ra.Options[0].(*ndp.PrefixInformation); got.PreferredLifetime != 2700*time.Second || got.ValidLifetime != 5400*time.Second {
		t.Errorf("capped lifetimes %v/%v, want 2700s/5400s", got.PreferredLifetime, got.ValidLifetime)
	}
	if err := s.SetPrefixes([]Prefix{{netip.MustParsePrefix("2001:db8::/56"), t0, t0}}); err == nil {
		t.Error("a /56 was accepted for SLAAC")
	}
}

func TestCheckRS(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1")
	lla := &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: []byte{2, 0, 0, 0, 0, 1}}
	for _, tc := range []struct {
		name string
		m    ndp.Message
		hops int
		src  netip.Addr
		want string
	}{
		{"valid", &ndp.RouterSolicitation{Options: []ndp.Option{lla}}, 255, ll, ""},
		{"unspecified, no lla", &ndp.RouterSolicitation{}, 255, netip.IPv6Unspecified(), ""},
		{"unspecified with lla", &ndp.RouterSolicitation{Options: []ndp.Option{lla}}, 255, netip.IPv6Unspecified(), "unspecified_with_lla"},
		{"hop limit 64", &ndp.RouterSolicitation{}, 64, ll, "hop_limit"},
		{"an RA", &ndp.RouterAdvertisement{}, 255, ll, "not_rs"},
	} {
		if got := checkRS(tc.m, &ipv6.ControlMessage{HopLimit: tc.hops}, tc.src); got != tc.want {
			t.Errorf("%s: checkRS = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := checkRS(&ndp.RouterSolicitation{}, nil, ll); got != "hop_limit" {
		t.Errorf("without a control message: %q, want hop_limit", got)
	}
}

// FuzzRS: no ICMPv6 message crashes the solicitation check.
func FuzzRS(f *testing.F) {
	b, _ := ndp.MarshalMessage(&ndp.RouterSolicitation{Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: []byte{2, 0, 0, 0, 0, 1}}}})
	f.Add(b, uint8(255))
	f.Fuzz(func(t *testing.T, b []byte, hops uint8) {
		m, err := ndp.ParseMessage(b)
		if err != nil {
			return
		}
		why := checkRS(m, &ipv6.ControlMessage{HopLimit: int(hops)}, netip.IPv6Unspecified())
		if _, ok := m.(*ndp.RouterSolicitation); why == "" && (!ok || hops != 255) {
			t.Fatalf("accepted %T with hop limit %d", m, hops)
		}
	})
}

func TestSetDNS(t *testing.T) {
	s, err := New(Config{Interface: "lan"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetPrefixes([]Prefix{{netip.MustParsePrefix("2001:db8:1::/64"), t0.Add(time.Hour), t0.Add(2 * time.Hour)}})
	dns := netip.MustParseAddr("2001:db8::53")
	if err := s.SetDNS([]netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil); err == nil {
		t.Error("an IPv4 DNS server was accepted")
	}
	if err := s.SetDNS([]netip.Addr{dns}, []string{"isp.example"}); err != nil {
		t.Fatal(err)
	}
	var got []ndp.Option
	for _, o := range s.advertisement(t0, nil).Options {
		switch o.(type) {
		case *ndp.RecursiveDNSServer, *ndp.DNSSearchList:
			got = append(got, o)
		}
	}
	want := []ndp.Option{&ndp.RecursiveDNSServer{Lifetime: 1800 * time.Second, Servers: []netip.Addr{dns}},
		&ndp.DNSSearchList{Lifetime: 1800 * time.Second, DomainNames: []string{"isp.example"}}}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("DNS options (-want +got):\n%s", diff)
	}
}

// TestOtherConfig: the O flag follows Config.OtherConfig and
// SetOtherConfig; only a change is announced at once.
func TestOtherConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		initial  bool
		set      bool
		wantFlag bool
		wantKick bool
	}{
		{"off, set on", false, true, true, true},
		{"on, set off", true, false, false, true},
		{"on, set on again", true, true, true, false},
		{"off, set off again", false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Interface: "lan", OtherConfig: tc.initial}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.SetPrefixes([]Prefix{{netip.MustParsePrefix("2001:db8:1::/64"), t0.Add(time.Hour), t0.Add(2 * time.Hour)}})
			<-s.kick // SetPrefixes' announcement
			if got := s.advertisement(t0, nil).OtherConfiguration; got != tc.initial {
				t.Errorf("O flag before %v", got)
			}
			s.SetOtherConfig(tc.set)
			kicked := false
			select {
			case <-s.kick:
				kicked = true
			default:
			}
			ra := s.advertisement(t0, nil)
			if ra.OtherConfiguration != tc.wantFlag || ra.ManagedConfiguration || kicked != tc.wantKick {
				t.Errorf("O %v, M %v, announced at once %v; want O %v, M false, at once %v",
					ra.OtherConfiguration, ra.ManagedConfiguration, kicked, tc.wantFlag, tc.wantKick)
			}
		})
	}
}
