package nat

import (
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
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
		case Forward:
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
		case Reply:
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
