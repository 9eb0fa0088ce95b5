package route6

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// TestConnection: a LAN host's TCP connection goes out after the gateway
// is resolved (NS, NA, the queued SYN released), its replies come back
// after the host is resolved, then both ways forward at once with the hop
// limit decremented and the MACs rewritten.
func TestConnection(t *testing.T) {
	e := newEnv(t, "")
	syn := fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0))
	if res := e.handle(lanPort, syn); res.Action != routing.Queued {
		t.Fatalf("first SYN: %v/%v, want queued behind an NS", res.Action, res.Reason)
	}
	out := e.outputs()
	if len(out) != 1 || out[0].port != wanPort {
		t.Fatalf("outputs %v, want one NS on the WAN", out)
	}
	ns := parse(t, out[0].b)
	if ns.ICMP.Type != icmpNS || ns.IPv6.Dst != a6("ff02::1:ff0b:99") || ns.IPv6.Src != wanLL || ns.IPv6.HopLimit != 255 ||
		!bytes.Equal(out[0].b[ns.L4Off+8:ns.L4Off+24], gwLL[:]) {
		t.Errorf("NS %+v, want one for %x to its solicited-node group from %x", ns.IPv6, gwLL, wanLL)
	}
	out = e.resolve(wanPort, gwLL, gwMAC)
	if len(out) != 1 || out[0].port != wanPort {
		t.Fatalf("after the NA: %v, want the SYN released on the WAN", out)
	}
	f := parse(t, out[0].b)
	if f.Dst != gwMAC || f.Src != wanMAC || f.IPv6.HopLimit != 63 || f.IPv6.Src != host || f.IPv6.Dst != server {
		t.Errorf("released SYN %x > %x hop %d %x > %x", f.Src, f.Dst, f.IPv6.HopLimit, f.IPv6.Src, f.IPv6.Dst)
	}
	synack := fromWAN(tcp(server, host, 443, 40000, frame.TCPSyn|frame.TCPAck, 0))
	if res := e.handle(wanPort, synack); res.Action != routing.Queued {
		t.Fatalf("SYN-ACK: %v/%v, want queued for the host", res.Action, res.Reason)
	}
	e.outputs()
	if out := e.resolve(lanPort, host, hostMAC); len(out) != 1 || out[0].port != lanPort {
		t.Fatalf("after the host's NA: %v, want the SYN-ACK on the LAN", out)
	}
	ack := fromLAN(tcp(host, server, 40000, 443, frame.TCPAck, 100))
	res := e.handle(lanPort, ack)
	if res.Action != routing.Forward || res.Port != wanPort {
		t.Fatalf("ACK: %v/%v, want forwarded", res.Action, res.Reason)
	}
	if f := parse(t, res.Frame); f.Dst != gwMAC || f.IPv6.HopLimit != 63 {
		t.Errorf("forwarded ACK to %x hop %d", f.Dst, f.IPv6.HopLimit)
	}
	if res := e.handle(wanPort, fromWAN(tcp(server, host, 443, 40000, frame.TCPAck, 10))); res.Action != routing.Forward || res.Port != lanPort {
		t.Errorf("reply: %v/%v, want forwarded", res.Action, res.Reason)
	}
	conns := e.r.Conns(10, e.now)
	if len(conns) != 1 || conns[0].State != "established" || conns[0].Inbound || conns[0].Packets != [2]uint64{2, 2} {
		t.Errorf("Conns() = %+v, want one established outbound connection, 2 packets each way", conns)
	}
}

// resolved returns an env whose gateway and host are in the neighbour
// cache.
func resolved(t *testing.T, rs string) *env {
	e := newEnv(t, rs)
	e.r.neigh.learn(WAN, &gwLL, gwMAC, learnConfirm, uint32(e.now/1e9), e.now)
	e.r.neigh.learn(LAN, &host, hostMAC, learnConfirm, uint32(e.now/1e9), e.now)
	return e
}

