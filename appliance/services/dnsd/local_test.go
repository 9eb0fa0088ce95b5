package dnsd

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// testHosts are the LAN hosts of the local tests.
var testHosts = LocalFunc(func() []Host {
	return []Host{
		{Name: "laptop", Addr: netip.MustParseAddr("192.168.77.10")},
		{Name: "Phone.LAN.", Addr: netip.MustParseAddr("192.168.77.11")},
		{Name: "phone", Addr: netip.MustParseAddr("fd77::11")},
		{Name: "bad name", Addr: netip.MustParseAddr("192.168.77.12")},
		{Name: "printer.other", Addr: netip.MustParseAddr("192.168.77.13")},
		{Name: "tv", Addr: netip.MustParseAddr("::ffff:192.168.77.14")},
		{Name: "laptop-alias", Addr: netip.MustParseAddr("192.168.77.10")},
		{Name: "nas", Addr: netip.MustParseAddr("198.18.0.5")},
	}
})

// fmtLocal renders a local answer as lines: the rcode, then "an " and
// "ns " records with single spaces; "forward" when it is not local.
func fmtLocal(r localReply, ok bool) []string {
	if !ok {
		return []string{"forward"}
	}
	out := []string{dns.RcodeToString[r.rcode]}
	for _, rr := range r.answer {
		out = append(out, "an "+strings.Join(strings.Fields(rr.String()), " "))
	}
	for _, rr := range r.ns {
		out = append(out, "ns "+strings.Join(strings.Fields(rr.String()), " "))
	}
	return out
}

func TestLocal(t *testing.T) {
	st, err := newSettings(Config{
		Listen:   []netip.AddrPort{lan1, netip.MustParseAddrPort("[fd77::1]:53")},
		Hostname: "router",
		Local:    testHosts,
		Subnets:  []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")},
	})
	if err != nil {
		t.Fatal(err)
	}
	const (
		lanSOA = "ns lan. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"
		revSOA = "ns 168.192.in-addr.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"
	)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  []string
	}{
		{"laptop.lan.", dns.TypeA, []string{"NOERROR", "an laptop.lan. 60 IN A 192.168.77.10"}},
		{"LAPTOP.Lan.", dns.TypeA, []string{"NOERROR", "an LAPTOP.Lan. 60 IN A 192.168.77.10"}},
		{"laptop.lan.", dns.TypeAAAA, []string{"NOERROR", lanSOA}},
		{"laptop.lan.", dns.TypeMX, []string{"NOERROR", lanSOA}},
		{"laptop.lan.", dns.TypeANY, []string{"NOERROR", "an laptop.lan. 60 IN A 192.168.77.10"}},
		{"phone.lan.", dns.TypeA, []string{"NOERROR", "an phone.lan. 60 IN A 192.168.77.11"}},
		{"phone.lan.", dns.TypeAAAA, []string{"NOERROR", "an phone.lan. 60 IN AAAA fd77::11"}},
		{"phone.", dns.TypeA, []string{"NOERROR", "an phone. 60 IN A 192.168.77.11"}},
		{"tv.lan.", dns.TypeA, []string{"NOERROR", "an tv.lan. 60 IN A 192.168.77.14"}},
		{"router.lan.", dns.TypeA, []string{"NOERROR", "an router.lan. 60 IN A 192.168.77.1"}},
		{"router.lan.", dns.TypeAAAA, []string{"NOERROR", "an router.lan. 60 IN AAAA fd77::1"}},
		{"router.", dns.TypeA, []string{"NOERROR", "an router. 60 IN A 192.168.77.1"}},
		{"unknown.lan.", dns.TypeA, []string{"NXDOMAIN", lanSOA}},
		{"bad name.lan.", dns.TypeA, []string{"NXDOMAIN", lanSOA}},
		{"printer.lan.", dns.TypeA, []string{"NXDOMAIN", lanSOA}},
		{"a.laptop.lan.", dns.TypeA, []string{"NXDOMAIN", lanSOA}},
		{"lan.", dns.TypeSOA, []string{"NOERROR", "an" + lanSOA[2:]}},
		{"lan.", dns.TypeNS, []string{"NOERROR", "an lan. 60 IN NS router.lan."}},
		{"lan.", dns.TypeA, []string{"NOERROR", lanSOA}},
		{"localhost.", dns.TypeA, []string{"NOERROR", "an localhost. 60 IN A 127.0.0.1"}},
		{"foo.localhost.", dns.TypeAAAA, []string{"NOERROR", "an foo.localhost. 60 IN AAAA ::1"}},
		{"localhost.", dns.TypeMX, []string{"NOERROR", "ns localhost. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"x.invalid.", dns.TypeA, []string{"NXDOMAIN", "ns invalid. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"abc.onion.", dns.TypeA, []string{"NXDOMAIN", "ns onion. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"x.home.arpa.", dns.TypeA, []string{"NXDOMAIN", "ns home.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"com.", dns.TypeA, []string{"NXDOMAIN"}},
		{"com.", dns.TypeNS, []string{"forward"}},
		{"com.", dns.TypeDS, []string{"forward"}},
		{"example.com.", dns.TypeA, []string{"forward"}},
		{"laptop.example.com.", dns.TypeA, []string{"forward"}},
		{"10.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 10.77.168.192.in-addr.arpa. 60 IN PTR laptop.lan."}},
		{"10.77.168.192.in-addr.arpa.", dns.TypeA, []string{"NOERROR", revSOA}},
		{"11.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 11.77.168.192.in-addr.arpa. 60 IN PTR phone.lan."}},
		{"14.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 14.77.168.192.in-addr.arpa. 60 IN PTR tv.lan."}},
		{"1.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 1.77.168.192.in-addr.arpa. 60 IN PTR router.lan."}},
		{"99.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", revSOA}},
		{"12.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", revSOA}},
		{"77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", revSOA}},
		{"5.5.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", revSOA}},
		{"5.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", revSOA}},
		{"x.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", revSOA}},
		{"168.192.in-addr.arpa.", dns.TypeSOA, []string{"NOERROR", "an" + revSOA[2:]}},
		{"168.192.in-addr.arpa.", dns.TypeNS, []string{"NOERROR", revSOA}},
		{"192.in-addr.arpa.", dns.TypeNS, []string{"forward"}},
		{"8.8.8.8.in-addr.arpa.", dns.TypePTR, []string{"forward"}},
		{"1.0.0.127.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 1.0.0.127.in-addr.arpa. 60 IN PTR localhost."}},
		{"2.0.0.127.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 2.0.0.127.in-addr.arpa. 60 IN PTR localhost."}},
		{"1.1.1.10.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", "ns 10.in-addr.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"1.1.20.172.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", "ns 20.172.in-addr.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"1.1.1.172.in-addr.arpa.", dns.TypePTR, []string{"forward"}},
		{"9.0.18.198.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", "ns 0.18.198.in-addr.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"5.0.18.198.in-addr.arpa.", dns.TypePTR, []string{"NOERROR", "an 5.0.18.198.in-addr.arpa. 60 IN PTR nas.lan."}},
		{"9.1.18.198.in-addr.arpa.", dns.TypePTR, []string{"forward"}},
		{"1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.d.f.ip6.arpa.", dns.TypePTR,
			[]string{"NOERROR", "an 1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.d.f.ip6.arpa. 60 IN PTR phone.lan."}},
		{"2.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.d.f.ip6.arpa.", dns.TypePTR,
			[]string{"NXDOMAIN", "ns d.f.ip6.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"7.7.d.f.ip6.arpa.", dns.TypePTR, []string{"NOERROR", "ns d.f.ip6.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"8.8.d.f.ip6.arpa.", dns.TypePTR, []string{"NXDOMAIN", "ns d.f.ip6.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypeSOA, []string{"NOERROR", "an 8.b.d.0.1.0.0.2.ip6.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"1.0.0.2.ip6.arpa.", dns.TypePTR, []string{"forward"}},
	} {
		q := dns.Question{Name: tc.name, Qtype: tc.qtype, Qclass: dns.ClassINET}
		got := fmtLocal(st.local(q, dns.CanonicalName(tc.name), lan1.Addr()))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.name, dns.TypeToString[tc.qtype], diff)
		}
	}
}

