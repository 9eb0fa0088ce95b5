package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

var (
	lanHost6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x42, 14: 0x10, 15: 0x0a}
	server6  = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x43, 15: 1}
)

func v6Frame(ip []byte) []byte {
	return frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv6, ip)
}

func r6UDP(mod func(*frametest.IPv6), payload int) []byte {
	h := frametest.IPv6{Src: lanHost6, Dst: server6, HopLimit: 64}
	if mod != nil {
		mod(&h)
	}
	return v6Frame(h.UDPPacket(40000, 53, make([]byte, payload)))
}

func r6TCP(flags uint8) []byte {
	h := frametest.IPv6{Src: lanHost6, Dst: server6, HopLimit: 64}
	return v6Frame(h.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: 1000, Ack: 2000, Flags: flags, Window: 512}, nil))
}

func r6Echo(typ uint8, mod func(*frametest.IPv6)) []byte {
	h := frametest.IPv6{Src: lanHost6, Dst: server6, HopLimit: 64}
	if mod != nil {
		mod(&h)
	}
	return v6Frame(h.ICMPPacket(typ, 0, 0x4242_0001, make([]byte, 16)))
}

func r6Flow() IPv6Flow {
	return IPv6Flow{DstMAC: gwMAC, SrcMAC: routerWAN, InDstMAC: routerLAN, InSrcMAC: hostMAC, CheckSrcMAC: true,
		OutIfindex: 3, Slot: 6, MaxFrame: 1514, MaxIP: 1500, ICMPType: frame.ICMPv6EchoRequest}
}

// r6Slow is what route6 does to a frame of an established connection
// (package frame's helpers): the hop limit, then the next hop's and the
// router's MACs.
func r6Slow(t testing.TB, b []byte, fl IPv6Flow) []byte {
	t.Helper()
	b = bytes.Clone(b)
	var f frame.Frame
	if err := frame.Parse(b, &f); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if !frame.DecTTL(b, &f) {
		t.Fatal("DecTTL refused the frame")
	}
	copy(b[0:6], fl.DstMAC[:])
	copy(b[6:12], fl.SrcMAC[:])
	return b[:f.L3End]
}

