package route6

import (
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// The WAN of a point-to-point link (a PPPoE session): the link-locals
// IPv6CP negotiated and the AC's MAC.
var (
	pppLL    = a6("fe80::1c3f:2a4b:5c6d:7e8f")
	pppPeer  = a6("fe80::a1b2:c3d4:e5f6:1")
	pppACMAC = [6]byte{0x02, 0, 0, 0, 0xac, 1}
)

func ptpConfig(up bool) Config {
	cfg := testConfig()
	cfg.WANPointToPoint, cfg.WANPeerMAC = true, pppACMAC
	cfg.WAN.Addrs = []netip.Addr{netip.AddrFrom16(pppLL)}
	cfg.WAN.MTU = 1492
	cfg.Gateway = netip.Addr{}
	if up {
		cfg.Gateway = netip.AddrFrom16(pppPeer)
	}
	return cfg
}

func newPtPEnv(t *testing.T, up bool) *env {
	t.Helper()
	r, err := New(ptpConfig(up), Limits{MaxConns: 1024, Neighbours: 64, Pending: 8})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, r: r, w: r.NewWorker(nil), now: 1_000_000 * 1e9}
	e.settle()
	return e
}

// fromAC is a frame from the point-to-point WAN's peer as the dataplane
// hands it over (the session's MACs).
func fromAC(ip []byte) []byte { return eth(wanMAC, pppACMAC, ip) }

// TestPointToPoint: on a point-to-point WAN the default route is the link
// while the peer is set (no NS, no RA, frames to the peer's MAC), none
// while it is not (an RA does not make one), the negotiated link-local
// address is the box's, and the fast path gets the peer's MAC.
func TestPointToPoint(t *testing.T) {
	bigLAN := make([]byte, 1500-frame.IPv6HeaderLen-8-5)
	for _, tc := range []struct {
		name     string
		up       bool
		ra       bool // an RA with a router lifetime came first
		port     int
		pkt      []byte
		action   routing.Action
		reason   Reason
		outPort  int
		dstMAC   [6]byte
		icmpType uint8 // of a reply
	}{
		{name: "LAN to WAN, link up", up: true, port: lanPort, pkt: fromLAN(udp(host, server, 1, 2)),
			action: routing.Forward, outPort: wanPort, dstMAC: pppACMAC},
		{name: "LAN to WAN, link up, after an RA", up: true, ra: true, port: lanPort, pkt: fromLAN(udp(host, server, 1, 2)),
			action: routing.Forward, outPort: wanPort, dstMAC: pppACMAC},
		{name: "LAN to WAN, link down", port: lanPort, pkt: fromLAN(udp(host, server, 1, 2)),
			action: routing.Reply, reason: ReasonNoRoute, outPort: lanPort, dstMAC: hostMAC, icmpType: frame.ICMPv6DestUnreach},
		{name: "LAN to WAN, link down, after an RA", ra: true, port: lanPort, pkt: fromLAN(udp(host, server, 1, 2)),
			action: routing.Reply, reason: ReasonNoRoute, outPort: lanPort, dstMAC: hostMAC, icmpType: frame.ICMPv6DestUnreach},
		{name: "over the session MTU", up: true, port: lanPort,
			pkt:    fromLAN(frameIPv6UDP(host, server, bigLAN)),
			action: routing.Reply, reason: ReasonTooBig, outPort: lanPort, dstMAC: hostMAC, icmpType: frame.ICMPv6PacketTooBig},
		{name: "echo to the negotiated link-local", up: true, port: wanPort,
			pkt:    fromAC(icmp(pppPeer, pppLL, 64, frame.ICMPv6EchoRequest, 0, 0x00070001, []byte("ping"))),
			action: routing.Reply, outPort: wanPort, dstMAC: pppACMAC, icmpType: frame.ICMPv6EchoReply},
		{name: "DHCPv6 to the negotiated link-local", up: true, port: wanPort,
			pkt:    fromAC(udp(pppPeer, pppLL, 547, 546)),
			action: routing.ToHost, outPort: wanPort},
		{name: "echo to the MAC's link-local", up: true, port: wanPort,
			pkt:    fromAC(icmp(pppPeer, wanLL, 64, frame.ICMPv6EchoRequest, 0, 0x00070001, []byte("ping"))),
			action: routing.Drop, reason: ReasonLinkLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPtPEnv(t, tc.up)
			if tc.ra {
				ra := icmp(pppPeer, a6("ff02::1"), 255, icmpRA, 0, 64<<24|1800, make([]byte, 8))
				if res := e.handle(wanPort, fromAC(ra)); res.Action != routing.ToHost {
					t.Fatalf("RA: %v/%v, want it passed to the host", res.Action, res.Reason)
				}
			}
			res := e.handle(tc.port, tc.pkt)
			if res.Action != tc.action || res.Reason != tc.reason {
				t.Fatalf("%v/%v, want %v/%v", res.Action, res.Reason, tc.action, tc.reason)
			}
			if res.Port != tc.outPort {
				t.Errorf("port %d, want %d", res.Port, tc.outPort)
			}
			if tc.dstMAC != ([6]byte{}) && [6]byte(res.Frame[0:6]) != tc.dstMAC {
				t.Errorf("destination MAC %x, want %x", res.Frame[0:6], tc.dstMAC)
			}
			if tc.icmpType != 0 {
				if f := parse(t, res.Frame); f.ICMP.Type != tc.icmpType {
					t.Errorf("ICMPv6 type %d, want %d", f.ICMP.Type, tc.icmpType)
				}
			}
			if out := e.outputs(); len(out) != 0 {
				t.Errorf("%d frames sent besides (an NS?), want none: %x", len(out), out[0].b)
			}
			if n := e.r.Neighbours(e.now); len(n) != 0 {
				t.Errorf("neighbours %+v, want none on a point-to-point WAN", n)
			}
			gw, ok := e.r.Gateway(e.now)
			if ok != tc.up || tc.up && gw.As16() != pppPeer {
				t.Errorf("Gateway() = %v, %v; want the peer while up, none while down", gw, ok)
			}
		})
	}
}

