package fastpath

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// TestPPPoERewrite6 runs the tcx program on the frames of routed IPv6
// flows over a PPPoE WAN (PPP protocol 0x0057) and compares what it
// leaves with route6's frame byte for byte: to the WAN the rewrite in the
// session (the header pushed, to the AC), from it the session header
// taken off, then the rewrite. The socket filter decides as the tcx
// program does.
func TestPPPoERewrite6(t *testing.T) {
	p := load(t, ModeTCX)
	if err := p.SetPPPoE(testSession, acMAC); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(57, 8864))
	var out, in int
	for i := range 1000 {
		k, fl, fr := randomR6(r, i)
		fl.DstMAC, fl.PPPoESession = acMAC, testSession
		toWAN := i%2 == 0
		if toWAN {
			fl.PPPoEOut = true
		} else {
			// The same IP packet from the AC in the session, to the
			// router's WAN MAC; its flow goes to a LAN host.
			fl.PPPoEIn, fl.CheckSrcMAC = true, false
			fl.InDstMAC, fl.DstMAC, fl.SrcMAC = routerWAN, hostMAC, routerLAN
			copy(fr[0:6], routerWAN[:])
			copy(fr[6:12], acMAC[:])
		}
		if err := p.PutIPv6(k, fl); err != nil {
			t.Fatal(err)
		}
		var sent, want []byte
		if toWAN {
			sent, want = fr, pppoeFrame(r6Slow(t, fr, fl), testSession)
		} else {
			sent, want = pppoeFrame(fr, testSession), r6Slow(t, fr, fl)
		}
		ret, got := run(t, p.progs.TCX, sent)
		fret, _ := run(t, p.progs.Filter, asTapped(sent))
		if err := p.DeleteIPv6(k); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("frame %d proto %d (to the WAN: %v)", i, k.Proto, toWAN)
		if (fret == 0) != (ret == retRedirect) {
			t.Fatalf("%s: the filter returned %d (0: kept out of the rings), the tcx program %d\nframe % x", name, fret, ret, sent)
		}
		if ret != retRedirect {
			punts, _ := p.Punts()
			t.Fatalf("%s: program returned %d, want redirect (punts %v)\nframe % x", name, ret, punts, sent)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: frames differ\nsent  % x\nslow  % x\nfast  % x", name, sent, want, got)
		}
		if toWAN {
			out++
		} else {
			in++
		}
	}
	if out != 500 || in != 500 {
		t.Errorf("forwarded %d frames to the WAN and %d from it, want 500 each", out, in)
	}
}

