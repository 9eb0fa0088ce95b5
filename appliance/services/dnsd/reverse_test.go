package dnsd

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func TestParseReverse(t *testing.T) {
	pfx := netip.MustParsePrefix
	for _, tc := range []struct {
		name string
		want reverseName
		ok   bool
	}{
		{"7.0.0.10.in-addr.arpa.", reverseName{prefix: pfx("10.0.0.7/32")}, true},
		{"10.in-addr.arpa.", reverseName{prefix: pfx("10.0.0.0/8")}, true},
		{"in-addr.arpa.", reverseName{prefix: pfx("0.0.0.0/0")}, true},
		{"x.10.in-addr.arpa.", reverseName{prefix: pfx("10.0.0.0/8"), below: true}, true},
		{"1.7.0.0.10.in-addr.arpa.", reverseName{prefix: pfx("10.0.0.7/32"), below: true}, true},
		{"010.in-addr.arpa.", reverseName{prefix: pfx("0.0.0.0/0"), below: true}, true},
		{"256.in-addr.arpa.", reverseName{prefix: pfx("0.0.0.0/0"), below: true}, true},
		{"0.in-addr.arpa.", reverseName{prefix: pfx("0.0.0.0/8")}, true},
		{"d.f.ip6.arpa.", reverseName{prefix: pfx("fd00::/8")}, true},
		{"1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.d.f.ip6.arpa.", reverseName{prefix: pfx("fd77::11/128")}, true},
		{"1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.d.f.ip6.arpa.", reverseName{prefix: pfx("fd77::11:0/112")}, true},
		{"0.1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.d.f.ip6.arpa.", reverseName{prefix: pfx("fd77::11/128"), below: true}, true},
		{".in-addr.arpa.", reverseName{}, false},
		{"a.b.d.f.ip6.arpa.", reverseName{prefix: pfx("fdba::/16")}, true},
		{"ab.d.f.ip6.arpa.", reverseName{prefix: pfx("fd00::/8"), below: true}, true},
		{"ip6.arpa.", reverseName{prefix: pfx("::/0")}, true},
		{"example.com.", reverseName{}, false},
		{"arpa.", reverseName{}, false},
		{"xin-addr.arpa.", reverseName{}, false},
	} {
		got, ok := parseReverse(tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseReverse(%q) = %v, %t; want %v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReverseString(t *testing.T) {
	for _, a := range []string{"192.168.77.10", "10.0.0.1", "0.0.0.0", "255.255.255.255", "fd77::11", "2001:db8::1", "::1"} {
		addr := netip.MustParseAddr(a)
		want, err := dns.ReverseAddr(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := reverseString(netip.PrefixFrom(addr, addr.BitLen())); got != want {
			t.Errorf("reverseString(%s) = %q, want %q", a, got, want)
		}
		rn, ok := parseReverse(want)
		if !ok || !rn.full() || rn.prefix.Addr() != addr {
			t.Errorf("parseReverse(%q) = %v, %t; want %s", want, rn, ok, a)
		}
	}
}

func TestInZone(t *testing.T) {
	type res struct{ In, Apex bool }
	for _, tc := range []struct {
		name, zone string
		want       res
	}{
		{"16.172.in-addr.arpa.", "172.16.0.0/12", res{true, true}},
		{"31.172.in-addr.arpa.", "172.16.0.0/12", res{true, true}},
		{"32.172.in-addr.arpa.", "172.16.0.0/12", res{false, false}},
		{"172.in-addr.arpa.", "172.16.0.0/12", res{false, false}},
		{"1.2.20.172.in-addr.arpa.", "172.16.0.0/12", res{true, false}},
		{"x.20.172.in-addr.arpa.", "172.16.0.0/12", res{true, false}},
		{"168.192.in-addr.arpa.", "192.168.0.0/16", res{true, true}},
		{"192.in-addr.arpa.", "192.168.0.0/16", res{false, false}},
		{"x.192.in-addr.arpa.", "192.168.0.0/16", res{false, false}},
		{"d.f.ip6.arpa.", "fd00::/8", res{true, true}},
		{"8.e.f.ip6.arpa.", "fe80::/10", res{true, true}},
		{"c.e.f.ip6.arpa.", "fe80::/10", res{false, false}},
		{"10.in-addr.arpa.", "fd00::/8", res{false, false}},
	} {
		rn, _ := parseReverse(tc.name)
		in, apex := rn.inZone(netip.MustParsePrefix(tc.zone))
		if diff := cmp.Diff(tc.want, res{in, apex}); diff != "" {
			t.Errorf("%s in %s (-want +got):\n%s", tc.name, tc.zone, diff)
		}
	}
}

// FuzzReverse checks that parseReverse never panics, stays within the
// address size and that a name without extra labels is exactly the
// reverse name of its prefix.
func FuzzReverse(f *testing.F) {
	for _, s := range []string{"7.0.0.10.in-addr.arpa.", "x.10.in-addr.arpa.", "in-addr.arpa.", "d.f.ip6.arpa.", "1.2.3.4.5.in-addr.arpa.", "0..in-addr.arpa.", ".ip6.arpa."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rn, ok := parseReverse(name)
		if !ok {
			return
		}
		if rn.prefix.Bits() > rn.prefix.Addr().BitLen() || rn.prefix.Bits() < 0 {
			t.Fatalf("parseReverse(%q) = %v: bad prefix", name, rn.prefix)
		}
		if !rn.below {
			if got := reverseString(rn.prefix); got != name {
				t.Fatalf("parseReverse(%q) = %v, whose name is %q", name, rn.prefix, got)
			}
		}
		for _, z := range privateReverse {
			if in, apex := rn.inZone(z); apex && !in {
				t.Fatalf("%q: apex of %s but not in it", name, z)
			} else if in {
				rn.apexName(z)
			}
		}
	})
}
