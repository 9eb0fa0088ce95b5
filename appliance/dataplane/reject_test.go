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