// TestFirewall: unsolicited inbound TCP and UDP are dropped, replies of
// the LAN's connections pass, an allow rule admits an inbound service, a
// drop rule stops an outbound one, TCP without SYN opens nothing.
func TestFirewall(t *testing.T) {
	e := resolved(t, `
ip6 daddr 2001:db8:1::10 tcp dport 22 accept
ip6 daddr 2001:db8:ffff::/48 udp dport 9 drop
`)
	for _, tc := range []struct {
		name string
		port int
		pkt  []byte
		want routing.Action
		why  Reason
	}{
		{"inbound SYN", wanPort, fromWAN(tcp(server, host, 5555, 80, frame.TCPSyn, 0)), routing.Drop, ReasonFirewall},
		{"inbound UDP", wanPort, fromWAN(udp(server, host, 5555, 53)), routing.Drop, ReasonFirewall},
		{"inbound SYN to the allowed service", wanPort, fromWAN(tcp(server, host, 5555, 22, frame.TCPSyn, 0)), routing.Forward, 0},
		{"its reply", lanPort, fromLAN(tcp(host, server, 22, 5555, frame.TCPSyn|frame.TCPAck, 0)), routing.Forward, 0},
		{"the same service on another host", wanPort, fromWAN(tcp(server, host2, 5555, 22, frame.TCPSyn, 0)), routing.Drop, ReasonFirewall},
		{"outbound UDP", lanPort, fromLAN(udp(host, server, 7000, 53)), routing.Forward, 0},
		{"its reply", wanPort, fromWAN(udp(server, host, 53, 7000)), routing.Forward, 0},
		{"a reply from another port", wanPort, fromWAN(udp(server, host, 54, 7000)), routing.Drop, ReasonFirewall},
		{"outbound to a dropped port", lanPort, fromLAN(udp(host, server, 7000, 9)), routing.Drop, ReasonRule},
		{"outbound ACK of no connection", lanPort, fromLAN(tcp(host, server, 1, 2, frame.TCPAck, 0)), routing.Drop, ReasonInvalid},
		{"inbound ACK of no connection", wanPort, fromWAN(tcp(server, host, 2, 1, frame.TCPAck, 0)), routing.Drop, ReasonInvalid},
	} {
		if res := e.handle(tc.port, tc.pkt); res.Action != tc.want || res.Reason != tc.why {
			t.Errorf("%s: %v/%v, want %v/%v", tc.name, res.Action, res.Reason, tc.want, tc.why)
		}
	}
	conns := e.r.Conns(10, e.now)
	if n := e.r.ConnCount(e.now); n != len(conns) {
		t.Errorf("ConnCount() = %d, want %d", n, len(conns))
	}
	inbound := 0
	for _, c := range conns {
		if c.Inbound {
			inbound++
		}
	}
	if len(conns) != 2 || inbound != 1 {
		t.Errorf("Conns() = %+v, want the inbound ssh and the outbound UDP", conns)
	}
	e.now += 31 * 1e9 // the unreplied... UDP was replied: 180 s
	if res := e.handle(wanPort, fromWAN(udp(server, host, 53, 7000))); res.Action != routing.Forward {
		t.Errorf("replied UDP after 31 s: %v/%v, want forwarded", res.Action, res.Reason)
	}
	e.now += 181 * 1e9
	if res := e.handle(wanPort, fromWAN(udp(server, host, 53, 7000))); res.Action != routing.Drop || res.Reason != ReasonFirewall {
		t.Errorf("UDP after 181 s idle: %v/%v, want dropped", res.Action, res.Reason)
	}
}

