package dashboard

import (
	"net"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/router"
	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/ra"
	"e1kbox/webui"
)

var netips = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}, netip.AddrPort{})

// TestV6Conn: route6's connections as the dashboard lists them: the
// opener's direction first, the NAT table's state names, the protocol's
// name, both sides' packets, the expiry.
func TestV6Conn(t *testing.T) {
	h1, srv := netip.MustParseAddr("2001:db8:1::10").As16(), netip.MustParseAddr("2001:db8:64::1").As16()
	ap := netip.MustParseAddrPort
	exp := time.Unix(2_000_000_000, 0)
	for _, tc := range []struct {
		name string
		in   route6.Conn
		want webui.Conn
	}{
		{"outbound TCP", route6.Conn{LAN: h1, WAN: srv, LANPort: 40000, WANPort: 443, Proto: 6, State: "established", Replied: true, Expires: 2_000_000_000, Packets: [2]uint64{5, 4}},
			webui.Conn{Proto: "tcp", State: "established", Kind: "routed", Src: ap("[2001:db8:1::10]:40000"), Dst: ap("[2001:db8:64::1]:443"), Packets: 9, Expires: exp}},
		{"inbound SYN to an allowed service", route6.Conn{LAN: h1, WAN: srv, LANPort: 22, WANPort: 5555, Proto: 6, State: "syn_sent", Inbound: true, Expires: 2_000_000_000, Packets: [2]uint64{0, 1}},
			webui.Conn{Proto: "tcp", State: "syn_sent", Kind: "routed", Src: ap("[2001:db8:64::1]:5555"), Dst: ap("[2001:db8:1::10]:22"), Packets: 1, Expires: exp}},
		{"after a FIN", route6.Conn{LAN: h1, WAN: srv, Proto: 6, State: "closing", Expires: 2_000_000_000},
			webui.Conn{Proto: "tcp", State: "fin_wait", Kind: "routed", Src: ap("[2001:db8:1::10]:0"), Dst: ap("[2001:db8:64::1]:0"), Expires: exp}},
		{"after an RST", route6.Conn{LAN: h1, WAN: srv, Proto: 6, State: "closed", Expires: 2_000_000_000},
			webui.Conn{Proto: "tcp", State: "close", Kind: "routed", Src: ap("[2001:db8:1::10]:0"), Dst: ap("[2001:db8:64::1]:0"), Expires: exp}},
		{"UDP unreplied", route6.Conn{LAN: h1, WAN: srv, LANPort: 7000, WANPort: 53, Proto: 17, State: "udp", Expires: 2_000_000_000, Packets: [2]uint64{1, 0}},
			webui.Conn{Proto: "udp", State: "unreplied", Kind: "routed", Src: ap("[2001:db8:1::10]:7000"), Dst: ap("[2001:db8:64::1]:53"), Packets: 1, Expires: exp}},
		{"echo replied", route6.Conn{LAN: h1, WAN: srv, LANPort: 4660, Proto: 58, State: "icmp", Replied: true, Expires: 2_000_000_000, Packets: [2]uint64{1, 1}},
			webui.Conn{Proto: "icmpv6", State: "replied", Kind: "routed", Src: ap("[2001:db8:1::10]:4660"), Dst: ap("[2001:db8:64::1]:0"), Packets: 2, Expires: exp}},
		{"ESP", route6.Conn{LAN: h1, WAN: srv, Proto: 50, State: "other", Expires: 2_000_000_000},
			webui.Conn{Proto: "50", State: "unreplied", Kind: "routed", Src: ap("[2001:db8:1::10]:0"), Dst: ap("[2001:db8:64::1]:0"), Expires: exp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webui.Conn{ID: 99, NATSrc: ap("203.0.113.2:1")} // what a reused variable held before
			v6Conn(&tc.in, &got)
			if diff := cmp.Diff(tc.want, got, netips); diff != "" {
				t.Errorf("v6Conn (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConnFamilies: which tables a connection query reads.
func TestConnFamilies(t *testing.T) {
	for _, tc := range []struct {
		query  string
		v4, v6 bool
	}{
		{"", true, true},
		{"state=established&port=443", true, true},
		{"addr=192.168.1.0/24", true, false},
		{"addr=::ffff:192.168.1.10", true, false},
		{"addr=2001:db8::/32", false, true},
		{"proto=icmp", true, false},
		{"proto=icmpv6", false, true},
		{"kind=masquerade", true, false},
		{"kind=routed", false, true},
		{"kind=routed&addr=10.0.0.1", false, false},
	} {
		v, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		q, err := webui.ParseConnQuery(v)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if v4, v6 := wantsV4(&q), wantsV6(&q); v4 != tc.v4 || v6 != tc.v6 {
			t.Errorf("%q: NAT table %v, IPv6 table %v; want %v, %v", tc.query, v4, v6, tc.v4, tc.v6)
		}
	}
}

// TestIPv6Counters: the engine's IPv6 section as the snapshot's.
func TestIPv6Counters(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *dataplane.IPv6Stats
		want *webui.IPv6Counters
	}{
		{"no IPv6 router", nil, nil},
		{"idle", &dataplane.IPv6Stats{}, &webui.IPv6Counters{Drops: []webui.DropStat{}}},
		{"routing", &dataplane.IPv6Stats{Conns: 3, Neighbours: 2, Actions: map[string]uint64{"forward": 120, "to_host": 9},
			Drops: map[string]uint64{"martian": 1, "firewall": 7}},
			&webui.IPv6Counters{Forwarded: 120, Conns: 3, Neighbours: 2, Drops: []webui.DropStat{{Reason: "firewall", Packets: 7}, {Reason: "martian", Packets: 1}}}},
	} {
		if diff := cmp.Diff(tc.want, ipv6Counters(tc.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestIPv6Status: the router's IPv6 side from the services that run: no
// client (none), a client without a delegation (requesting), the RA
// daemon's current and deprecated /64s (an expired one left out), the
// IPv6 router's addresses (the WAN's with origin, state and lifetimes; an
// infinite one without) and gateway; nothing while IPv6 is off.
func TestIPv6Status(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	client, err := dhcp6c.New(dhcp6c.Config{Interface: "wan0", MAC: mac, StateDir: t.TempDir(), PrefixLength: 56}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	adv, err := ra.New(ra.Config{Interface: "lan0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix
	old := ra.Prefix{Prefix: p("2001:db8:5500::/64"), Preferred: now.Add(time.Minute), Valid: now.Add(time.Hour)}
	gone := ra.Prefix{Prefix: p("2001:db8:4400::/64"), Preferred: now.Add(-2 * time.Hour), Valid: now.Add(-time.Hour)}
	cur := ra.Prefix{Prefix: p("2001:db8:6600::/64"), Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)}
	for _, ps := range [][]ra.Prefix{{gone}, {old}, {cur}} {
		if err := adv.SetPrefixes(ps); err != nil {
			t.Fatal(err)
		}
	}
	lanLL, wanLL, gw := netip.MustParseAddr("fe80::a:1"), netip.MustParseAddr("fe80::b:1"), netip.MustParseAddr("fe80::b:99")
	r6, err := route6.New(route6.Config{
		LAN:     route6.Port{ID: 2, MAC: [6]byte{2, 0, 0, 0, 0xa, 1}, MTU: 1500, Addrs: []netip.Addr{lanLL}},
		WAN:     route6.Port{ID: 1, MAC: [6]byte{2, 0, 0, 0, 0xb, 1}, MTU: 1500, Addrs: []netip.Addr{wanLL}},
		Gateway: gw}, route6.Limits{MaxConns: 64, Neighbours: 16})
	if err != nil {
		t.Fatal(err)
	}
	leased := netip.MustParseAddr("2001:db8:64::100")
	pref := now.Add(time.Hour).Truncate(time.Second)
	if err := r6.SetWANAddressing(route6.WANAddressing{DHCPv6: true, Leased: []route6.Leased{{Addr: leased, Preferred: uint32(pref.Unix()),
		Valid: route6.Forever}}}, now.UnixNano()); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Mode: config.ModeNAT}
	for _, tc := range []struct {
		name string
		l    router.Live
		r6   *route6.Router
		want *webui.IPv6Status
	}{
		{"nothing runs", router.Live{Config: cfg}, nil, &webui.IPv6Status{DHCPv6: webui.DHCPv6None}},
		{"a client not yet soliciting", router.Live{Config: cfg, DHCP6: client}, nil,
			&webui.IPv6Status{DHCPv6: webui.DHCPv6None, ClientState: "stopped"}},
		{"the RA daemon's prefixes and the router's addresses", router.Live{Config: cfg, RA: adv}, r6, &webui.IPv6Status{DHCPv6: webui.DHCPv6None,
			LAN: []webui.IPv6Prefix{{Prefix: cur.Prefix, Preferred: cur.Preferred, Valid: cur.Valid},
				{Prefix: old.Prefix, Preferred: old.Preferred, Valid: old.Valid, Deprecated: true}},
			LANAddresses: []netip.Addr{lanLL}, Gateway: gw, WANAddresses: []webui.WANAddress{
				{Address: wanLL, Origin: webui.WANAddrLinkLocal, State: webui.WANAddrTentative},
				{Address: leased, Origin: webui.WANAddrDHCPv6, State: webui.WANAddrTentative, Preferred: pref.UTC()}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ipv6Status(&tc.l, tc.r6, now), netips); diff != "" {
				t.Errorf("ipv6Status (-want +got):\n%s", diff)
			}
		})
	}

	// Through RouterStatus: IPv6 on (its default in NAT mode), then off.
	var live atomic.Pointer[router.Live]
	v := &Router{live: live.Load, v6: func() *route6.Router { return r6 }}
	on, off := true, false
	nat := &config.Config{Mode: config.ModeNAT, Ports: []config.Port{{Name: "wan", Interface: "eth1", Role: config.RoleWAN}}, IPv6: config.IPv6{Enabled: &on}}
	live.Store(&router.Live{Config: nat})
	if st, ok := v.RouterStatus(); !ok || st.IPv6 == nil || st.IPv6.Gateway != gw {
		t.Errorf("NAT mode with IPv6: ok %v, ipv6 %+v; want the gateway %v", ok, st.IPv6, gw)
	}
	nat.IPv6.Enabled = &off
	if st, _ := v.RouterStatus(); st.IPv6 != nil {
		t.Errorf("ipv6.enabled false: ipv6 %+v, want none", st.IPv6)
	}
}
