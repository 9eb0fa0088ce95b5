package dataplane

import (
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// TestBuildRejectWhom: which frames a reject answers, by address and by
// ICMP type (frame.IsUnicastIPv4/IPv6, frame.IsICMPError).
func TestBuildRejectWhom(t *testing.T) {
	v6a := [16]byte{0xfd, 15: 1}
	v6b := [16]byte{0xfd, 15: 2}
	icmp4 := func(src [4]byte, typ uint8) []byte {
		return frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: src, Dst: ipB}.ICMPPacket(typ, 0, 0, nil))
	}
	icmp6 := func(src [16]byte, typ uint8) []byte {
		return frametest.Frame(macB, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: src, Dst: v6b}.ICMPPacket(typ, 0, 0, nil))
	}
	for _, tc := range []struct {
		name   string
		frame  []byte
		answer bool
	}{
		{"echo request", icmp4(ipA, frame.ICMPEchoRequest), true},
		{"timestamp reply (a query, not an error)", icmp4(ipA, 14), true},
		{"address mask reply", icmp4(ipA, 18), true},
		{"time exceeded", icmp4(ipA, frame.ICMPTimeExceeded), false},
		{"router advertisement (an error to Linux)", icmp4(ipA, 9), false},
		{"unknown icmp type", icmp4(ipA, 42), false},
		{"loopback source", icmp4([4]byte{127, 0, 0, 1}, frame.ICMPEchoRequest), false},
		{"zero source", icmp4([4]byte{0, 0, 0, 0}, frame.ICMPEchoRequest), false},
		{"class e source", icmp4([4]byte{240, 0, 0, 1}, frame.ICMPEchoRequest), false},
		{"icmpv6 echo request", icmp6(v6a, frame.ICMPv6EchoRequest), true},
		{"icmpv6 neighbour solicitation", icmp6(v6a, 135), true},
		{"icmpv6 packet too big", icmp6(v6a, frame.ICMPv6PacketTooBig), false},
		{"icmpv6 unknown error type", icmp6(v6a, 100), false},
		{"ipv6 loopback source", icmp6([16]byte{15: 1}, frame.ICMPv6EchoRequest), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := rejectAnswer(t, tc.frame)
			if (out != nil) != tc.answer {
				t.Fatalf("answered %v, want %v", out != nil, tc.answer)
			}
			if out != nil && (!frame.IsICMPError(out) || out.Dst != in.Src || out.Src != in.Dst) {
				t.Errorf("answer %x > %x ICMP type %d, want an ICMP error to %x", out.Src, out.Dst, out.ICMP.Type, in.Src)
			}
		})
	}
}

// rejectAnswer parses b and what buildReject answers to it on a port of
// MTU 1500; out is nil for no answer.
func rejectAnswer(t *testing.T, b []byte) (in, out *frame.Frame) {
	t.Helper()
	in, out = new(frame.Frame), new(frame.Frame)
	if err := frame.Parse(b, in); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	dst := make([]byte, 2048)
	n := buildReject(dst, b, in, 1500)
	if n == 0 {
		return in, nil
	}
	if err := frame.Parse(dst[:n], out); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return in, out
}

func TestBuildRejectZeroAllocs(t *testing.T) {
	dst := make([]byte, 2048)
	for _, b := range [][]byte{
		tcpFrame(macB, macA, 1, 23, frame.TCPSyn, frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 5}),
		udpFrame(macB, macA, 9, 1400),
		frametest.Frame(macB, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: [16]byte{0xfd, 15: 1}, Dst: [16]byte{0xfd, 15: 2}}.UDPPacket(5, 9, make([]byte, 1400))),
	} {
		var in frame.Frame
		if err := frame.Parse(b, &in); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { buildReject(dst, b, &in, 1500) }); n != 0 {
			t.Errorf("buildReject: %v allocs per run, want 0", n)
		}
	}
}

func TestRejectAnswer(t *testing.T) {
	b := newTestBridge(t, 2, false, "tcp dport 23 reject\nudp dport 9 reject", false, nil)
	tag := frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 0x2007}
	out := b.rx(1, tcpFrame(macB, macA, 1000, 23, frame.TCPSyn), true, tag)
	ans := out[1]
	if ans == nil {
		t.Fatalf("no answer on the ingress port; out %v", got(out))
	}
	var f frame.Frame
	if err := frame.Parse(ans, &f); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	if f.NTags != 1 || f.Tags[0] != tag {
		t.Errorf("answer tags %v, want the frame's %v in the bytes", f.Tags[:f.NTags], tag)
	}
	if f.Dst != macA || f.Src != macB || f.IPv4.Src != ipB || f.IPv4.Dst != ipA {
		t.Errorf("answer %v>%v %v>%v, want the frame's reversed", f.Src, f.Dst, f.IPv4.Src, f.IPv4.Dst)
	}
	// SYN seq 1000 with 5 payload bytes: RST|ACK acking 1000+5+1.
	if f.TCP.Flags != frame.TCPRst|frame.TCPAck || f.TCP.Ack != 1006 || f.TCP.SrcPort != 23 || f.TCP.DstPort != 1000 {
		t.Errorf("answer TCP %+v", f.TCP)
	}
	if err := frame.VerifyChecksums(ans, &f); err != nil {
		t.Errorf("answer checksums: %v", err)
	}
	st := b.fwds[1].c
	if st.rejectsSent != 1 || st.drops[DropReject] != 1 {
		t.Errorf("rejectsSent %d, reject drops %d; want 1, 1", st.rejectsSent, st.drops[DropReject])
	}
}