// TestICMPv6: errors the box sends (time exceeded, packet too big,
// unreachable for a delegated prefix that is not on the LAN) quote the
// packet and carry the MTU; the RFC 4890 transit policy.
func TestICMPv6(t *testing.T) {
	e := resolved(t, "")
	big := fromLAN(frametest.IPv6{Src: host, Dst: server}.UDPPacket(7000, 9000, make([]byte, 1400)))
	res := e.handle(lanPort, big)
	if res.Action != routing.Reply || res.Reason != ReasonTooBig || res.Port != lanPort {
		t.Fatalf("1448-byte packet to a 1400-byte WAN: %v/%v, want packet too big", res.Action, res.Reason)
	}
	f := parse(t, res.Frame)
	if f.ICMP.Type != frame.ICMPv6PacketTooBig || binary.BigEndian.Uint32(res.Frame[f.L4Off+4:]) != 1400 || f.IPv6.Dst != host ||
		f.IPv6.Src != lanAddr || f.Dst != hostMAC || f.L3End-f.L3Off > 1280 {
		t.Errorf("PTB %+v mtu %d, want 1400 from %x to the host within 1280 bytes", f.IPv6, binary.BigEndian.Uint32(res.Frame[f.L4Off+4:]), lanAddr)
	}
	res = e.handle(lanPort, fromLAN(frametest.IPv6{Src: host, Dst: server, HopLimit: 1}.UDPPacket(7000, 33434, nil)))
	if f := parse(t, res.Frame); res.Action != routing.Reply || f.ICMP.Type != frame.ICMPv6TimeExceeded || f.ICMP.Code != 0 {
		t.Errorf("hop limit 1: %v/%v, want time exceeded", res.Action, res.Reason)
	}
	res = e.handle(lanPort, fromLAN(udp(host, a6("2001:db8:1:5::1"), 7000, 53)))
	if res.Action != routing.Reply || res.Reason != ReasonNoRoute || parse(t, res.Frame).ICMP.Type != frame.ICMPv6DestUnreach {
		t.Errorf("to the delegated but unrouted 2001:db8:1:5::/64: %v/%v, want unreachable", res.Action, res.Reason)
	}

	// Transit ICMPv6.
	out := fromLAN(udp(host, server, 7001, 53))
	if res := e.handle(lanPort, out); res.Action != routing.Forward {
		t.Fatalf("outbound UDP: %v/%v", res.Action, res.Reason)
	}
	quote := udp(host, server, 7001, 53)
	stray := udp(host, server, 7002, 53)
	for _, tc := range []struct {
		name string
		port int
		pkt  []byte
		want Reason
	}{
		{"PTB about the LAN's connection", wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6PacketTooBig, 0, 1280, quote)), 0},
		{"unreachable about it", wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6DestUnreach, 4, 0, quote)), 0},
		{"PTB about no connection", wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6PacketTooBig, 0, 1280, stray)), ReasonICMPUnrelated},
		{"outbound echo request", lanPort, fromLAN(icmp(host, server, 64, frame.ICMPv6EchoRequest, 0, 0x12340001, nil)), 0},
		{"its reply", wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6EchoReply, 0, 0x12340001, nil)), 0},
		{"an echo reply of no request", wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6EchoReply, 0, 0x99990001, nil)), ReasonICMPUnrelated},
		{"inbound echo request", wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6EchoRequest, 0, 0x77770001, nil)), 0},
		{"transit NS", lanPort, fromLAN(icmp(host, server, 255, icmpNS, 0, 0, server[:])), ReasonICMPPolicy},
		{"transit router renumbering", wanPort, fromWAN(icmp(server, host, 64, 138, 0, 0, nil)), ReasonICMPPolicy},
		{"an unknown type", lanPort, fromLAN(icmp(host, server, 64, 200, 0, 0, nil)), ReasonICMPPolicy},
	} {
		res := e.handle(tc.port, tc.pkt)
		want := routing.Forward
		if tc.want != 0 {
			want = routing.Drop
		}
		if res.Action != want || res.Reason != tc.want {
			t.Errorf("%s: %v/%v, want %v/%v", tc.name, res.Action, res.Reason, want, tc.want)
		}
	}
	// Inbound echo requests to a known host are not limited (the scan
	// limits are for unknown addresses: TestScanLimits).
	passed := 0
	for i := range 20 {
		if e.handle(wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6EchoRequest, 0, uint32(0x5000+i)<<16, nil))).Action == routing.Forward {
			passed++
		}
	}
	if passed != 20 {
		t.Errorf("%d of 20 inbound echo requests to a known host in a second passed, want all", passed)
	}
}

