package dataplane

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/services/pppoe"
)

// TestRoute6PPPoE: a PPPoE WAN makes the IPv6 router's WAN a
// point-to-point link: without a session (or IPv6CP) no route and the
// MAC's link-local address, with one IPv6CP's link-locals, the AC as the
// frames' destination and the session's MTU.
func TestRoute6PPPoE(t *testing.T) {
	p := natPorts{wanID: 1, lanID: 2, hostID: 3, wanMAC: [6]byte{2, 0, 0, 0, 0, 1}, lanMAC: [6]byte{2, 0, 0, 0, 0, 2}, wanMTU: 1500, lanMTU: 1500}
	local, peer := netip.MustParseAddr("fe80::1c:2d:3e:4f"), netip.MustParseAddr("fe80::a:b:c:d")
	macLL := LinkLocal(p.wanMAC)
	type want struct {
		PtP     bool
		PeerMAC [6]byte
		Gateway netip.Addr
		LL      netip.Addr
		MTU     int
	}
	for _, tc := range []struct {
		name string
		nat  NAT
		want want
	}{
		{"Ethernet WAN", NAT{IPv6Gateway: netip.MustParseAddr("fe80::1"), WANMTU: 1400},
			want{Gateway: netip.MustParseAddr("fe80::1"), LL: macLL, MTU: 1400}},
		{"PPPoE, no session", NAT{WANPPPoE: true, IPv6Gateway: netip.MustParseAddr("fe80::1")},
			want{PtP: true, LL: macLL, MTU: 1492}}, // the session header's 8 bytes off the port's
		{"PPPoE, IPv4 only", NAT{WANPPPoE: true, WANMTU: 1492, PPPoESession: PPPoESession{ID: 7, ACMAC: macAC}},
			want{PtP: true, LL: macLL, MTU: 1492}},
		{"PPPoE with IPv6CP", NAT{WANPPPoE: true, WANMTU: 1492,
			PPPoESession: PPPoESession{ID: 7, ACMAC: macAC, LocalLinkLocal: local, PeerLinkLocal: peer}},
			want{PtP: true, PeerMAC: macAC, Gateway: peer, LL: local, MTU: 1492}},
		{"PPPoE with IPv6CP, RFC 4638 on a 1500-byte port", NAT{WANPPPoE: true, WANMTU: 1500,
			PPPoESession: PPPoESession{ID: 8, ACMAC: macAC, LocalLinkLocal: local, PeerLinkLocal: peer}},
			want{PtP: true, PeerMAC: macAC, Gateway: peer, LL: local, MTU: 1492}},
		{"PPPoE with IPv6CP, RFC 4638", NAT{WANPPPoE: true, WANMTU: 1500,
			PPPoESession: PPPoESession{ID: 8, ACMAC: macAC, LocalLinkLocal: local, PeerLinkLocal: peer}},
			want{PtP: true, PeerMAC: macAC, Gateway: peer, LL: local, MTU: 1500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := p
			if strings.HasSuffix(tc.name, "RFC 4638") {
				p.wanMTU = 1508 // plane gives the port the session's MRU + 8
			}
			r, err := newRoute6(p, &NAT{})
			if err != nil {
				t.Fatal(err)
			}
			if err := setRoute6WAN(r, p, &tc.nat); err != nil {
				t.Fatal(err)
			}
			c := r.Config()
			got := want{PtP: c.WANPointToPoint, PeerMAC: c.WANPeerMAC, Gateway: c.Gateway, LL: c.WAN.Addrs[0], MTU: c.WAN.MTU}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("the IPv6 router's WAN (-want +got):\n%s", diff)
			}
			if gw, ok := r.Gateway(0); ok != tc.want.Gateway.IsValid() || ok && gw != tc.want.Gateway {
				t.Errorf("route: %v %v, want %v", gw, ok, tc.want.Gateway)
			}
			// Built with it at once: the same.
			r2, err := newRoute6(p, &tc.nat)
			if err != nil {
				t.Fatal(err)
			}
			if c2 := r2.Config(); c2.WANPointToPoint != c.WANPointToPoint || c2.Gateway != c.Gateway || c2.WAN.Addrs[0] != c.WAN.Addrs[0] {
				t.Errorf("built with the session: %+v, want %+v", c2.WAN, c.WAN)
			}
		})
	}
}

