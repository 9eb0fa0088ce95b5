package fastpath

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

var acMAC = [6]byte{0x02, 0xac, 0, 0, 0, 1}

const testSession = 0x2a17

// pppoeFrame is the untagged Ethernet frame b as a PPPoE session frame of
// session sid, as the slow path's pppoeEmit builds it: b's MACs, the
// session header with the length of b's IP bytes (padding included) and
// PPP protocol IPv4 or IPv6 (as b's EtherType), then those bytes.
func pppoeFrame(b []byte, sid uint16) []byte {
	proto := uint16(0x0021)
	if binary.BigEndian.Uint16(b[12:]) == frame.EtherTypeIPv6 {
		proto = 0x0057
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, b[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8864)
	out = append(out, 0x11, 0)
	out = binary.BigEndian.AppendUint16(out, sid)
	out = binary.BigEndian.AppendUint16(out, uint16(len(b)-14+2))
	out = binary.BigEndian.AppendUint16(out, proto)
	return append(out, b[14:]...)
}

// unpppoe is the PPPoE session frame b without its session header: the
// EtherType IPv6 for PPP protocol 0x0057, else IPv4.
func unpppoe(b []byte) []byte {
	et := uint16(frame.EtherTypeIPv4)
	if binary.BigEndian.Uint16(b[20:]) == 0x0057 {
		et = frame.EtherTypeIPv6
	}
	out := append([]byte(nil), b[:12]...)
	out = binary.BigEndian.AppendUint16(out, et)
	return append(out, b[22:]...)
}

// unpadded cuts the Ethernet padding off an untagged IPv4 frame.
func unpadded(b []byte) []byte {
	return b[:14+int(binary.BigEndian.Uint16(b[16:]))]
}

// TestPPPoERewrite runs the tcx program on the frames of NAT flows over a
// PPPoE WAN and compares what it leaves with the slow path's frame byte
// for byte: to the WAN the rewrite in the session (the header pushed, to
// the AC), from it the session header taken off, then the rewrite.
func TestPPPoERewrite(t *testing.T) {
	p := load(t, ModeTCX)
	if err := p.SetPPPoE(testSession, acMAC); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, 8864))
	var out, in int
	for i := range 1000 {
		c := randomNAT(r, i)
		c.flow.DstMAC, c.flow.PPPoESession = acMAC, testSession
		toWAN := i%2 == 0
		if toWAN {
			c.flow.PPPoEOut = true
		} else {
			// The same IP packet from the AC in the session, to the
			// router's WAN MAC; its flow goes to a LAN host.
			c.flow.PPPoEIn, c.flow.CheckSrcMAC = true, false
			c.flow.InDstMAC, c.flow.DstMAC, c.flow.SrcMAC = routerWAN, hostMAC, routerLAN
			u := unpadded(c.frame)
			copy(u[0:6], routerWAN[:])
			copy(u[6:12], acMAC[:])
			c.frame = u
		}
		if err := p.PutNAT(c.key, c.flow); err != nil {
			t.Fatal(err)
		}
		var sent, want []byte
		if toWAN {
			sent, want = c.frame, pppoeFrame(slowRewrite(t, c.frame, c.flow), testSession)
		} else {
			sent, want = pppoeFrame(c.frame, testSession), slowRewrite(t, c.frame, c.flow)
		}
		ret, got := run(t, p.progs.TCX, sent)
		fret, _ := run(t, p.progs.Filter, asTapped(sent))
		if (fret == 0) != (ret == retRedirect) {
			t.Fatalf("%s: the filter returned %d (0: kept out of the rings), the tcx program %d\nframe % x", c.name, fret, ret, sent)
		}
		if err := p.DeleteNAT(c.key); err != nil {
			t.Fatal(err)
		}
		if ret != retRedirect {
			if c.key.Proto == frame.ProtoICMP {
				continue // an identifier change that zeroes the checksum: the slow path's
			}
			t.Fatalf("%s: program returned %d, want redirect\nframe % x", c.name, ret, sent)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s (to the WAN: %v): frames differ\nsent  % x\nslow  % x\nfast  % x", c.name, toWAN, sent, want, got)
		}
		if toWAN {
			out++
		} else {
			in++
		}
	}
	if out < 400 || in < 400 {
		t.Errorf("forwarded %d frames to the WAN and %d from it, want 400 or more each", out, in)
	}
}

