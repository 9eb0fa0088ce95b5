package webui

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var netipEq = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}, netip.AddrPort{})

// TestIPv6RouterAPI: /api/router carries the IPv6 side as the router
// reports it, with empty lists rather than null, and without it while no
// IPv6 is routed; the stream's router status has it too.
func TestIPv6RouterAPI(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	for _, tc := range []struct {
		name    string
		v6      *IPv6Status
		want    *IPv6Status
		wantRaw []string // in the JSON of the ipv6 section
	}{
		{"bound", fakeIPv6(now), fakeIPv6(now), []string{`"dhcpv6":"bound"`, `"prefix":"2001:db8:6600::/56"`, `"deprecated":true`}},
		{"requesting, nothing yet", &IPv6Status{DHCPv6: DHCPv6Requesting, ClientState: "soliciting"},
			&IPv6Status{DHCPv6: DHCPv6Requesting, ClientState: "soliciting", Delegated: []IPv6Prefix{}, LAN: []IPv6Prefix{},
				WANAddresses: []WANAddress{}, LANAddresses: []netip.Addr{}, DNS: []netip.Addr{}},
			[]string{`"delegated":[]`, `"lan":[]`, `"wan_addresses":[]`, `"dns":[]`}},
		{"IPv6 off", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeRouter()
			r.edit(func(s *RouterStatus) { s.IPv6 = tc.v6 })
			f := startFixture(t, func(o *Options) { o.Router = r }, false)
			var raw struct {
				IPv6 json.RawMessage `json:"ipv6"`
			}
			f.doJSON("GET", "/api/router", nil, http.StatusOK, &raw)
			var got *IPv6Status
			if raw.IPv6 != nil {
				got = new(IPv6Status)
				if err := json.Unmarshal(raw.IPv6, got); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, got, netipEq); diff != "" {
				t.Errorf("ipv6 of /api/router (-want +got):\n%s", diff)
			}
			for _, s := range tc.wantRaw {
				if !strings.Contains(string(raw.IPv6), s) {
					t.Errorf("ipv6 JSON %s lacks %s", raw.IPv6, s)
				}
			}
			if tc.v6 != nil && tc.v6.Delegated == nil && r.st.IPv6.Delegated != nil {
				t.Error("filling the answer's empty lists changed the router's own status")
			}
			f.srv.publish(now)
			var m StatsMessage
			f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
			if m.Router == nil || (m.Router.IPv6 == nil) != (tc.v6 == nil) {
				t.Errorf("stream router %+v, want ipv6 %v", m.Router, tc.v6 != nil)
			}
		})
	}
}