// TestPolicy: martians, link-local, the extension header and fragment
// policy.
func TestPolicy(t *testing.T) {
	e := resolved(t, "")
	hbh := frametest.IPv6{Src: host, Dst: server, NextHeader: frame.ProtoHopByHop}.Build(
		append(frametest.Ext6(frame.ProtoUDP, []byte{1, 4, 0, 0, 0, 0}), frametest.UDPRaw(1, 2, nil)...))
	rh := frametest.IPv6{Src: host, Dst: server, NextHeader: frame.ProtoRouting}.Build(
		append(frametest.Ext6(frame.ProtoUDP, []byte{0, 0}), frametest.UDPRaw(1, 2, nil)...))
	frag := frametest.IPv6{Src: host, Dst: server, NextHeader: frame.ProtoFragment}.Build(
		append(frametest.Frag6(frame.ProtoUDP, 0, true, 7), frametest.UDPRaw(1, 2, make([]byte, 8))...))
	dstopt := frametest.IPv6{Src: host, Dst: server, NextHeader: frame.ProtoDestOpts}.Build(
		append(frametest.Ext6(frame.ProtoUDP, []byte{1, 4, 0, 0, 0, 0}), frametest.IPv6{Src: host, Dst: server}.UDP(1, 2, nil)...))
	for _, tc := range []struct {
		name string
		port int
		pkt  []byte
		want routing.Action
		why  Reason
	}{
		{"LAN source outside the prefix", lanPort, fromLAN(udp(a6("2001:db8:9::1"), server, 1, 2)), routing.Drop, ReasonMartian},
		{"WAN source inside the LAN prefix", wanPort, fromWAN(udp(host2, host, 1, 2)), routing.Drop, ReasonMartian},
		{"WAN to an address not ours", wanPort, fromWAN(udp(server, a6("2001:db8:7::1"), 1, 2)), routing.Drop, ReasonNotForUs},
		{"multicast source", lanPort, fromLAN(udp(a6("ff02::1"), server, 1, 2)), routing.Drop, ReasonMartian},
		{"link-local destination", lanPort, fromLAN(udp(host, a6("fe80::77"), 1, 2)), routing.Drop, ReasonLinkLocal},
		{"LAN to LAN", lanPort, fromLAN(udp(host, host2, 1, 2)), routing.Drop, ReasonNoRoute},
		{"hop-by-hop", lanPort, fromLAN(hbh), routing.Drop, ReasonExtHeader},
		{"routing header", lanPort, fromLAN(rh), routing.Drop, ReasonExtHeader},
		{"fragment", lanPort, fromLAN(frag), routing.Drop, ReasonFragment},
		{"destination options", lanPort, fromLAN(dstopt), routing.Forward, 0},
		{"other MAC", lanPort, eth(hostMAC, hostMAC, udp(host, server, 1, 2)), routing.Drop, ReasonNotForUs},
		{"RS to the host", lanPort, fromLAN(icmp(a6("fe80::10"), a6("ff02::2"), 255, icmpRS, 0, 0, nil)), routing.ToHost, 0},
		{"DNS to the box", lanPort, fromLAN(udp(host, lanAddr, 5353, 53)), routing.ToHost, 0},
		{"WAN to the box's link-local", wanPort, fromWAN(udp(gwLL, wanLL, 1, 22)), routing.Drop, ReasonNotForUs},
		{"DHCPv6 reply", wanPort, fromWAN(udp(gwLL, wanLL, 547, 546)), routing.ToHost, 0},
		{"unknown port", 9, fromLAN(udp(host, server, 1, 2)), routing.Drop, ReasonUnknownPort},
	} {
		if res := e.handle(tc.port, tc.pkt); res.Action != tc.want || res.Reason != tc.why {
			t.Errorf("%s: %v/%v, want %v/%v", tc.name, res.Action, res.Reason, tc.want, tc.why)
		}
	}
}