// TestPPPoESessionLinkLocals: IPv6CP's addresses come in pairs and are
// link-local.
func TestPPPoESessionLinkLocals(t *testing.T) {
	local, peer := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")
	for _, tc := range []struct {
		name string
		s    PPPoESession
		ok   bool
	}{
		{"none", PPPoESession{ID: 1, ACMAC: macAC}, true},
		{"both", PPPoESession{ID: 1, ACMAC: macAC, LocalLinkLocal: local, PeerLinkLocal: peer}, true},
		{"local only", PPPoESession{ID: 1, ACMAC: macAC, LocalLinkLocal: local}, false},
		{"global", PPPoESession{ID: 1, ACMAC: macAC, LocalLinkLocal: netip.MustParseAddr("2001:db8::1"), PeerLinkLocal: peer}, false},
		{"zoned", PPPoESession{ID: 1, ACMAC: macAC, LocalLinkLocal: local.WithZone("ppp0"), PeerLinkLocal: peer}, false},
	} {
		if err := tc.s.check(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestWANPPPoEDHCPv6: the session's DHCPv6 to the client port goes to the
// DHCPv6 client's queue decapsulated (the session's MACs, IPv6), not to
// the router or the PPPoE client; other IPv6, and other sessions', do not.
func TestWANPPPoEDHCPv6(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.resolve(t)
	q := tr.setPPPoE(PPPoESession{ID: testSID, ACMAC: macAC}, WANVLAN{})
	src, dst := netip.MustParseAddr("fe80::a:b:c:d").As16(), netip.MustParseAddr("fe80::1c:2d:3e:4f").As16()
	udp6 := func(sport, dport uint16) []byte {
		return frametest.Frame(rWAN, macAC, frame.EtherTypeIPv6, frametest.IPv6{Src: src, Dst: dst}.UDPPacket(sport, dport, []byte("reply")))
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		dhcp6  []byte // the frame the DHCPv6 client gets, if any
		client int    // frames for the PPPoE client
		drop   Drop
	}{
		{"DHCPv6 reply", sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv6, udp6(547, 546)), udp6(547, 546), 0, 0},
		{"another session's", sessionFrame(rWAN, macAC, testSID+1, pppoe.ProtoIPv6, udp6(547, 546)), nil, 0, DropPPPoE},
		{"another port", sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv6, udp6(547, 547)), nil, 0, 0},
		{"IPv6CP", sessionFrame(rWAN, macAC, testSID, 0x8057, append(make([]byte, 14), 1, 1, 0, 4)), nil, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.drops()
			out := tr.rx(idWAN, tc.data)
			if len(out[idWAN]) != 0 {
				t.Errorf("%d frames back to the WAN", len(out[idWAN]))
			}
			got := queued(q.dhcp6)
			switch {
			case tc.dhcp6 == nil && len(got) != 0:
				t.Errorf("the DHCPv6 client got %d frames, want none", len(got))
			case tc.dhcp6 != nil && (len(got) != 1 || !bytes.Equal(got[0], tc.dhcp6)):
				t.Errorf("the DHCPv6 client got %x, want %x", got, tc.dhcp6)
			}
			if n := len(queued(q)); n != tc.client {
				t.Errorf("%d frames for the PPPoE client, want %d", n, tc.client)
			}
			if tc.drop != 0 && tr.drops()[tc.drop] != before[tc.drop]+1 {
				t.Errorf("%v not counted", tc.drop)
			}
		})
	}
	t.Run("queue full", func(t *testing.T) {
		in := sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv6, udp6(547, 546))
		before := tr.drops()[DropPPPoEQueue]
		for range dhcp6QueueFrames + 3 {
			tr.rx(idWAN, append([]byte(nil), in...))
		}
		if got := len(queued(q.dhcp6)); got != dhcp6QueueFrames {
			t.Errorf("%d queued, want %d", got, dhcp6QueueFrames)
		}
		if got := tr.drops()[DropPPPoEQueue] - before; got != 3 {
			t.Errorf("%v: %d, want 3", DropPPPoEQueue, got)
		}
	})
}
