package main

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcp6c"
)

// TestV6DNS: the LAN is told the box's preferred LAN address and the local
// domain while the box's DNS runs, the ISP's servers and domains
// otherwise.
func TestV6DNS(t *testing.T) {
	cur := boxAddr6{Prefix: netip.MustParsePrefix("2001:db8:2::1/64")}
	old := boxAddr6{Prefix: netip.MustParsePrefix("2001:db8:1::1/64"), Deprecated: true}
	isp := &dhcp6c.Lease{DNS: []netip.Addr{netip.MustParseAddr("2001:db8:64::53")}, Domains: []string{"isp.example"}}
	for _, tc := range []struct {
		name        string
		dnsOn       bool
		box         []boxAddr6
		lease       *dhcp6c.Lease
		wantDNS     []netip.Addr
		wantDomains []string
	}{
		{"box DNS", true, []boxAddr6{cur, old}, isp, []netip.Addr{cur.Prefix.Addr()}, []string{"home"}},
		{"box DNS, current after the deprecated", true, []boxAddr6{old, cur}, isp, []netip.Addr{cur.Prefix.Addr()}, []string{"home"}},
		{"box DNS, only a deprecated address", true, []boxAddr6{old}, isp, nil, []string{"home"}},
		{"box DNS off", false, []boxAddr6{cur}, isp, isp.DNS, isp.Domains},
		{"box DNS off, no lease", false, []boxAddr6{cur}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &router{cfg: &config.Config{DNS: config.DNSServer{Domain: "home"}}}
			r.dns.on = tc.dnsOn
			r.v6.box, r.v6.lease = tc.box, tc.lease
			dns, domains := r.v6DNS()
			if diff := cmp.Diff(tc.wantDNS, dns, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("DNS servers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDomains, domains); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBoxLANAddr(t *testing.T) {
	for _, tc := range []struct{ lan, want string }{
		{"2001:db8:6600::/64", "2001:db8:6600::1/64"},
		{"2001:db8:6600:ff::/64", "2001:db8:6600:ff::1/64"},
		{"2001:db8:6600:1:2:3:4:5/64", "2001:db8:6600:1::1/64"},
	} {
		if got := boxLANAddr(netip.MustParsePrefix(tc.lan)); got != netip.MustParsePrefix(tc.want) {
			t.Errorf("boxLANAddr(%s) = %v, want %s", tc.lan, got, tc.want)
		}
	}
}