func TestBuildReject(t *testing.T) {
	v6a := [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	v6b := [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	big := make([]byte, 1400)
	tests := []struct {
		name   string
		frame  []byte
		answer bool
		check  func(t *testing.T, f *frame.Frame, n int)
	}{
		{"tcp with ack gets a bare RST at its ack",
			frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPAck | frame.TCPPsh, Seq: 10, Ack: 777}, []byte("x"))), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.TCP.Flags != frame.TCPRst || f.TCP.Seq != 777 || f.TCP.Ack != 0 {
					t.Errorf("TCP %+v", f.TCP)
				}
				if n != frame.MinFrameLen {
					t.Errorf("length %d, want padded to %d", n, frame.MinFrameLen)
				}
			}},
		{"udp over IPv4 gets port unreachable quoting the datagram",
			frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.UDPPacketNoChecksum(5, 9, []byte("data"))), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.Proto != frame.ProtoICMP || f.ICMP.Type != 3 || f.ICMP.Code != 3 || f.ICMP.EmbeddedOff == 0 {
					t.Errorf("ICMP %+v", f.ICMP)
				}
				if f.IPv4.TotalLen != 20+8+20+8+4 {
					t.Errorf("total length %d", f.IPv4.TotalLen)
				}
			}},
		{"a big datagram is quoted up to 576 bytes",
			frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.UDPPacketNoChecksum(5, 9, big)), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.IPv4.TotalLen != 576 {
					t.Errorf("total length %d, want 576", f.IPv4.TotalLen)
				}
			}},
		{"udp over IPv6 gets ICMPv6 port unreachable",
			frametest.Frame(macB, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: v6a, Dst: v6b}.UDPPacket(5, 9, big)), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.Proto != frame.ProtoICMPv6 || f.ICMP.Type != 1 || f.ICMP.Code != 4 {
					t.Errorf("ICMPv6 %+v", f.ICMP)
				}
				if int(f.IPv6.PayloadLen)+40 != 1280 {
					t.Errorf("IPv6 packet %d bytes, want 1280", int(f.IPv6.PayloadLen)+40)
				}
			}},
		{"tcp over IPv6 gets a RST",
			frametest.Frame(macB, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: v6a, Dst: v6b}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPSyn, Seq: 5}, nil)), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.TCP.Flags != frame.TCPRst|frame.TCPAck || f.TCP.Ack != 6 || f.IPv6.Src != v6b {
					t.Errorf("TCP %+v src %x", f.TCP, f.IPv6.Src)
				}
			}},
		{"broadcast is not answered", frametest.Frame(bcast, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.UDPPacketNoChecksum(5, 9, nil)), false, nil},
		{"an IP broadcast is not answered", frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: [4]byte{255, 255, 255, 255}}.UDPPacketNoChecksum(5, 9, nil)), false, nil},
		{"a RST is not answered", frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPRst, Seq: 5}, nil)), false, nil},
		{"an ICMP error is not answered", frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.ICMPPacket(3, 3, 0, nil)), false, nil},
		{"ARP is not answered", arpFrame(macB, macA), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in frame.Frame
			if err := frame.Parse(tt.frame, &in); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			dst := make([]byte, 2048)
			n := buildReject(dst, tt.frame, &in, 1500)
			if (n > 0) != tt.answer {
				t.Fatalf("buildReject = %d, want answer %v", n, tt.answer)
			}
			if n == 0 {
				return
			}
			var f frame.Frame
			if err := frame.Parse(dst[:n], &f); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
			if err := frame.VerifyChecksums(dst[:n], &f); err != nil {
				t.Errorf("answer checksums: %v", err)
			}
			if f.Dst != in.Src || f.Src != in.Dst {
				t.Errorf("answer MACs %v>%v", f.Src, f.Dst)
			}
			tt.check(t, &f, n)
		})
	}
	// Too small a buffer: no answer, no panic.
	var in frame.Frame
	fr := tcpFrame(macB, macA, 1, 2, frame.TCPSyn)
	frame.Parse(fr, &in)
	if n := buildReject(make([]byte, 20), fr, &in, 1500); n != 0 {
		t.Errorf("buildReject into 20 bytes = %d", n)
	}
}