// TestPunts6 checks that the routed IPv6 frames the slow path must see
// are left to it, each counted under its reason, and that the frames of
// installed flows are forwarded as route6 would forward them.
func TestPunts6(t *testing.T) {
	udpKey := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	tcpKey := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	echoKey := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 0x4242, Proto: frame.ProtoICMPv6}
	setMAC := func(b []byte, at int, m [6]byte) []byte { copy(b[at:], m[:]); return b }
	linkLocal := [16]byte{0xfe, 0x80, 15: 1}
	dstOpts := func() []byte {
		h := frametest.IPv6{Src: lanHost6, Dst: server6, HopLimit: 64, NextHeader: frametest.ProtoDestOpts}
		return v6Frame(h.Build(slices.Concat(frametest.Ext6(frame.ProtoUDP, nil), h.UDP(40000, 53, make([]byte, 8)))))
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		flow  func(*IPv6Flow)
		want  Punt // -1: forwarded
	}{
		{"udp", r6UDP(nil, 10), nil, -1},
		{"tcp ack", r6TCP(frame.TCPAck), nil, -1},
		{"tcp psh ack cwr", r6TCP(frame.TCPAck | frame.TCPPsh | frame.TCPCwr), nil, -1},
		{"echo request", r6Echo(frame.ICMPv6EchoRequest, nil), nil, -1},
		{"tcp syn", r6TCP(frame.TCPSyn), nil, PuntTCP},
		{"tcp fin ack", r6TCP(frame.TCPFin | frame.TCPAck), nil, PuntTCP},
		{"tcp rst", r6TCP(frame.TCPRst), nil, PuntTCP},
		{"hop limit 1", r6UDP(func(h *frametest.IPv6) { h.HopLimit = 1 }, 10), nil, PuntTTL},
		{"hop limit 0", r6UDP(func(h *frametest.IPv6) { h.ZeroHopLimit = true }, 10), nil, PuntTTL},
		{"hop limit 2", r6UDP(func(h *frametest.IPv6) { h.HopLimit = 2 }, 10), nil, -1},
		{"destination options", dstOpts(), nil, PuntExtHeader},
		{"echo reply on a request flow", r6Echo(frame.ICMPv6EchoReply, nil), nil, PuntMiss},
		{"echo of the wrong type", r6Echo(frame.ICMPv6EchoRequest, nil), func(f *IPv6Flow) { f.ICMPType = frame.ICMPv6EchoReply }, PuntICMP},
		{"icmpv6 error", v6Frame(frametest.IPv6{Src: lanHost6, Dst: server6}.ICMPPacket(frame.ICMPv6DestUnreach, 0, 0, make([]byte, 48))), nil, PuntICMP},
		{"link-local source", r6UDP(func(h *frametest.IPv6) { h.Src = linkLocal }, 10), nil, PuntScope},
		{"multicast destination", r6UDP(func(h *frametest.IPv6) { h.Dst = [16]byte{0xff, 0x0e, 15: 1} }, 10), nil, PuntScope},
		{"payload length past the frame", r6UDP(func(h *frametest.IPv6) { h.PayloadLen = 200 }, 10), nil, PuntIP},
		{"padded frame", append(r6UDP(nil, 10), 0, 0, 0, 0), nil, PuntIP},
		{"bad version", r6UDP(func(h *frametest.IPv6) { h.Version = 4 }, 10), nil, PuntMiss},
		{"too big for the egress", r6UDP(nil, 100), func(f *IPv6Flow) { f.MaxIP = 147 }, PuntMTU},
		{"at the egress MTU", r6UDP(nil, 100), func(f *IPv6Flow) { f.MaxIP = 148 }, -1},
		{"too big for the ingress", r6UDP(nil, 100), func(f *IPv6Flow) { f.MaxFrame = 161 }, PuntMTU},
		{"not the router's MAC", setMAC(r6UDP(nil, 10), 0, [6]byte{2, 1, 2, 3, 4, 5}), nil, PuntMAC},
		{"another source MAC", setMAC(r6UDP(nil, 10), 6, [6]byte{2, 1, 2, 3, 4, 5}), nil, PuntMAC},
		{"another source MAC, unchecked", setMAC(r6UDP(nil, 10), 6, [6]byte{2, 1, 2, 3, 4, 5}), func(f *IPv6Flow) { f.CheckSrcMAC = false }, -1},
		{"other flow", r6UDP(func(h *frametest.IPv6) { h.Dst[15] = 9 }, 10), nil, PuntMiss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []Mode{ModeTCX, ModeXDP} {
				p := load(t, mode)
				fl := r6Flow()
				if tc.flow != nil {
					tc.flow(&fl)
				}
				for _, k := range []IPv6Key{udpKey, tcpKey, echoKey} {
					if err := p.PutIPv6(k, fl); err != nil {
						t.Fatal(err)
					}
				}
				prog, redirect, slow := p.progs.TCX, uint32(retRedirect), uint32(retTCXNext)
				if mode == ModeXDP {
					prog, redirect, slow = p.progs.XDP, retXDPRedir, retXDPPass
				}
				ret, out := run(t, prog, tc.frame)
				punts, err := p.Punts()
				if err != nil {
					t.Fatal(err)
				}
				if tc.want < 0 {
					if ret != redirect {
						t.Fatalf("%s: returned %d, want a redirect; punts %v", mode, int32(ret), punts)
					}
					if diff := cmp.Diff(r6Slow(t, tc.frame, fl), out); diff != "" {
						t.Errorf("%s: forwarded frame (-route6 +fast path):\n%s", mode, diff)
					}
					continue
				}
				if ret != slow {
					t.Fatalf("%s: returned %d, want the slow path", mode, int32(ret))
				}
				if !bytes.Equal(out, tc.frame) {
					t.Errorf("%s: a punted frame was changed:\nin  % x\nout % x", mode, tc.frame, out)
				}
				want := [NumPunts]uint64{}
				want[tc.want] = 1
				if punts != want {
					t.Errorf("%s: punts %v, want one %s", mode, punts, tc.want)
				}
			}
		})
	}
}

// TestIPv6Bridged checks that IPv6 frames of no routed flow still go to
// a bridged pair: link-local traffic, other next headers.
func TestIPv6Bridged(t *testing.T) {
	a, b := [6]byte{2, 0, 0, 0, 0, 0xa}, [6]byte{2, 0, 0, 0, 0, 0xb}
	ll := frametest.IPv6{Src: [16]byte{0xfe, 0x80, 15: 1}, Dst: [16]byte{0xfe, 0x80, 15: 2}}
	gre := frametest.IPv6{Src: lanHost6, Dst: server6, NextHeader: 47}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"link-local udp", frametest.Frame(b, a, frame.EtherTypeIPv6, ll.UDPPacket(1, 2, []byte("x")))},
		{"gre", frametest.Frame(b, a, frame.EtherTypeIPv6, gre.Build(make([]byte, 24)))},
		{"ndp", frametest.Frame(b, a, frame.EtherTypeIPv6, ll.ICMPPacket(135, 0, 0, make([]byte, 16)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, ModeTCX)
			if err := p.PutPair(PairKey{Ifindex: 1, Dst: b, Src: a}, Pair{OutIfindex: 4, Slot: 9, MaxWire: 1514, L2Only: true}); err != nil {
				t.Fatal(err)
			}
			ret, out := run(t, p.progs.TCX, tc.frame)
			if ret != retRedirect || !bytes.Equal(out, tc.frame) {
				punts, _ := p.Punts()
				t.Errorf("returned %d (punts %v), want the pair's redirect of the frame as it is", int32(ret), punts)
			}
		})
	}
}

