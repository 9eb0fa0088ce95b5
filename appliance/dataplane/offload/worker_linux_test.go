package offload

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

var (
	hostMAC = [6]byte{0x02, 0, 0, 0, 0, 0xa}
	boxMAC  = [6]byte{0x02, 0, 0, 0, 0, 0xb}
	lan4    = [4]byte{10, 0, 0, 1}
	far4    = [4]byte{198, 51, 100, 9}
	lan6    = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	far6    = [16]byte{0x20, 0x01, 0x0d, 0xb9, 15: 9}
)

// TestBefore: a routed frame's flow is keyed as the routers key it, by
// the same rules for IPv4 (nat.Tuple) and IPv6 (route6.Flow): TCP and UDP
// ports, an echo's identifier as a request's source or a reply's
// destination port, the side it arrived on; and no flow for what the
// fast path leaves to the routers.
func TestBefore(t *testing.T) {
	v4 := frametest.IPv4{Src: lan4, Dst: far4, TTL: 64}
	v6 := frametest.IPv6{Src: lan6, Dst: far6, HopLimit: 64}
	frag, opts := v4, v4
	frag.MF = true
	opts.Opts = []byte{1, 1, 1, 0}
	ack := frametest.TCP{SrcPort: 40000, DstPort: 443, Flags: frame.TCPAck, Seq: 1, Ack: 1}
	syn := frametest.TCP{SrcPort: 40000, DstPort: 443, Flags: frame.TCPSyn, Seq: 1}
	ext := v6
	ext.NextHeader = 60 // destination options
	type want struct {
		ok, v6 bool
		tuple  nat.Tuple
		flow6  route6.Flow
		icmp   uint8
	}
	for _, tc := range []struct {
		name string
		et   uint16
		ip   []byte
		wan  bool
		want want
	}{
		{"tcp", frame.EtherTypeIPv4, v4.TCPPacket(ack, nil), false, want{ok: true,
			tuple: nat.Tuple{Side: nat.LAN, Src: lan4, Dst: far4, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}}},
		{"udp from the wan", frame.EtherTypeIPv4, v4.UDPPacket(53, 5353, nil), true, want{ok: true,
			tuple: nat.Tuple{Side: nat.WAN, Src: lan4, Dst: far4, SrcPort: 53, DstPort: 5353, Proto: frame.ProtoUDP}}},
		{"echo request", frame.EtherTypeIPv4, v4.ICMPPacket(frame.ICMPEchoRequest, 0, 0x00420001, nil), false, want{ok: true,
			tuple: nat.Tuple{Side: nat.LAN, Src: lan4, Dst: far4, SrcPort: 0x42, Proto: frame.ProtoICMP}, icmp: frame.ICMPEchoRequest}},
		{"echo reply", frame.EtherTypeIPv4, v4.ICMPPacket(frame.ICMPEchoReply, 0, 0x00420001, nil), true, want{ok: true,
			tuple: nat.Tuple{Side: nat.WAN, Src: lan4, Dst: far4, DstPort: 0x42, Proto: frame.ProtoICMP}, icmp: frame.ICMPEchoReply}},
		{"tcp syn", frame.EtherTypeIPv4, v4.TCPPacket(syn, nil), false, want{}},
		{"icmp error", frame.EtherTypeIPv4, v4.ICMPPacket(3, 3, 0, nil), false, want{}},
		{"fragment", frame.EtherTypeIPv4, frag.UDPPacket(53, 5353, make([]byte, 16)), false, want{}},
		{"ip options", frame.EtherTypeIPv4, opts.UDPPacket(53, 5353, nil), false, want{}},
		{"tcp6", frame.EtherTypeIPv6, v6.TCPPacket(ack, nil), false, want{ok: true, v6: true,
			flow6: route6.Flow{Side: route6.LAN, Src: lan6, Dst: far6, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}}},
		{"udp6 from the wan", frame.EtherTypeIPv6, v6.UDPPacket(53, 5353, nil), true, want{ok: true, v6: true,
			flow6: route6.Flow{Side: route6.WAN, Src: lan6, Dst: far6, SrcPort: 53, DstPort: 5353, Proto: frame.ProtoUDP}}},
		{"echo6 request", frame.EtherTypeIPv6, v6.ICMPPacket(frame.ICMPv6EchoRequest, 0, 0x00420001, nil), false, want{ok: true, v6: true,
			flow6: route6.Flow{Side: route6.LAN, Src: lan6, Dst: far6, SrcPort: 0x42, Proto: frame.ProtoICMPv6}, icmp: frame.ICMPv6EchoRequest}},
		{"echo6 reply", frame.EtherTypeIPv6, v6.ICMPPacket(frame.ICMPv6EchoReply, 0, 0x00420001, nil), false, want{ok: true, v6: true,
			flow6: route6.Flow{Side: route6.LAN, Src: lan6, Dst: far6, DstPort: 0x42, Proto: frame.ProtoICMPv6}, icmp: frame.ICMPv6EchoReply}},
		{"tcp6 syn", frame.EtherTypeIPv6, v6.TCPPacket(syn, nil), false, want{}},
		{"icmp6 error", frame.EtherTypeIPv6, v6.ICMPPacket(1, 4, 0, nil), false, want{}},
		{"extension header", frame.EtherTypeIPv6, ext.Build(append(frametest.Ext6(frame.ProtoUDP, nil), v6.UDP(53, 5353, nil)...)), false, want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f frame.Frame
			if err := frame.Parse(frametest.Frame(boxMAC, hostMAC, tc.et, tc.ip), &f); err != nil {
				t.Fatal(err)
			}
			w := &Worker{m: &Manager{}}
			var p Pre
			w.Before(&f, tc.wan, &p)
			got := want{ok: p.OK(), v6: p.IPv6(), tuple: p.tuple, flow6: p.flow6, icmp: p.icmp}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Before (-want +got):\n%s", diff)
			}
			if p.OK() && p.srcMAC != hostMAC {
				t.Errorf("source MAC %x, want %x", p.srcMAC, hostMAC)
			}
		})
	}
}