// TestNDP: the box answers NS for its addresses (solicited NA with its
// MAC, router flag on the LAN; DAD answered to all nodes), echo to its
// addresses, takes the WAN gateway from an RA, and gives up a neighbour
// that does not answer.
func TestNDP(t *testing.T) {
	cfg := testConfig()
	cfg.Gateway = netip.Addr{}
	r, err := New(cfg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, r: r, w: r.NewWorker(nil), now: 5000 * 1e9}
	e.settle()
	sll := append(append([]byte(nil), lanAddr[:]...), optSLLA, 1)
	sll = append(sll, hostMAC[:]...)
	res := e.handle(lanPort, eth(a6mac("ff02::1:ff00:1"), hostMAC, icmp(host, a6("ff02::1:ff00:1"), 255, icmpNS, 0, 0, sll)))
	if res.Action != routing.Reply || res.Port != lanPort {
		t.Fatalf("NS for the LAN address: %v/%v, want an NA", res.Action, res.Reason)
	}
	f := parse(t, res.Frame)
	body := res.Frame[f.L4Off:f.L3End]
	if f.ICMP.Type != icmpNA || f.Dst != hostMAC || f.IPv6.Dst != host || f.IPv6.Src != lanAddr || body[4] != 0xe0 ||
		!bytes.Equal(body[8:24], lanAddr[:]) || body[24] != optTLLA || !bytes.Equal(body[26:32], lanMAC[:]) {
		t.Errorf("NA %x, want R|S|O for %x with the LAN MAC", body, lanAddr)
	}
	if n := e.r.Neighbours(e.now); len(n) != 1 || n[0].Addr != host || n[0].MAC != hostMAC {
		t.Errorf("Neighbours() = %+v, want the soliciting host learnt", n)
	}
	dad := icmp([16]byte{}, a6("ff02::1:ff0b:1"), 255, icmpNS, 0, 0, wanLL[:])
	res = e.handle(wanPort, eth(a6mac("ff02::1:ff0b:1"), gwMAC, dad))
	if f := parse(t, res.Frame); res.Action != routing.Reply || f.IPv6.Dst != a6("ff02::1") || res.Frame[f.L4Off+4] != 0x20 {
		t.Errorf("DAD for the WAN link-local: %v/%v, want an NA to all nodes, override only", res.Action, res.Reason)
	}
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"hop limit 64", icmp(host, a6("ff02::1:ff00:1"), 64, icmpNS, 0, 0, lanAddr[:])},
		{"code 1", icmp(host, a6("ff02::1:ff00:1"), 255, icmpNS, 1, 0, lanAddr[:])},
		{"short", icmp(host, a6("ff02::1:ff00:1"), 255, icmpNS, 0, 0, lanAddr[:8])},
		{"zero-length option", icmp(host, a6("ff02::1:ff00:1"), 255, icmpNS, 0, 0, append(lanAddr[:], 1, 0, 0, 0, 0, 0, 0, 0))},
		{"DAD with a source link-layer address", icmp([16]byte{}, a6("ff02::1:ff00:1"), 255, icmpNS, 0, 0, sll)},
	} {
		if res := e.handle(lanPort, eth(a6mac("ff02::1:ff00:1"), hostMAC, tc.pkt)); res.Action != routing.Drop || res.Reason != ReasonNDP {
			t.Errorf("NS with %s: %v/%v, want dropped as invalid NDP", tc.name, res.Action, res.Reason)
		}
	}
	res = e.handle(lanPort, fromLAN(icmp(host, lanAddr, 64, frame.ICMPv6EchoRequest, 0, 0x00010001, []byte("ping"))))
	if f := parse(t, res.Frame); res.Action != routing.Reply || f.ICMP.Type != frame.ICMPv6EchoReply || f.IPv6.Src != lanAddr {
		t.Errorf("echo to the LAN address: %v/%v, want a reply", res.Action, res.Reason)
	}

	// No gateway yet: unreachable. An RA makes one.
	if res := e.handle(lanPort, fromLAN(udp(host, server, 1, 2))); res.Reason != ReasonNoRoute {
		t.Errorf("without a gateway: %v/%v, want no route", res.Action, res.Reason)
	}
	ra := icmp(gwLL, a6("ff02::1"), 255, icmpRA, 0, 64<<24|1800, append(make([]byte, 8), append([]byte{optSLLA, 1}, gwMAC[:]...)...))
	if res := e.handle(wanPort, eth(allNodesMAC, gwMAC, ra)); res.Action != routing.ToHost {
		t.Errorf("RA: %v/%v, want it passed to the host too", res.Action, res.Reason)
	}
	if gw, ok := e.r.Gateway(e.now); !ok || gw.As16() != gwLL {
		t.Fatalf("Gateway() = %v, %v; want %x from the RA", gw, ok, gwLL)
	}
	if res := e.handle(lanPort, fromLAN(udp(host, server, 1, 2))); res.Action != routing.Forward {
		t.Errorf("with the RA's gateway (its MAC from the RA): %v/%v, want forwarded", res.Action, res.Reason)
	}

	// A LAN host that never answers: the frame waits 3 s, then fails.
	if res := e.handle(wanPort, fromWAN(icmp(server, host2, 64, frame.ICMPv6EchoRequest, 0, 1, nil))); res.Action != routing.Queued {
		t.Fatalf("echo to an unresolved host: %v/%v, want queued", res.Action, res.Reason)
	}
	for i := 1; i <= 4; i++ {
		e.now += 1e9
		e.w.Tick(e.now)
		e.outputs()
	}
	if e.w.Waiting() || e.r.Stats().Drops[ReasonNeighFailed] != 1 {
		t.Errorf("after 4 s: waiting %v, neigh_failed %d; want the frame dropped", e.w.Waiting(), e.r.Stats().Drops[ReasonNeighFailed])
	}
}