// TestIPv6Metrics: the IPv6 router's counters, the delegation's
// lifetimes and the WAN addresses by origin and state are e1kbox_ipv6_*
// series; without IPv6 there are none.
func TestIPv6Metrics(t *testing.T) {
	now := time.Now()
	counters := &IPv6Counters{Forwarded: 1234, Conns: 7, Neighbours: 3, DADFailures: 2,
		Drops: []DropStat{{Reason: "firewall", Packets: 40}, {Reason: "martian", Packets: 2}}}
	// wanAddrs are the e1kbox_ipv6_wan_addresses series: every origin and
	// state, 0 but for n.
	wanAddrs := func(m map[string]float64, n map[[2]string]float64) map[string]float64 {
		for _, o := range []string{WANAddrLinkLocal, WANAddrSLAAC, WANAddrDHCPv6} {
			for _, st := range []string{WANAddrTentative, WANAddrPreferred, WANAddrDeprecated, WANAddrDuplicate} {
				m[`e1kbox_ipv6_wan_addresses{origin="`+o+`",state="`+st+`"}`] = n[[2]string{o, st}]
			}
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		counters *IPv6Counters
		status   *IPv6Status
		want     map[string]float64 // exact values
		lifetime map[string]float64 // seconds left, within 5 s
	}{
		{"routing", counters, fakeIPv6(now), wanAddrs(map[string]float64{
			"e1kbox_ipv6_forwarded_packets_total":                   1234,
			"e1kbox_ipv6_connections":                               7,
			"e1kbox_ipv6_neighbours":                                3,
			"e1kbox_ipv6_dad_failures_total":                        2,
			series("e1kbox_ipv6_drops_total", "reason", "firewall"): 40,
			series("e1kbox_ipv6_drops_total", "reason", "martian"):  2,
			"e1kbox_ipv6_dhcpv6_bound":                              1,
		}, map[[2]string]float64{{WANAddrLinkLocal, WANAddrPreferred}: 1, {WANAddrDHCPv6, WANAddrPreferred}: 1,
			{WANAddrSLAAC, WANAddrPreferred}: 1, {WANAddrDHCPv6, WANAddrDuplicate}: 1}), map[string]float64{
			series("e1kbox_ipv6_delegated_prefix_valid_seconds", "prefix", "2001:db8:6600::/56"):     7200,
			series("e1kbox_ipv6_delegated_prefix_preferred_seconds", "prefix", "2001:db8:6600::/56"): 3600,
		}},
		{"requesting, an expired prefix", &IPv6Counters{Drops: []DropStat{}}, &IPv6Status{DHCPv6: DHCPv6Requesting,
			Delegated: []IPv6Prefix{{Prefix: netip.MustParsePrefix("2001:db8:7700::/56"), Preferred: now.Add(-2 * time.Hour), Valid: now.Add(-time.Hour)}}},
			wanAddrs(map[string]float64{
				"e1kbox_ipv6_forwarded_packets_total": 0,
				"e1kbox_ipv6_connections":             0,
				"e1kbox_ipv6_neighbours":              0,
				"e1kbox_ipv6_dad_failures_total":      0,
				"e1kbox_ipv6_dhcpv6_bound":            0,
				series("e1kbox_ipv6_delegated_prefix_valid_seconds", "prefix", "2001:db8:7700::/56"):     0,
				series("e1kbox_ipv6_delegated_prefix_preferred_seconds", "prefix", "2001:db8:7700::/56"): 0,
			}, nil), nil},
		{"no IPv6", nil, nil, map[string]float64{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stats := newFakeStats()
			stats.ipv6 = tc.counters
			r := newFakeRouter()
			r.edit(func(s *RouterStatus) { s.IPv6 = tc.status })
			f := startFixture(t, func(o *Options) { o.Stats, o.Router = stats, r }, false)
			got, _ := scrape(t, f)
			ours := map[string]float64{}
			for k, v := range got {
				if !strings.HasPrefix(k, "e1kbox_ipv6_") {
					continue
				}
				if want, ok := tc.lifetime[k]; ok {
					if v > want || v < want-5 {
						t.Errorf("%s = %v, want about %v", k, v, want)
					}
					continue
				}
				ours[k] = v
			}
			if diff := cmp.Diff(tc.want, ours); diff != "" {
				t.Errorf("e1kbox_ipv6 series (-want +got):\n%s", diff)
			}
			for k := range tc.lifetime {
				if _, ok := got[k]; !ok {
					t.Errorf("no %s", k)
				}
			}
		})
	}
}

// TestConnQueryIPv6: IPv6 connections (kind routed, no creation time, no
// bytes) next to NAT ones answer the same filters; an unknown age ranks
// after the known ones in either order.
func TestConnQueryIPv6(t *testing.T) {
	ap := netip.MustParseAddrPort
	base := time.Unix(1_800_000_000, 0)
	all := []Conn{
		{ID: 1, Proto: "tcp", State: "established", Kind: "masquerade", Src: ap("192.168.1.10:5000"), Dst: ap("1.1.1.1:443"),
			NATSrc: ap("203.0.113.2:20000"), Packets: 10, Bytes: 5000, Created: base.Add(-time.Hour)},
		{ID: 2, Proto: "icmp", State: "replied", Kind: "masquerade", Src: ap("192.168.1.11:7"), Dst: ap("9.9.9.9:0"),
			Packets: 2, Bytes: 168, Created: base.Add(-time.Minute)},
		{Proto: "tcp", State: "established", Kind: ConnKindRouted, Src: ap("[2001:db8:6600::100]:51000"), Dst: ap("[2001:db8:64::1]:443"),
			Packets: 30, Expires: base.Add(time.Hour)},
		{Proto: "icmpv6", State: "unreplied", Kind: ConnKindRouted, Src: ap("[2001:db8:6600::200]:4660"), Dst: ap("[2001:db8:64::1]:0"),
			Packets: 1, Expires: base.Add(30 * time.Second)},
		{Proto: "tcp", State: "syn_sent", Kind: ConnKindRouted, Src: ap("[2001:db8:64::1]:40000"), Dst: ap("[2001:db8:6600::100]:22"),
			Packets: 1, Expires: base.Add(2 * time.Minute)},
	}
	name := func(c Conn) string { return c.Proto + " " + c.Src.String() + " " + c.Dst.String() }
	for _, tc := range []struct {
		query string
		want  []string
		total int
	}{
		{"addr=2001:db8:6600::/56&sort=packets", []string{ // ties (ID 0 all) by source
			"tcp [2001:db8:6600::100]:51000 [2001:db8:64::1]:443",
			"tcp [2001:db8:64::1]:40000 [2001:db8:6600::100]:22",
			"icmpv6 [2001:db8:6600::200]:4660 [2001:db8:64::1]:0",
		}, 3},
		{"addr=2001:db8:6600::100", []string{
			"tcp [2001:db8:64::1]:40000 [2001:db8:6600::100]:22",
			"tcp [2001:db8:6600::100]:51000 [2001:db8:64::1]:443",
		}, 2},
		{"proto=icmpv6", []string{"icmpv6 [2001:db8:6600::200]:4660 [2001:db8:64::1]:0"}, 1},
		{"proto=icmp", []string{"icmp 192.168.1.11:7 9.9.9.9:0"}, 1},
		{"kind=routed&port=22", []string{"tcp [2001:db8:64::1]:40000 [2001:db8:6600::100]:22"}, 1},
		{"state=established&sort=packets", []string{
			"tcp [2001:db8:6600::100]:51000 [2001:db8:64::1]:443",
			"tcp 192.168.1.10:5000 1.1.1.1:443",
		}, 2},
		{"sort=age&limit=3", []string{"tcp 192.168.1.10:5000 1.1.1.1:443", "icmp 192.168.1.11:7 9.9.9.9:0",
			"tcp [2001:db8:64::1]:40000 [2001:db8:6600::100]:22"}, 5},
		{"sort=age&order=asc&limit=3", []string{"icmp 192.168.1.11:7 9.9.9.9:0", "tcp 192.168.1.10:5000 1.1.1.1:443",
			"tcp [2001:db8:64::1]:40000 [2001:db8:6600::100]:22"}, 5},
		{"sort=age&order=asc&offset=3", []string{"tcp [2001:db8:6600::100]:51000 [2001:db8:64::1]:443",
			"icmpv6 [2001:db8:6600::200]:4660 [2001:db8:64::1]:0"}, 5},
	} {
		t.Run(tc.query, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			q, err := ParseConnQuery(v)
			if err != nil {
				t.Fatal(err)
			}
			page, total := FilterConns(all, q)
			var got []string
			for _, c := range page {
				got = append(got, name(c))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || total != tc.total {
				t.Errorf("total %d (want %d), page (-want +got):\n%s", total, tc.total, diff)
			}
		})
	}
	// The IPv6 entries' JSON has no creation time.
	b, err := json.Marshal(all[2])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, `"created"`) || !strings.Contains(s, `"kind":"routed"`) || !strings.Contains(s, `"src":"[2001:db8:6600::100]:51000"`) {
		t.Errorf("IPv6 connection JSON %s: want kind routed, the compact address and no created", s)
	}
}

// TestNeighboursIPv6: IPv6 entries come with their state and port.
func TestNeighboursIPv6(t *testing.T) {
	want := []Neighbour{
		{Side: "lan", Port: "lan", IP: netip.MustParseAddr("2001:db8:6600::100"), MAC: "02:78:00:00:00:01", Resolved: true, State: "reachable", Confirmed: time.Unix(100, 0).UTC()},
		{Side: "wan", Port: "wan", IP: netip.MustParseAddr("fe80::1"), State: "incomplete"},
	}
	f := newFixture(t, func(o *Options) { o.Neighbours = fakeNeighbours(want) })
	var got struct{ Neighbours []Neighbour }
	f.doJSON("GET", "/api/neighbours", nil, http.StatusOK, &got)
	if diff := cmp.Diff(want, got.Neighbours, netipEq); diff != "" {
		t.Errorf("/api/neighbours (-want +got):\n%s", diff)
	}
}

type fakeNeighbours []Neighbour

func (f fakeNeighbours) Neighbours() ([]Neighbour, error) { return f, nil }
