package nat

import (
	"encoding/binary"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// FuzzTranslate feeds arbitrary frames to a router with live connections
// on both sides. It checks that nothing panics or reads out of bounds,
// that forwarded and generated frames parse, and that a forwarded frame
// whose input checksums were right has right checksums.
func FuzzTranslate(f *testing.F) {
	seeds := fuzzSeeds()
	for i, s := range seeds {
		f.Add(s, i%2 == 0)
	}
	e := newEnv(f, nil)
	var setup []byte
	for _, b := range [][]byte{seeds[0], seeds[1], seeds[7], fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(2000, 53, nil))} {
		setup = append(setup[:0], b...)
		e.lan.Handle(e.now, lanPort, setup)
	}
	var in, out frame.Frame
	f.Fuzz(func(t *testing.T, b []byte, lan bool) {
		orig := append([]byte(nil), b...)
		w, port := e.wan, wanPort
		if lan {
			w, port = e.lan, lanPort
		}
		w.Prefetch(port, b)
		res := w.Handle(e.now, port, b)
		drain(w)
		switch res.Action {
		case routing.Forward:
			if len(res.Frame) != len(orig) {
				t.Fatalf("forwarded %d bytes of %d", len(res.Frame), len(orig))
			}
			if err := frame.Parse(orig, &in); err != nil {
				t.Fatalf("forwarded a frame that does not parse: %v", err)
			}
			if err := frame.Parse(res.Frame, &out); err != nil {
				t.Fatalf("forwarded frame does not parse: %v", err)
			}
			if !frame.IPv4HeaderValid(res.Frame, &out) {
				t.Fatalf("forwarded IPv4 header checksum wrong")
			}
			if frame.VerifyChecksums(orig, &in) == nil && frame.VerifyChecksums(res.Frame, &out) != nil {
				t.Fatalf("valid input forwarded with a bad checksum:\n in % x\nout % x", orig, res.Frame)
			}
			if in.ICMP.EmbeddedOff != 0 && out.ICMP.EmbeddedOff != 0 {
				var qi, qo frame.Inner
				if frame.ParseEmbedded(orig, &in, &qi) == nil && frame.ParseEmbedded(res.Frame, &out, &qo) == nil {
					hi := orig[qi.L3Off : qi.L3Off+int(qi.IPv4.IHL)*4]
					ho := res.Frame[qo.L3Off : qo.L3Off+int(qo.IPv4.IHL)*4]
					if frame.VerifyIPv4Header(hi) && !frame.VerifyIPv4Header(ho) {
						t.Fatalf("quoted IPv4 header checksum broken")
					}
				}
			}
		case routing.Reply:
			if err := frame.Parse(res.Frame, &out); err != nil {
				t.Fatalf("generated frame does not parse: %v", err)
			}
			if out.IsIPv4() && frame.VerifyChecksums(res.Frame, &out) != nil {
				t.Fatalf("generated frame has a bad checksum: % x", res.Frame)
			}
		}
		e.now += 1e6
	})
}

// fuzzSeeds are the seed frames of the fuzz targets: connection packets
// both ways, ICMP errors, fragments, ARP.
func fuzzSeeds() [][]byte {
	return [][]byte{
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPAck}, []byte("x"))),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1001, DstPort: 80, Flags: frame.TCPSyn, Opts: []byte{1, 2, 4, 5, 0xb4, 0, 0, 0}}, nil)),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPAck}, nil)),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(53, 2000, []byte("a"))),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacketNoChecksum(53, 2000, []byte("a"))),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(1, 5004, []byte("fwd"))),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), TTL: 1}.UDPPacket(1, 2, nil)),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.ICMPPacket(8, 0, 9<<16, []byte("ping"))),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.ICMPPacket(0, 0, 9<<16, []byte("ping"))),
		fromWAN(frametest.IPv4{Src: a4(router1), Dst: a4(wanAddr)}.ICMPPacket(11, 0, 0, frametest.IPv4{Src: a4(wanAddr), Dst: a4(remote)}.UDPPacket(2000, 53, []byte("a"))[:28])),
		fromWAN(frametest.IPv4{Src: a4(router1), Dst: a4(wanAddr)}.ICMPPacket(3, 4, 1400, frametest.IPv4{Src: a4(wanAddr), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPAck}, nil)[:40])),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoUDP, ID: 5, MF: true}.Build(make([]byte, 16))),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoUDP, ID: 5, FragOff: 2}.Build(make([]byte, 5))),
		fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 7, DstPort: 8080, Flags: frame.TCPSyn}, nil)),
		frametest.ARPFrame(bcast, hostA, 1, hostA, a4(ipA), [6]byte{}, a4(lanAddr)),
		frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr)),
	}
}

// FuzzFragment sends packets of any size, options, offset and MF through a
// router whose WAN MTU is from the input: what leaves is a set of
// fragments that each fit, carry right header checksums and, with the
// packet's own offset as their start, cover its data exactly once.
func FuzzFragment(f *testing.F) {
	f.Add(uint16(3000), []byte{130, 3, 0, 0}, uint16(0), false, uint16(1400))
	f.Add(uint16(1480), []byte{}, uint16(185), true, uint16(576))
	f.Add(uint16(9000), []byte{7, 3, 4, 1}, uint16(0), false, uint16(576))
	f.Fuzz(func(t *testing.T, size uint16, opts []byte, off uint16, mf bool, mtu uint16) {
		mtu = 576 + mtu%(9000-576+1)
		opts = opts[:min(len(opts), 40)&^3]
		size = size % 9000
		off &= 0x1fff
		if int(off)*8+int(size) > 65515 {
			return
		}
		e := newEnv(t, func(c *Config) { c.WAN.MTU = int(mtu) })
		h := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoUDP, ID: 1, Opts: opts, FragOff: off, MF: mf}
		b := fromLAN(hostA, h.Build(make([]byte, size)))
		if len(b) > 14+9000 {
			return
		}
		res := e.lan.Handle(e.now, lanPort, b)
		if res.Action != routing.Forward {
			return
		}
		frags := [][]byte{res.Frame}
		for _, o := range drain(e.lan) {
			frags = append(frags, o.b)
		}
		at, last := int(off)*8, false
		for i, fr := range frags {
			ip := fr[14:]
			ihl := int(ip[0]&0xf) * 4
			total := int(binary.BigEndian.Uint16(ip[2:]))
			if total > int(mtu) || ihl < 20 || total < ihl || frametest.Sum(ip[:ihl]) != 0xffff {
				t.Fatalf("fragment %d: total %d ihl %d (mtu %d), header sum %#x", i, total, ihl, mtu, frametest.Sum(ip[:ihl]))
			}
			fo := binary.BigEndian.Uint16(ip[6:])
			if int(fo&0x1fff)*8 != at {
				t.Fatalf("fragment %d at %d, want %d", i, int(fo&0x1fff)*8, at)
			}
			at += total - ihl
			last = fo&0x2000 == 0
		}
		if at != int(off)*8+int(size) || last == mf {
			t.Fatalf("fragments end at %d (last %v), want %d (last %v)", at, last, int(off)*8+int(size), !mf)
		}
	})
}