// TestPPPoEPunts checks that a PPPoE flow's frames go to the slow path
// when they are not the session's, and that a new session (or none)
// takes the old session's flows off the fast path at once.
func TestPPPoEPunts(t *testing.T) {
	p := load(t, ModeTCX)
	key := NATKey{Ifindex: 1, Src: server, Dst: wanAddr, SrcPort: 53, DstPort: 1024, Proto: frame.ProtoUDP}
	fl := NATFlow{DstMAC: hostMAC, SrcMAC: routerLAN, InDstMAC: routerWAN, Src: server, Dst: lanHost, SrcPort: 53, DstPort: 40000,
		OutIfindex: 3, Slot: 5, MaxFrame: 1514, MaxIP: 1500, PPPoEIn: true, PPPoESession: testSession}
	if err := p.PutNAT(key, fl); err != nil {
		t.Fatal(err)
	}
	outKey := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	outFlow := natFlow()
	outFlow.DstMAC, outFlow.PPPoEOut, outFlow.PPPoESession = acMAC, true, testSession
	if err := p.PutNAT(outKey, outFlow); err != nil {
		t.Fatal(err)
	}
	reply := func(mod func(b []byte)) []byte {
		h := frametest.IPv4{Src: server, Dst: wanAddr, TTL: 64}
		b := pppoeFrame(frametest.Frame(routerWAN, acMAC, frame.EtherTypeIPv4, h.UDPPacket(53, 1024, make([]byte, 20))), testSession)
		if mod != nil {
			mod(b)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		session uint16 // SetPPPoE's
		ac      [6]byte
		frame   []byte
		want    Punt // -1: forwarded
	}{
		{"in session", testSession, acMAC, reply(nil), -1},
		{"to the WAN in session", testSession, acMAC, natUDP(nil, 10), -1},
		{"another session", testSession, acMAC, reply(func(b []byte) { b[17]++ }), PuntPPPoE},
		{"from another MAC", testSession, acMAC, reply(func(b []byte) { b[11]++ }), PuntPPPoE},
		{"code not 0", testSession, acMAC, reply(func(b []byte) { b[15] = 0x09 }), PuntMiss},
		{"version 2", testSession, acMAC, reply(func(b []byte) { b[14] = 0x21 }), PuntMiss},
		{"IPv6CP", testSession, acMAC, reply(func(b []byte) { b[20], b[21] = 0x80, 0x57 }), PuntMiss},
		{"length short", testSession, acMAC, reply(func(b []byte) { b[19]-- }), PuntMiss},
		{"padded", testSession, acMAC, append(reply(nil), 0, 0), PuntMiss},
		{"outside the session", testSession, acMAC, unpppoe(reply(nil)), PuntPPPoE},
		{"session changed", testSession + 1, acMAC, reply(nil), PuntPPPoE},
		{"session changed, to the WAN", testSession + 1, acMAC, natUDP(nil, 10), PuntPPPoE},
		{"session down", 0, [6]byte{}, reply(nil), PuntPPPoE},
		{"session down, to the WAN", 0, [6]byte{}, natUDP(nil, 10), PuntPPPoE},
		{"new AC", testSession, gwMAC, natUDP(nil, 10), PuntPPPoE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.SetPPPoE(tc.session, tc.ac); err != nil {
				t.Fatal(err)
			}
			checkPunt(t, p, tc.frame, tc.want)
		})
	}
}

// checkPunt runs frame through p's tcx program: a want below 0 expects
// it forwarded (redirected), else punted once for want.
func checkPunt(t *testing.T, p *Program, frame []byte, want Punt) {
	t.Helper()
	before, err := p.Punts()
	if err != nil {
		t.Fatal(err)
	}
	ret, _ := run(t, p.progs.TCX, frame)
	after, err := p.Punts()
	if err != nil {
		t.Fatal(err)
	}
	if want < 0 {
		if ret != retRedirect {
			t.Errorf("returned %d, want redirect; punts %v", ret, diffPunts(before, after))
		}
		return
	}
	if ret != retTCXNext {
		t.Errorf("returned %d, want TCX_NEXT", ret)
	}
	if d := diffPunts(before, after); d[want] != 1 {
		t.Errorf("punts %v, want one %v", d, want)
	}
}

func diffPunts(a, b [NumPunts]uint64) map[Punt]uint64 {
	d := map[Punt]uint64{}
	for i := range a {
		if b[i] != a[i] {
			d[Punt(i)] = b[i] - a[i]
		}
	}
	return d
}

