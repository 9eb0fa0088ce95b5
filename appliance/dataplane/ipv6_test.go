package dataplane

import (
	"net/netip"
	"testing"
	"time"
)

// TestRoute6Gateway checks the IPv6 router's WAN next hop from NAT.IPv6Gateway,
// at start and changed live, and that a change keeps the prefixes.
func TestRoute6Gateway(t *testing.T) {
	p := natPorts{wanID: 1, lanID: 2, hostID: 3, wanMAC: [6]byte{2, 0, 0, 0, 0, 1}, lanMAC: [6]byte{2, 0, 0, 0, 0, 2}, wanMTU: 1500, lanMTU: 1500}
	lan, deleg := []netip.Prefix{netip.MustParsePrefix("2001:db8:7:0::/64")}, []netip.Prefix{netip.MustParsePrefix("2001:db8:7::/48")}
	steps := []struct {
		name string
		gw   string // "" : learnt
		want string // "" : none
	}{
		{"configured link-local", "fe80::1", "fe80::1"},
		{"the same again", "fe80::1", "fe80::1"},
		{"a global one", "2001:db8:ffff::1", "2001:db8:ffff::1"},
		{"unset: learnt, none yet", "", ""},
		{"set again", "fe80::2", "fe80::2"},
	}
	addr := func(s string) netip.Addr {
		if s == "" {
			return netip.Addr{}
		}
		return netip.MustParseAddr(s)
	}
	r, err := newRoute6(p, &NAT{IPv6Gateway: addr(steps[0].gw)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetPrefixes(lan, deleg, nil); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if err := setRoute6WAN(r, p, &NAT{IPv6Gateway: addr(st.gw)}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, ok := r.Gateway(time.Now().UnixNano())
		if gs := map[bool]string{true: got.String(), false: ""}[ok]; gs != st.want {
			t.Errorf("%s: gateway %q, want %q", st.name, gs, st.want)
		}
		if c := r.Config(); len(c.LANPrefixes) != 1 || c.LANPrefixes[0] != lan[0] || len(c.Delegated) != 1 || c.Delegated[0] != deleg[0] {
			t.Errorf("%s: prefixes %v %v after a gateway change, want %v %v", st.name, c.LANPrefixes, c.Delegated, lan, deleg)
		}
	}
	if err := setRoute6WAN(r, p, &NAT{IPv6Gateway: netip.MustParseAddr("ff02::2")}); err == nil {
		t.Error("a multicast gateway was taken")
	}
	if got, _ := r.Gateway(time.Now().UnixNano()); got != netip.MustParseAddr("fe80::2") {
		t.Errorf("after a refused gateway: %v, want the previous fe80::2", got)
	}
}
