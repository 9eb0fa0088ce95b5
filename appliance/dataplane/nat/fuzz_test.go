package nat

import (
	"testing"

	"e1kbox/appliance/dataplane/frame"
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
	for _, b := range [][]byte{seeds[0], seeds[1], seeds[7], fromLAN(hostA, udpBuild(ipHdr{src: ipA, dst: remote}, 2000, 53, nil, false))} {
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
		fromLAN(hostA, tcpSeg{sport: 1000, dport: 80, flags: frame.TCPAck, payload: []byte("x")}.build(ipHdr{src: ipA, dst: remote})),
		fromLAN(hostA, tcpSeg{sport: 1001, dport: 80, flags: frame.TCPSyn, opts: []byte{1, 2, 4, 5, 0xb4, 0, 0, 0}}.build(ipHdr{src: ipA, dst: remote})),
		fromWAN(tcpSeg{sport: 80, dport: 1000, flags: frame.TCPAck}.build(ipHdr{src: remote, dst: wanAddr})),
		fromWAN(udpBuild(ipHdr{src: remote, dst: wanAddr}, 53, 2000, []byte("a"), false)),
		fromWAN(udpBuild(ipHdr{src: remote, dst: wanAddr}, 53, 2000, []byte("a"), true)),
		fromWAN(udpBuild(ipHdr{src: remote, dst: wanAddr}, 1, 5004, []byte("fwd"), false)),
		fromLAN(hostA, udpBuild(ipHdr{src: ipA, dst: remote, ttl: 1}, 1, 2, nil, false)),
		fromLAN(hostA, icmpBuild(ipHdr{src: ipA, dst: remote}, 8, 0, 9<<16, []byte("ping"))),
		fromWAN(icmpBuild(ipHdr{src: remote, dst: wanAddr}, 0, 0, 9<<16, []byte("ping"))),
		fromWAN(icmpBuild(ipHdr{src: router1, dst: wanAddr}, 11, 0, 0, udpBuild(ipHdr{src: wanAddr, dst: remote}, 2000, 53, []byte("a"), false)[:28])),
		fromWAN(icmpBuild(ipHdr{src: router1, dst: wanAddr}, 3, 4, 1400, tcpSeg{sport: 1000, dport: 80, flags: frame.TCPAck}.build(ipHdr{src: wanAddr, dst: remote})[:40])),
		fromLAN(hostA, ipHdr{src: ipA, dst: remote, proto: frame.ProtoUDP, id: 5, mf: true}.build(make([]byte, 16))),
		fromLAN(hostA, ipHdr{src: ipA, dst: remote, proto: frame.ProtoUDP, id: 5, fragOff: 2}.build(make([]byte, 5))),
		fromLAN(hostB, tcpSeg{sport: 7, dport: 8080, flags: frame.TCPSyn}.build(ipHdr{src: ipB, dst: wanAddr})),
		arpBuild(bcast, hostA, 1, hostA, ipA, [6]byte{}, lanAddr),
		arpBuild(wanMAC, gwMAC, 2, gwMAC, gwAddr, wanMAC, wanAddr),
	}
}