// FuzzFastPathPPPoE feeds arbitrary frames, mostly PPPoE session frames
// from the AC, to the tcx program with the session set and a NAT flow or
// a routed IPv6 flow (PPPoEIn) installed for the key of the IPv4 or IPv6
// frame the slow path's pppoeIn would make of it. Whatever the program
// forwards must be a frame of the session, from the AC, of PPP IPv4 or
// IPv6, unpadded, that package nat (route6) accepts, and come out as the
// slow path's decapsulation and rewrite, byte for byte; the socket filter
// must decide as the tcx program does. Run as root.
func FuzzFastPathPPPoE(f *testing.F) {
	h := frametest.IPv4{Src: server, Dst: wanAddr, TTL: 64}
	in := func(ip []byte) []byte {
		return pppoeFrame(frametest.Frame(routerWAN, acMAC, frame.EtherTypeIPv4, ip), testSession)
	}
	h6 := frametest.IPv6{Src: server6, Dst: lanHost6, HopLimit: 64}
	in6 := func(ip []byte) []byte {
		return pppoeFrame(frametest.Frame(routerWAN, acMAC, frame.EtherTypeIPv6, ip), testSession)
	}
	for _, seed := range [][]byte{
		in6(h6.UDPPacket(53, 1024, make([]byte, 20))),
		in6(h6.TCPPacket(frametest.TCP{SrcPort: 443, DstPort: 1024, Seq: 1, Ack: 2, Flags: frame.TCPAck, Window: 100}, []byte("data"))),
		in6(h6.ICMPPacket(frame.ICMPv6EchoReply, 0, 0x12340001, nil)),
		in(h.UDPPacket(53, 1024, make([]byte, 20))),
		in(h.TCPPacket(frametest.TCP{SrcPort: 443, DstPort: 1024, Seq: 1, Ack: 2, Flags: frame.TCPAck, Window: 100}, []byte("data"))),
		in(h.ICMPPacket(frame.ICMPEchoReply, 0, 0x12340001, nil)),
		append(in(h.UDPPacket(53, 1024, nil)), 0, 0),
		make([]byte, 70),
	} {
		f.Add(seed, uint16(4321))
	}
	p := load(f, ModeTCX)
	if err := p.SetPPPoE(testSession, acMAC); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, newPort uint16) {
		if len(b) < 22 || len(b) > 2000 {
			return
		}
		// The slow path's view: pppoeIn's checks and decapsulation.
		sid, proto, n := binary.BigEndian.Uint16(b[16:]), binary.BigEndian.Uint16(b[20:]), int(binary.BigEndian.Uint16(b[18:]))-2
		session := binary.BigEndian.Uint16(b[12:]) == 0x8864 && b[14] == 0x11 && b[15] == 0 && n >= 0 && 22+n <= len(b) &&
			sid == testSession && (proto == 0x0021 || proto == 0x0057) && [6]byte(b[6:12]) == acMAC
		var u []byte
		var pf frame.Frame
		var key NATKey
		var fl NATFlow
		var key6 IPv6Key
		var fl6 IPv6Flow
		nat, v6 := false, false
		if session {
			u = unpppoe(b[:22+n])
			perr := frame.Parse(u, &pf)
			if perr == nil && pf.IsIPv6() && pf.L4Off != 0 && pf.NTags == 0 {
				key6 = IPv6Key{Ifindex: 1, Src: pf.IPv6.Src, Dst: pf.IPv6.Dst, Proto: pf.Proto}
				fl6 = IPv6Flow{DstMAC: hostMAC, SrcMAC: routerLAN, InDstMAC: pf.Dst, OutIfindex: 3, Slot: 5, MaxFrame: 1514, MaxIP: 1500,
					ICMPType: pf.ICMP.Type, PPPoEIn: true, PPPoESession: testSession}
				v6 = true
				switch {
				case pf.Proto == frame.ProtoTCP:
					key6.SrcPort, key6.DstPort = pf.TCP.SrcPort, pf.TCP.DstPort
				case pf.Proto == frame.ProtoUDP:
					key6.SrcPort, key6.DstPort = pf.UDP.SrcPort, pf.UDP.DstPort
				case pf.Proto == frame.ProtoICMPv6 && pf.ICMP.Type == frame.ICMPv6EchoRequest:
					key6.SrcPort = pf.ICMP.ID
				case pf.Proto == frame.ProtoICMPv6 && pf.ICMP.Type == frame.ICMPv6EchoReply:
					key6.DstPort = pf.ICMP.ID
				default:
					v6 = false
				}
				if v6 {
					if err := p.PutIPv6(key6, fl6); err != nil {
						t.Fatal(err)
					}
					defer p.DeleteIPv6(key6)
				}
			}
			if perr == nil && pf.IsIPv4() && pf.L4Off != 0 && pf.NTags == 0 &&
				(pf.Proto == frame.ProtoTCP || pf.Proto == frame.ProtoUDP) {
				nat = true
				key = NATKey{Ifindex: 1, Src: pf.IPv4.Src, Dst: pf.IPv4.Dst, Proto: pf.Proto}
				if pf.Proto == frame.ProtoTCP {
					key.SrcPort, key.DstPort = pf.TCP.SrcPort, pf.TCP.DstPort
				} else {
					key.SrcPort, key.DstPort = pf.UDP.SrcPort, pf.UDP.DstPort
				}
				fl = NATFlow{DstMAC: hostMAC, SrcMAC: routerLAN, InDstMAC: pf.Dst, Src: pf.IPv4.Src, Dst: lanHost,
					SrcPort: key.SrcPort, DstPort: newPort, OutIfindex: 3, Slot: 5, MaxFrame: 1514, MaxIP: 1500,
					PPPoEIn: true, PPPoESession: testSession}
				if err := p.PutNAT(key, fl); err != nil {
					t.Fatal(err)
				}
				defer p.DeleteNAT(key)
			}
		}
		ret, out, err := tryRun(p.progs.TCX, b)
		if err != nil {
			return // the kernel's test harness refuses some short frames
		}
		fret, _, ferr := tryRun(p.progs.Filter, asTapped(b))
		if ferr == nil && (fret == 0) != (ret == retRedirect) {
			t.Fatalf("the filter returned %d (0: kept out of the rings), the tcx program %d\nframe % x", fret, ret, b)
		}
		if ret != retRedirect {
			if !bytes.Equal(out, b) {
				t.Fatalf("a frame left to the slow path was changed:\nin  % x\nout % x", b, out)
			}
			return
		}
		if v6 {
			if 22+n != len(b) || proto != 0x0057 || !r6Acceptable(u, &pf, fl6) {
				t.Fatalf("forwarded an IPv6 frame route6 would not forward as an established session frame: % x", b)
			}
			if want := r6Slow(t, u, fl6); !bytes.Equal(out, want) {
				t.Fatalf("IPv6 decapsulation and rewrite differ\nframe % x\nslow  % x\nfast  % x", b, want, out)
			}
			return
		}
		if !nat || 22+n != len(b) || proto != 0x0021 || !natAcceptable(u, &pf, fl) {
			t.Fatalf("forwarded a frame the slow path would not forward as an established session frame: % x", b)
		}
		if want := slowRewrite(t, u, fl); !bytes.Equal(out, want) {
			t.Fatalf("decapsulation and rewrite differ\nframe % x\nslow  % x\nfast  % x", b, want, out)
		}
	})
}