// TestBeforeZeroAllocs: taking a routed frame's flow allocates nothing.
func TestBeforeZeroAllocs(t *testing.T) {
	v4 := frametest.IPv4{Src: lan4, Dst: far4, TTL: 64}
	var f frame.Frame
	if err := frame.Parse(frametest.Frame(boxMAC, hostMAC, frame.EtherTypeIPv4, v4.UDPPacket(53, 5353, nil)), &f); err != nil {
		t.Fatal(err)
	}
	w := &Worker{m: &Manager{}}
	var p Pre
	if n := testing.AllocsPerRun(100, func() { w.Before(&f, false, &p) }); n != 0 {
		t.Errorf("Before allocates %v times", n)
	}
}

// BenchmarkWorker is a worker's part of the fast path per frame of a flow
// it offered already (the offer deduplicated within Reoffer): a routed
// frame's flow before the router (Before) and its offer after it
// (OfferRoute), and a bridged frame's offer (OfferPair).
func BenchmarkWorker(b *testing.B) {
	v4 := frametest.IPv4{Src: lan4, Dst: far4, TTL: 64}
	var f frame.Frame
	if err := frame.Parse(frametest.Frame(boxMAC, hostMAC, frame.EtherTypeIPv4, v4.UDPPacket(53, 5353, nil)), &f); err != nil {
		b.Fatal(err)
	}
	w := &Worker{m: &Manager{offers: make(chan offer, queueDepth)}}
	path := Path{In: 1, Out: 2}
	b.Run("route", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			var p Pre
			w.Before(&f, false, &p)
			w.OfferRoute(&p, path, hostMAC, int64(i))
		}
	})
	b.Run("pair", func(b *testing.B) {
		b.ReportAllocs()
		rk := rules.Key{Proto: rules.ProtoUDP, SrcPort: 53, DstPort: 5353}
		for i := range b.N {
			w.OfferPair(&f, &rk, path, fastpath.EgressAsIs, false, frame.VLANTag{}, int64(i))
		}
	})
}