// frameIPv6UDP is a UDP packet with payload.
func frameIPv6UDP(src, dst [16]byte, payload []byte) []byte {
	return frametest.IPv6{Src: src, Dst: dst}.UDPPacket(1, 2, payload)
}

// TestPointToPointConfig: the peer MAC belongs to a point-to-point WAN
// and is unicast.
func TestPointToPointConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"point-to-point", func(*Config) {}, true},
		{"down, no peer MAC yet", func(c *Config) { c.WANPeerMAC = [6]byte{} }, true},
		{"peer MAC without point-to-point", func(c *Config) { c.WANPointToPoint = false }, false},
		{"multicast peer MAC", func(c *Config) { c.WANPeerMAC[0] |= 1 }, false},
	} {
		cfg := ptpConfig(true)
		tc.mod(&cfg)
		if _, err := New(cfg, Limits{}); (err == nil) != tc.ok {
			t.Errorf("%s: New: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestPointToPointOffload: the fast path forwards to the peer's MAC and
// finds it fresh without any neighbour entry; forwarding allocates
// nothing.
func TestPointToPointOffload(t *testing.T) {
	e := newPtPEnv(t, true)
	out := fromLAN(udp(host, server, 1000, 53))
	if res := e.handle(lanPort, out); res.Action != routing.Forward {
		t.Fatalf("out: %v/%v", res.Action, res.Reason)
	}
	if res := e.handle(wanPort, fromAC(udp(server, host, 53, 1000))); res.Action != routing.Queued && res.Action != routing.Forward {
		t.Fatalf("reply: %v/%v", res.Action, res.Reason)
	}
	e.resolve(lanPort, host, hostMAC)
	o, ok := e.r.Offloadable(Flow{Side: LAN, Src: host, Dst: server, SrcPort: 1000, DstPort: 53, Proto: frame.ProtoUDP}, e.now)
	if !ok || o.NextHopMAC != pppACMAC || o.NextHop != pppPeer || o.OutMTU != 1492 {
		t.Errorf("Offloadable = %+v, %v; want to the peer %x at %x, MTU 1492", o, ok, pppPeer, pppACMAC)
	}
	if !e.r.NeighbourFresh(WAN, pppPeer, pppACMAC, e.now) || e.r.NeighbourFresh(WAN, pppPeer, gwMAC, e.now) {
		t.Error("NeighbourFresh: want the peer's MAC fresh, another not")
	}
	var f frame.Frame
	pkt := append([]byte(nil), out...)
	n := testing.AllocsPerRun(200, func() {
		copy(pkt, out)
		if err := frame.Parse(pkt, &f); err != nil {
			t.Fatal(err)
		}
		e.w.Process(e.now, lanPort, pkt, &f)
	})
	if n != 0 {
		t.Errorf("%v allocations per packet to the point-to-point WAN, want 0", n)
	}
}

// TestRenumberFlush: on a point-to-point WAN a new delegation that drops
// a prefix flushes the connections of LAN addresses in it; one that keeps
// it, or none (the client stopped), keeps them; so does any on another
// WAN.
func TestRenumberFlush(t *testing.T) {
	oldLAN, oldDeleg := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:1::/56")
	newLAN, newDeleg := netip.MustParsePrefix("2001:db8:2::/64"), netip.MustParsePrefix("2001:db8:2::/56")
	for _, tc := range []struct {
		name      string
		ethernet  bool
		lan       []netip.Prefix
		delegated []netip.Prefix
		want      int // connections left of the one
	}{
		{"renumbered", false, []netip.Prefix{newLAN, oldLAN}, []netip.Prefix{newDeleg}, 0},
		{"the same delegation", false, []netip.Prefix{oldLAN}, []netip.Prefix{oldDeleg}, 1},
		{"another prefix besides", false, []netip.Prefix{oldLAN}, []netip.Prefix{oldDeleg, newDeleg}, 1},
		{"no delegation", false, nil, nil, 1},
		{"renumbered on an Ethernet WAN", true, []netip.Prefix{newLAN, oldLAN}, []netip.Prefix{newDeleg}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPtPEnv(t, true)
			if tc.ethernet {
				e = newEnv(t, "")
			}
			// Forwarded, or on the Ethernet WAN queued for the gateway.
			if res := e.handle(lanPort, fromLAN(udp(host, server, 1000, 53))); res.Action != routing.Forward && res.Action != routing.Queued {
				t.Fatalf("out: %v/%v", res.Action, res.Reason)
			}
			if n := e.r.ConnCount(e.now); n != 1 {
				t.Fatalf("%d connections, want 1", n)
			}
			if err := e.r.SetPrefixes(tc.lan, tc.delegated, nil); err != nil {
				t.Fatal(err)
			}
			if n := e.r.ConnCount(e.now); n != tc.want {
				t.Errorf("%d connections after SetPrefixes(%v, %v), want %d", n, tc.lan, tc.delegated, tc.want)
			}
		})
	}
}