// TestPPPoEPunts6 checks that a routed IPv6 flow's frames over a PPPoE
// WAN go to the slow path when they are not the session's, too big for
// the session's MTU or otherwise the slow path's, that a new session (or
// none) takes the old session's flows off the fast path at once, and
// that XDP leaves PPPoE to the rings.
func TestPPPoEPunts6(t *testing.T) {
	p := load(t, ModeTCX)
	px := load(t, ModeXDP)
	const sessionMTU = 1492
	inKey := IPv6Key{Ifindex: 1, Src: server6, Dst: lanHost6, SrcPort: 53, DstPort: 40000, Proto: frame.ProtoUDP}
	inFlow := IPv6Flow{DstMAC: hostMAC, SrcMAC: routerLAN, InDstMAC: routerWAN, OutIfindex: 3, Slot: 5, MaxFrame: 1514, MaxIP: 1500,
		PPPoEIn: true, PPPoESession: testSession}
	outKey := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	outFlow := r6Flow()
	outFlow.DstMAC, outFlow.MaxIP, outFlow.PPPoEOut, outFlow.PPPoESession = acMAC, sessionMTU, true, testSession
	for _, q := range []*Program{p, px} {
		if err := q.PutIPv6(inKey, inFlow); err != nil {
			t.Fatal(err)
		}
		if err := q.PutIPv6(outKey, outFlow); err != nil {
			t.Fatal(err)
		}
	}
	reply := func(payload int, mod func(h *frametest.IPv6), modFrame func(b []byte)) []byte {
		h := frametest.IPv6{Src: server6, Dst: lanHost6, HopLimit: 64}
		if mod != nil {
			mod(&h)
		}
		b := pppoeFrame(frametest.Frame(routerWAN, acMAC, frame.EtherTypeIPv6, h.UDPPacket(53, 40000, make([]byte, payload))), testSession)
		if modFrame != nil {
			modFrame(b)
		}
		return b
	}
	in := func(mod func(b []byte)) []byte { return reply(20, nil, mod) }
	// The largest IP packet the session takes, and one byte more.
	fits, big := r6UDP(nil, sessionMTU-48), r6UDP(nil, sessionMTU-47)
	for _, tc := range []struct {
		name    string
		session uint16 // SetPPPoE's
		ac      [6]byte
		frame   []byte
		want    Punt // -1: forwarded
	}{
		{"in session", testSession, acMAC, in(nil), -1},
		{"to the WAN in session", testSession, acMAC, r6UDP(nil, 10), -1},
		{"to the WAN at the session MTU", testSession, acMAC, fits, -1},
		{"to the WAN above the session MTU", testSession, acMAC, big, PuntMTU},
		{"another session", testSession, acMAC, in(func(b []byte) { b[17]++ }), PuntPPPoE},
		{"from another MAC", testSession, acMAC, in(func(b []byte) { b[11]++ }), PuntPPPoE},
		{"IPv6 as PPP IPv4", testSession, acMAC, in(func(b []byte) { b[21] = 0x21 }), PuntMiss},
		{"IPv6CP", testSession, acMAC, in(func(b []byte) { b[20], b[21] = 0x80, 0x57 }), PuntMiss},
		{"length short", testSession, acMAC, in(func(b []byte) { b[19]-- }), PuntMiss},
		{"padded", testSession, acMAC, append(in(nil), 0, 0), PuntMiss},
		{"hop limit 1", testSession, acMAC, reply(20, func(h *frametest.IPv6) { h.HopLimit = 1 }, nil), PuntTTL},
		{"link-local", testSession, acMAC, reply(20, func(h *frametest.IPv6) { h.Src = [16]byte{0: 0xfe, 1: 0x80, 15: 1} }, nil), PuntScope},
		{"outside the session", testSession, acMAC, unpppoe(in(nil)), PuntPPPoE},
		{"session changed", testSession + 1, acMAC, in(nil), PuntPPPoE},
		{"session changed, to the WAN", testSession + 1, acMAC, r6UDP(nil, 10), PuntPPPoE},
		{"session down", 0, [6]byte{}, in(nil), PuntPPPoE},
		{"session down, to the WAN", 0, [6]byte{}, r6UDP(nil, 10), PuntPPPoE},
		{"new AC", testSession, gwMAC, r6UDP(nil, 10), PuntPPPoE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, q := range []*Program{p, px} {
				if err := q.SetPPPoE(tc.session, tc.ac); err != nil {
					t.Fatal(err)
				}
			}
			checkPunt(t, p, tc.frame, tc.want)
			// XDP frames no PPPoE: every frame of these flows is
			// the rings'.
			if ret, _ := run(t, px.progs.XDP, tc.frame); ret != retXDPPass {
				t.Errorf("XDP returned %d, want XDP_PASS", ret)
			}
		})
	}
}

// BenchmarkPPPoE6 is BenchmarkPPPoE for routed IPv6 flows: a frame of an
// installed flow to and from a PPPoE WAN against the same flows on a
// plain WAN.
func BenchmarkPPPoE6(b *testing.B) {
	p := load(b, ModeTCX)
	if err := p.SetPPPoE(testSession, acMAC); err != nil {
		b.Fatal(err)
	}
	outKey := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	inKey := IPv6Key{Ifindex: 1, Src: server6, Dst: lanHost6, SrcPort: 53, DstPort: 40000, Proto: frame.ProtoUDP}
	inFlow := IPv6Flow{DstMAC: hostMAC, SrcMAC: routerLAN, InDstMAC: routerWAN, OutIfindex: 3, Slot: 6, MaxFrame: 1514, MaxIP: 1500}
	h := frametest.IPv6{Src: server6, Dst: lanHost6, HopLimit: 64}
	reply := frametest.Frame(routerWAN, acMAC, frame.EtherTypeIPv6, h.UDPPacket(53, 40000, make([]byte, 18)))
	for _, tc := range []struct {
		name  string
		ppp   bool
		in    bool
		frame []byte
	}{
		{"to the WAN", false, false, r6UDP(nil, 18)},
		{"to the WAN in PPPoE", true, false, r6UDP(nil, 18)},
		{"from the WAN", false, true, reply},
		{"from the WAN in PPPoE", true, true, pppoeFrame(reply, testSession)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var err error
			if tc.in {
				fl := inFlow
				fl.PPPoEIn, fl.PPPoESession = tc.ppp, testSession
				err = p.PutIPv6(inKey, fl)
			} else {
				fl := r6Flow()
				fl.PPPoEOut, fl.PPPoESession = tc.ppp, testSession
				if tc.ppp {
					fl.DstMAC = acMAC
				}
				err = p.PutIPv6(outKey, fl)
			}
			if err != nil {
				b.Fatal(err)
			}
			benchRedirect(b, p, tc.frame)
		})
	}
}