// randomR6 makes a routed IPv6 flow and a frame of it: random addresses,
// ports, hop limit, traffic class, flow label and payload.
func randomR6(r *rand.Rand, i int) (IPv6Key, IPv6Flow, []byte) {
	addr := func() [16]byte {
		var a [16]byte
		binary.BigEndian.PutUint64(a[:], 0x2000_0000_0000_0000|r.Uint64()>>4)
		binary.BigEndian.PutUint64(a[8:], r.Uint64())
		return a
	}
	h := frametest.IPv6{Src: addr(), Dst: addr(), HopLimit: uint8(2 + r.IntN(254)), TrafficClass: uint8(r.Uint32()), FlowLabel: r.Uint32()}
	payload := make([]byte, r.IntN(200))
	for j := range payload {
		payload[j] = byte(r.Uint32())
	}
	k := IPv6Key{Ifindex: 1, Src: h.Src, Dst: h.Dst}
	fl := r6Flow()
	fl.Slot = uint32(i % 64)
	fl.CheckSrcMAC = r.IntN(2) == 0
	var pkt []byte
	switch r.IntN(3) {
	case 0:
		k.Proto, k.SrcPort, k.DstPort = frame.ProtoTCP, uint16(r.Uint32()), uint16(r.Uint32())
		flags := []uint8{frame.TCPAck, frame.TCPAck | frame.TCPPsh, frame.TCPAck | frame.TCPEce, frame.TCPAck | frame.TCPUrg}[r.IntN(4)]
		pkt = h.TCPPacket(frametest.TCP{SrcPort: k.SrcPort, DstPort: k.DstPort, Seq: r.Uint32(), Ack: r.Uint32(), Flags: flags, Window: uint16(r.Uint32())}, payload)
	case 1:
		k.Proto, k.SrcPort, k.DstPort = frame.ProtoUDP, uint16(r.Uint32()), uint16(r.Uint32())
		pkt = h.UDPPacket(k.SrcPort, k.DstPort, payload)
	default:
		k.Proto = frame.ProtoICMPv6
		id := uint16(r.Uint32())
		fl.ICMPType = frame.ICMPv6EchoRequest
		k.SrcPort = id
		if r.IntN(2) == 0 {
			fl.ICMPType = frame.ICMPv6EchoReply
			k.SrcPort, k.DstPort = 0, id
		}
		pkt = h.ICMPPacket(fl.ICMPType, 0, uint32(id)<<16|r.Uint32()&0xffff, payload)
	}
	return k, fl, v6Frame(pkt)
}

// TestRewriteMatchesRoute6 runs the tcx and the XDP program on frames of
// installed routed IPv6 flows and compares what they leave with what
// route6's forwarding (package frame's DecTTL and the MACs) makes of the
// same frames, byte for byte.
func TestRewriteMatchesRoute6(t *testing.T) {
	for _, mode := range []Mode{ModeTCX, ModeXDP} {
		t.Run(string(mode), func(t *testing.T) {
			p := load(t, mode)
			prog, redirect := p.progs.TCX, uint32(retRedirect)
			if mode == ModeXDP {
				prog, redirect = p.progs.XDP, retXDPRedir
			}
			r := rand.New(rand.NewPCG(26, uint64(len(mode))))
			for i := range 2000 {
				k, fl, fr := randomR6(r, i)
				if err := p.PutIPv6(k, fl); err != nil {
					t.Fatal(err)
				}
				ret, got := run(t, prog, fr)
				if err := p.DeleteIPv6(k); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("frame %d proto %d", i, k.Proto)
				if ret != redirect {
					punts, _ := p.Punts()
					t.Fatalf("%s: returned %d, want redirect %d (punts %v)\nframe % x", name, ret, redirect, punts, fr)
				}
				if want := r6Slow(t, fr, fl); !bytes.Equal(got, want) {
					t.Fatalf("%s: rewrite differs\nframe % x\nslow  % x\nfast  % x", name, fr, want, got)
				}
			}
		})
	}
}

// TestStats6 checks a routed IPv6 flow's counters.
func TestStats6(t *testing.T) {
	p := load(t, ModeTCX)
	k := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	fl := r6Flow()
	if err := p.ResetStats(fl.Slot); err != nil {
		t.Fatal(err)
	}
	if err := p.PutIPv6(k, fl); err != nil {
		t.Fatal(err)
	}
	fr := r6UDP(nil, 30)
	for range 4 {
		if ret, _ := run(t, p.progs.TCX, fr); ret != retRedirect {
			t.Fatalf("returned %d", int32(ret))
		}
	}
	st := make([]Stats, p.Slots())
	if err := p.NewStatsReader().Read(st); err != nil {
		t.Fatal(err)
	}
	got := st[fl.Slot]
	got.Last = min(got.Last, 1)
	if diff := cmp.Diff(Stats{Packets: 4, Bytes: 4 * uint64(len(fr)), L3Bytes: 4 * 78, Last: 1}, got); diff != "" {
		t.Errorf("slot %d (-want +got):\n%s", fl.Slot, diff)
	}
	if err := p.DeleteIPv6(k); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, p.progs.TCX, fr); ret != retTCXNext {
		t.Errorf("after DeleteIPv6 returned %d, want the slow path", int32(ret))
	}
}