// BenchmarkPPPoE is the tcx program's time for a frame of an installed
// NAT flow to and from a PPPoE WAN against the same flows on a plain
// WAN, one run per frame (BPF_PROG_TEST_RUN without repeat: a repeat
// would see the frame the run before made; each run includes the test
// run's own ~100 ns, the same in every case): the difference is what
// pushing and taking off the session header costs.
func BenchmarkPPPoE(b *testing.B) {
	p := load(b, ModeTCX)
	if err := p.SetPPPoE(testSession, acMAC); err != nil {
		b.Fatal(err)
	}
	outKey := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	inKey := NATKey{Ifindex: 1, Src: server, Dst: wanAddr, SrcPort: 53, DstPort: 1024, Proto: frame.ProtoUDP}
	inFlow := NATFlow{DstMAC: hostMAC, SrcMAC: routerLAN, InDstMAC: routerWAN, Src: server, Dst: lanHost, SrcPort: 53, DstPort: 40000,
		OutIfindex: 3, Slot: 6, MaxFrame: 1514, MaxIP: 1500}
	h := frametest.IPv4{Src: server, Dst: wanAddr, TTL: 64}
	reply := frametest.Frame(routerWAN, acMAC, frame.EtherTypeIPv4, h.UDPPacket(53, 1024, make([]byte, 18)))
	for _, tc := range []struct {
		name  string
		ppp   bool
		in    bool
		frame []byte
	}{
		{"to the WAN", false, false, natUDP(nil, 18)},
		{"to the WAN in PPPoE", true, false, natUDP(nil, 18)},
		{"from the WAN", false, true, reply},
		{"from the WAN in PPPoE", true, true, pppoeFrame(reply, testSession)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.in {
				fl := inFlow
				fl.PPPoEIn, fl.PPPoESession = tc.ppp, testSession
				if err := p.PutNAT(inKey, fl); err != nil {
					b.Fatal(err)
				}
			} else {
				fl := natFlow()
				fl.PPPoEOut, fl.PPPoESession = tc.ppp, testSession
				if tc.ppp {
					fl.DstMAC = acMAC
				}
				if err := p.PutNAT(outKey, fl); err != nil {
					b.Fatal(err)
				}
			}
			benchRedirect(b, p, tc.frame)
		})
	}
}

// benchRedirect reports the tcx program's time for frame, one run per
// frame, each of which must be redirected.
func benchRedirect(b *testing.B, p *Program, frame []byte) {
	var sum time.Duration
	n := 0
	for b.Loop() {
		verdict, d, err := p.progs.TCX.Benchmark(frame, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		if verdict != retRedirect {
			b.Fatalf("verdict %d, want TC_ACT_REDIRECT (%d)", verdict, retRedirect)
		}
		sum += d
		n++
	}
	b.ReportMetric(float64(sum.Nanoseconds())/float64(n), "ns/frame")
}