// TestLocalBoxAddress checks that the box answers its own name with the
// address the query arrived on first, and that without a hostname its
// addresses have no names.
func TestLocalBoxAddress(t *testing.T) {
	lan2 := netip.MustParseAddrPort("192.168.78.1:53")
	st, err := newSettings(Config{Listen: []netip.AddrPort{lan1, lan2}, Hostname: "router"})
	if err != nil {
		t.Fatal(err)
	}
	q := dns.Question{Name: "router.lan.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	want := []string{"NOERROR", "an router.lan. 60 IN A 192.168.78.1", "an router.lan. 60 IN A 192.168.77.1"}
	if diff := cmp.Diff(want, fmtLocal(st.local(q, q.Name, lan2.Addr()))); diff != "" {
		t.Errorf("router.lan arriving on %s (-want +got):\n%s", lan2.Addr(), diff)
	}

	st, err = newSettings(Config{Listen: []netip.AddrPort{lan1}})
	if err != nil {
		t.Fatal(err)
	}
	const soa = "ns lan. 60 IN SOA localhost. nobody.invalid. 1 3600 1200 604800 60"
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  []string
	}{
		{"router.lan.", dns.TypeA, []string{"NXDOMAIN", soa}},
		{"lan.", dns.TypeNS, []string{"NOERROR", soa}},
		{"1.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN", "ns 168.192.in-addr.arpa. 60 IN SOA localhost. nobody.invalid. 1 3600 1200 604800 60"}},
	} {
		q := dns.Question{Name: tc.name, Qtype: tc.qtype, Qclass: dns.ClassINET}
		if diff := cmp.Diff(tc.want, fmtLocal(st.local(q, tc.name, lan1.Addr()))); diff != "" {
			t.Errorf("no hostname: %s (-want +got):\n%s", tc.name, diff)
		}
	}
}
