package fastpath

import (
	"bytes"
	"encoding/binary"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// natAcceptable reports whether the slow path forwards frame b of an
// established NAT flow f unchanged in state: what package nat checks
// before it rewrites.
func natAcceptable(b []byte, f *frame.Frame, fl NATFlow) bool {
	ip := &f.IPv4
	switch {
	case f.NTags != 0 || f.Fragment || ip.IHL != 5 || ip.TTL <= 1,
		!frame.VerifyIPv4Header(b[f.L3Off : f.L3Off+20]),
		f.L3End-f.L3Off > fl.MaxIP, len(b) > fl.MaxFrame,
		f.Dst != fl.InDstMAC:
		return false
	case f.Proto == frame.ProtoTCP:
		return f.TCP.ValidFlags() && f.TCP.Flags&(frame.TCPSyn|frame.TCPFin|frame.TCPRst) == 0
	case f.Proto == frame.ProtoICMP:
		return f.ICMP.Type == fl.ICMPType
	}
	return true
}

// r6Acceptable reports whether route6 forwards frame b of an established
// connection whose flow is fl unchanged in state: what it checks before
// it decrements the hop limit.
func r6Acceptable(b []byte, f *frame.Frame, fl IPv6Flow) bool {
	ip := &f.IPv6
	scoped := func(a [16]byte) bool { return a[0] == 0xff || a[0] == 0xfe && a[1]&0xc0 == 0x80 || a == [16]byte{} }
	switch {
	case f.NTags != 0 || ip.Exts != 0 || f.Fragment || f.L4Off != 14+40 || ip.HopLimit <= 1,
		scoped(ip.Src) || scoped(ip.Dst), f.L3End != len(b),
		f.L3End-f.L3Off > fl.MaxIP, len(b) > fl.MaxFrame, f.Dst != fl.InDstMAC:
		return false
	case f.Proto == frame.ProtoTCP:
		return f.TCP.ValidFlags() && f.TCP.Flags&(frame.TCPSyn|frame.TCPFin|frame.TCPRst) == 0
	case f.Proto == frame.ProtoICMPv6:
		return f.ICMP.Type == fl.ICMPType
	}
	return f.Proto == frame.ProtoUDP
}

// FuzzFastPath feeds arbitrary frames to the tcx program with a NAT flow
// or a routed IPv6 flow installed for the frame's own key (when it has
// one) and an L2-only pair for its MACs. Whatever the program forwards
// must be a frame the slow path would forward: a NAT frame must be one
// package nat accepts and come out as its rewrite, byte for byte, an IPv6
// frame one route6 forwards as established, as route6 rewrites it; a
// bridged frame must parse (package frame) and come out unchanged. Run as
// root.
func FuzzFastPath(f *testing.F) {
	h := frametest.IPv4{Src: lanHost, Dst: server, TTL: 64}
	for _, seed := range [][]byte{
		natUDP(nil, 10), natTCP(frame.TCPAck), natTCP(frame.TCPSyn), natUDP(func(h *frametest.IPv4) { h.MF = true }, 16),
		frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4, h.ICMPPacket(8, 0, 0x12340001, nil))),
		frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4, h.UDPPacketNoChecksum(1, 2, nil))),
		frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv6, frametest.IPv6{Src: [16]byte{0xfd, 15: 1}, Dst: [16]byte{0xfd, 15: 2}}.UDPPacket(5, 6, nil)),
		r6UDP(nil, 10), r6TCP(frame.TCPAck), r6TCP(frame.TCPFin | frame.TCPAck), r6Echo(frame.ICMPv6EchoRequest, nil),
		r6Echo(frame.ICMPv6EchoReply, nil), r6UDP(func(h *frametest.IPv6) { h.HopLimit = 1 }, 10), append(r6UDP(nil, 4), 0, 0),
		make([]byte, 60),
	} {
		f.Add(seed, uint32(0x01020304), uint16(4321))
	}
	p := load(f, ModeTCX)
	f.Fuzz(func(t *testing.T, b []byte, newAddr uint32, newPort uint16) {
		if len(b) < 14 || len(b) > 2000 {
			return
		}
		var pf frame.Frame
		perr := frame.Parse(b, &pf)
		var key NATKey
		var fl NATFlow
		nat := perr == nil && pf.IsIPv4() && pf.L4Off != 0 && pf.NTags == 0
		if nat {
			key = NATKey{Ifindex: 1, Src: pf.IPv4.Src, Dst: pf.IPv4.Dst, Proto: pf.Proto}
			fl = natFlow()
			fl.InDstMAC = pf.Dst
			fl.CheckSrcMAC = false
			binary.BigEndian.PutUint32(fl.Src[:], newAddr)
			fl.Dst = pf.IPv4.Dst
			switch pf.Proto {
			case frame.ProtoTCP:
				key.SrcPort, key.DstPort = pf.TCP.SrcPort, pf.TCP.DstPort
			case frame.ProtoUDP:
				key.SrcPort, key.DstPort = pf.UDP.SrcPort, pf.UDP.DstPort
			case frame.ProtoICMP:
				switch pf.ICMP.Type {
				case frame.ICMPEchoRequest:
					key.SrcPort = pf.ICMP.ID
				case frame.ICMPEchoReply:
					key.DstPort = pf.ICMP.ID
				default:
					nat = false
				}
				fl.ICMPType = pf.ICMP.Type
			default:
				nat = false
			}
			fl.SrcPort, fl.DstPort = newPort, key.DstPort
			if pf.Proto == frame.ProtoICMP && pf.ICMP.Type == frame.ICMPEchoReply {
				fl.SrcPort, fl.DstPort = 0, newPort
			}
		}
		var key6 IPv6Key
		fl6 := r6Flow()
		v6 := perr == nil && pf.IsIPv6() && pf.L4Off != 0 && pf.NTags == 0
		if v6 {
			key6 = IPv6Key{Ifindex: 1, Src: pf.IPv6.Src, Dst: pf.IPv6.Dst, Proto: pf.Proto}
			fl6.InDstMAC, fl6.CheckSrcMAC = pf.Dst, false
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
			fl6.ICMPType = pf.ICMP.Type
		}
		if v6 {
			if err := p.PutIPv6(key6, fl6); err != nil {
				t.Fatal(err)
			}
			defer p.DeleteIPv6(key6)
		}
		if nat {
			if err := p.PutNAT(key, fl); err != nil {
				t.Fatal(err)
			}
			defer p.DeleteNAT(key)
		}
		var pk PairKey
		if len(b) >= 12 {
			pk = PairKey{Ifindex: 1, Dst: [6]byte(b[0:6]), Src: [6]byte(b[6:12])}
			if err := p.PutPair(pk, Pair{OutIfindex: 9, Slot: 1, MaxWire: 1514, L2Only: true}); err != nil {
				t.Fatal(err)
			}
			defer p.DeletePair(pk)
		}
		ret, out, err := tryRun(p.progs.TCX, b)
		if err != nil {
			if len(b) < 14+40 {
				return // the kernel's test harness wants a whole IP header
			}
			t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
		}
		if ret != retRedirect {
			if !bytes.Equal(out, b) {
				t.Fatalf("a frame left to the slow path was changed:\nin  % x\nout % x", b, out)
			}
			return
		}
		if perr != nil {
			t.Fatalf("forwarded a frame the slow path drops (%v): % x", perr, b)
		}
		if bytes.Equal(out, b) {
			// Bridged: the parser accepts it (checked above).
			return
		}
		if v6 {
			if !r6Acceptable(b, &pf, fl6) {
				t.Fatalf("rewrote an IPv6 frame route6 would not forward as established: % x", b)
			}
			if want := r6Slow(t, b, fl6); !bytes.Equal(out, want) {
				t.Fatalf("IPv6 rewrite differs\nframe % x\nslow  % x\nfast  % x", b, want, out)
			}
			return
		}
		if !nat || !natAcceptable(b, &pf, fl) {
			t.Fatalf("rewrote a frame the NAT would not forward as established: % x", b)
		}
		if want := slowRewrite(t, b, fl); !bytes.Equal(out, want) {
			t.Fatalf("rewrite differs\nframe % x\nslow  % x\nfast  % x", b, want, out)
		}
	})
}