// a6mac is the Ethernet multicast address of an IPv6 group.
func a6mac(s string) [6]byte {
	a := a6(s)
	return [6]byte{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// TestHostPort: the box's own stack's RAs go to the LAN as they are, its
// unicast to LAN hosts through the neighbour cache, nothing to the WAN;
// NAs on the LAN reach it too.
func TestHostPort(t *testing.T) {
	cfg := testConfig()
	cfg.Host = 3
	r, err := New(cfg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, r: r, w: r.NewWorker(nil), now: 5000 * 1e9}
	e.settle()
	ra := eth(allNodesMAC, lanMAC, icmp(lanLL, a6("ff02::1"), 255, icmpRA, 0, 64<<24|1800, make([]byte, 8)))
	if res := e.handle(3, ra); res.Action != routing.Forward || res.Port != lanPort || !bytes.Equal(res.Frame, ra[:len(res.Frame)]) {
		t.Errorf("the box's RA: %v/%v port %d, want forwarded unchanged to the LAN", res.Action, res.Reason, res.Port)
	}
	dns := eth(hostMAC, lanMAC, udp(lanAddr, host, 53, 5353))
	if res := e.handle(3, dns); res.Action != routing.Queued {
		t.Errorf("the box's DNS answer to an unresolved host: %v/%v, want queued", res.Action, res.Reason)
	}
	e.outputs()
	if res := e.handle(lanPort, fromLAN(na(host, lanLL, host, hostMAC))); res.Action != routing.Deliver || res.Port != 3 {
		t.Errorf("an NA on the LAN: %v/%v port %d, want it delivered to the box's stack (port 3) too", res.Action, res.Reason, res.Port)
	}
	if out := e.outputs(); len(out) != 1 || out[0].port != lanPort {
		t.Errorf("after the NA: %v, want the DNS answer released", out)
	}
	if res := e.handle(3, eth(gwMAC, lanMAC, udp(lanAddr, server, 1, 2))); res.Action != routing.Drop || res.Reason != ReasonNoRoute {
		t.Errorf("the box's stack to the WAN: %v/%v, want no route", res.Action, res.Reason)
	}
}

// TestSetPrefixes: a new delegation moves the LAN prefix and the box's
// global address, keeping the link-local ones; the old prefix's hosts are
// no longer routed.
func TestSetPrefixes(t *testing.T) {
	e := resolved(t, "")
	np := netip.MustParsePrefix("2001:db8:2::/64")
	if err := e.r.SetPrefixes([]netip.Prefix{np}, []netip.Prefix{netip.MustParsePrefix("2001:db8:2::/56")},
		[]netip.Addr{netip.MustParseAddr("2001:db8:2::1")}); err != nil {
		t.Fatal(err)
	}
	c := e.r.Config()
	if len(c.LAN.Addrs) != 2 || c.LAN.Addrs[0].As16() != lanLL || c.LAN.Addrs[1] != netip.MustParseAddr("2001:db8:2::1") || len(c.WAN.Addrs) != 1 {
		t.Errorf("addresses LAN %v WAN %v, want the link-local ones and 2001:db8:2::1", c.LAN.Addrs, c.WAN.Addrs)
	}
	if res := e.handle(lanPort, fromLAN(udp(host, server, 1, 2))); res.Action != routing.Drop || res.Reason != ReasonMartian {
		t.Errorf("from the old prefix: %v/%v, want martian", res.Action, res.Reason)
	}
	newHost := a6("2001:db8:2::10")
	e.r.neigh.learn(LAN, &newHost, hostMAC, learnConfirm, uint32(e.now/1e9), e.now)
	if res := e.handle(lanPort, fromLAN(udp(newHost, server, 1, 2))); res.Action != routing.Forward {
		t.Errorf("from the new prefix: %v/%v, want forwarded", res.Action, res.Reason)
	}
	if err := e.r.SetPrefixes([]netip.Prefix{netip.MustParsePrefix("2001:db8:2::/48")}, nil, nil); err == nil {
		t.Error("a /48 LAN prefix was accepted")
	}
}
