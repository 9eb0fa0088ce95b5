package frame

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
)

func TestPutRST(t *testing.T) {
	v4 := frametest.IPv4{Src: ip4A, Dst: ip4B}
	v6 := frametest.IPv6{Src: ip6A, Dst: ip6B}
	tcp4 := func(seg frametest.TCP, payload []byte, tags ...frametest.Tag) []byte {
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4, tags...), v4.TCPPacket(seg, payload))
	}
	tests := []struct {
		name      string
		b         []byte
		seq, ack  uint32
		flags     uint8
		ntags     int
		noAnswer  bool
		dstLen    int // 0 means 2048
		answerLen int
	}{
		{name: "ack: the reset takes its sequence number from it", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 10, Ack: 777, Flags: TCPAck | TCPPsh}, []byte("x")),
			seq: 777, flags: TCPRst, answerLen: 60},
		{name: "syn counts one", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 0xffffffff, Flags: TCPSyn}, nil),
			ack: 0, flags: TCPRst | TCPAck, answerLen: 60},
		{name: "syn with data", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 100, Flags: TCPSyn}, []byte("fast open")),
			ack: 110, flags: TCPRst | TCPAck, answerLen: 60},
		{name: "fin counts one", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 5, Flags: TCPFin}, []byte("abc")),
			ack: 9, flags: TCPRst | TCPAck, answerLen: 60},
		{name: "bare data", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 5}, []byte("abc")),
			ack: 8, flags: TCPRst | TCPAck, answerLen: 60},
		{name: "tags are kept", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 5, Flags: TCPSyn}, nil, frametest.Tag{TPID: EtherTypeQinQ, TCI: 5}, frametest.Tag{TPID: EtherTypeVLAN, TCI: 6}),
			ack: 6, flags: TCPRst | TCPAck, ntags: 2, answerLen: 62},
		{name: "ipv6", b: slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), v6.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 5, Flags: TCPSyn}, nil)),
			ack: 6, flags: TCPRst | TCPAck, answerLen: 74},
		{name: "a reset is not answered", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 5, Flags: TCPRst}, nil), noAnswer: true},
		{name: "a reset with ack is not answered", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Seq: 5, Ack: 9, Flags: TCPRst | TCPAck}, nil), noAnswer: true},
		{name: "udp is not answered", b: slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), v4.UDPPacket(1, 2, nil)), noAnswer: true},
		{name: "a later fragment is not answered", b: slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4),
			frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoTCP, FragOff: 3}.Build(frametest.Payload(40))), noAnswer: true},
		{name: "arp is not answered", b: slices.Concat(frametest.Eth(macB, macA, EtherTypeARP), frametest.ARP(1, macA, ip4A, mac{}, ip4B)), noAnswer: true},
		{name: "too small a buffer", b: tcp4(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: TCPSyn}, nil), dstLen: 59, noAnswer: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.b)
			a := impersonate(f)
			a.Tags = f.Tags[:f.NTags]
			dst := make([]byte, bufLen(tc.dstLen))
			n := PutRST(dst, f, &a)
			if tc.noAnswer {
				if n != 0 {
					t.Fatalf("PutRST = %d, want no answer", n)
				}
				return
			}
			g := checkAnswer(t, dst[:n], f)
			if n != tc.answerLen {
				t.Errorf("length %d, want %d", n, tc.answerLen)
			}
			want := TCP{SrcPort: f.TCP.DstPort, DstPort: f.TCP.SrcPort, Seq: tc.seq, Ack: tc.ack, DataOff: 5, Flags: tc.flags, Checksum: g.TCP.Checksum}
			if diff := cmp.Diff(want, g.TCP); diff != "" {
				t.Errorf("reset (-want +got):\n%s", diff)
			}
			if g.NTags != tc.ntags || g.Tags != f.Tags {
				t.Errorf("tags %v (%d), want %v", g.Tags, g.NTags, f.Tags)
			}
			if PutRST(make([]byte, 2048), g, &a) != 0 {
				t.Error("the reset would be answered with a reset")
			}
		})
	}
}

func TestPutICMPError(t *testing.T) {
	v4 := frametest.IPv4{Src: ip4A, Dst: ip4B}
	v6 := frametest.IPv6{Src: ip6A, Dst: ip6B}
	eth4 := func(ip []byte) []byte { return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip) }
	eth6 := func(ip []byte) []byte { return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip) }
	tests := []struct {
		name     string
		b        []byte
		mtu      int
		dstLen   int // 0 means 2048
		ipLen    int // of the answer; 0: no answer
		quoteLen int
	}{
		{name: "udp datagram quoted whole", b: eth4(v4.UDPPacket(5, 9, []byte("data"))), mtu: 1500, ipLen: 20 + 8 + 32, quoteLen: 32},
		{name: "big datagram quoted up to 576 bytes", b: eth4(v4.UDPPacket(5, 9, make([]byte, 1400))), mtu: 1500, ipLen: 576, quoteLen: 548},
		{name: "no mtu: 576 bytes", b: eth4(v4.UDPPacket(5, 9, make([]byte, 1400))), ipLen: 576, quoteLen: 548},
		{name: "mtu below 576 limits the quote", b: eth4(v4.UDPPacket(5, 9, make([]byte, 1400))), mtu: 300, ipLen: 300, quoteLen: 272},
		{name: "ipv6 quoted up to 1280 bytes", b: eth6(v6.UDPPacket(5, 9, make([]byte, 1400))), mtu: 1500, ipLen: 1280, quoteLen: 1232},
		{name: "ipv6 on a small mtu", b: eth6(v6.UDPPacket(5, 9, make([]byte, 1400))), mtu: 1000, ipLen: 1000, quoteLen: 952},
		{name: "tcp", b: eth4(v4.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: TCPSyn}, nil)), ipLen: 20 + 8 + 40, quoteLen: 40},
		{name: "echo request", b: eth4(v4.ICMPPacket(ICMPEchoRequest, 0, 1, nil)), ipLen: 20 + 8 + 28, quoteLen: 28},
		{name: "timestamp reply is not an error", b: eth4(v4.ICMPPacket(14, 0, 0, make([]byte, 12))), ipLen: 20 + 8 + 40, quoteLen: 40},
		{name: "icmpv6 echo request", b: eth6(v6.ICMPPacket(ICMPv6EchoRequest, 0, 1, nil)), ipLen: 40 + 8 + 48, quoteLen: 48},
		{name: "first fragment", b: eth4(frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, MF: true}.Build(v4.UDP(1, 2, make([]byte, 64))[:48])), ipLen: 20 + 8 + 68, quoteLen: 68},
		{name: "an icmp error is not answered", b: eth4(v4.ICMPPacket(ICMPDestUnreach, 3, 0, make([]byte, 28)))},
		{name: "nor an unknown icmp type", b: eth4(v4.ICMPPacket(42, 0, 0, nil))},
		{name: "nor an icmpv6 error", b: eth6(v6.ICMPPacket(ICMPv6PacketTooBig, 0, 1280, make([]byte, 48)))},
		{name: "nor a later fragment", b: eth4(frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, FragOff: 100}.Build(make([]byte, 16)))},
		{name: "nor arp", b: slices.Concat(frametest.Eth(macB, macA, EtherTypeARP), frametest.ARP(1, macA, ip4A, mac{}, ip4B))},
		{name: "nor on an mtu too small for the headers", b: eth6(v6.UDPPacket(5, 9, nil)), mtu: 47},
		{name: "nor into too small a buffer", b: eth4(v4.UDPPacket(5, 9, make([]byte, 100))), dstLen: 14 + 20 + 8 + 127},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.b)
			a := impersonate(f)
			a.MTU = tc.mtu
			typ, code := uint8(ICMPDestUnreach), uint8(3)
			if f.IsIPv6() {
				typ, code = ICMPv6DestUnreach, 4
			}
			dst := make([]byte, bufLen(tc.dstLen))
			n := PutICMPError(dst, tc.b, f, &a, typ, code, 0x01020304)
			if tc.ipLen == 0 {
				if n != 0 {
					t.Fatalf("PutICMPError = %d, want no answer", n)
				}
				return
			}
			g := checkAnswer(t, dst[:n], f)
			if got := g.L3End - g.L3Off; got != tc.ipLen {
				t.Errorf("answer's IP packet %d bytes, want %d", got, tc.ipLen)
			}
			if g.ICMP.Type != typ || g.ICMP.Code != code || binary.BigEndian.Uint32(dst[g.L4Off+4:]) != 0x01020304 {
				t.Errorf("ICMP type %d code %d rest %#x", g.ICMP.Type, g.ICMP.Code, binary.BigEndian.Uint32(dst[g.L4Off+4:]))
			}
			quote := dst[g.PayloadOff:g.L3End]
			if diff := cmp.Diff(hex.EncodeToString(tc.b[f.L3Off:f.L3Off+tc.quoteLen]), hex.EncodeToString(quote)); diff != "" {
				t.Errorf("quote (-want +got):\n%s", diff)
			}
			if !IsICMPError(g) || PutICMPError(make([]byte, 2048), dst[:n], g, &a, typ, code, 0) != 0 {
				t.Error("the error would be answered with an error")
			}
		})
	}
}

func TestPutEchoReply(t *testing.T) {
	v4 := frametest.IPv4{Src: ip4A, Dst: ip4B, TOS: 0x10}
	v6 := frametest.IPv6{Src: ip6A, Dst: ip6B}
	eth4 := func(ip []byte) []byte { return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip) }
	eth6 := func(ip []byte) []byte { return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip) }
	for _, tc := range []struct {
		name  string
		b     []byte
		reply []byte // the reply's ICMP message; nil: no answer
	}{
		{"echo request", eth4(v4.ICMPPacket(ICMPEchoRequest, 0, 0x12340001, []byte("ping"))),
			frametest.ICMPv4(ICMPEchoReply, 0, 0x12340001, []byte("ping"))},
		{"empty echo request", eth4(v4.ICMPPacket(ICMPEchoRequest, 0, 0, nil)), frametest.ICMPv4(ICMPEchoReply, 0, 0, nil)},
		{"icmpv6 echo request", eth6(v6.ICMPPacket(ICMPv6EchoRequest, 0, 0x00420003, frametest.Payload(56))),
			frametest.IPv6{Src: ip6B, Dst: ip6A}.ICMP(ICMPv6EchoReply, 0, 0x00420003, frametest.Payload(56))},
		{"echo reply is not answered", eth4(v4.ICMPPacket(ICMPEchoReply, 0, 1, nil)), nil},
		{"icmpv6 echo reply is not answered", eth6(v6.ICMPPacket(ICMPv6EchoReply, 0, 1, nil)), nil},
		{"icmp error is not answered", eth4(v4.ICMPPacket(ICMPDestUnreach, 0, 0, make([]byte, 28))), nil},
		{"fragment is not answered", eth4(frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, MF: true}.Build(frametest.ICMPv4(ICMPEchoRequest, 0, 0, make([]byte, 8)))), nil},
		{"udp is not answered", eth4(v4.UDPPacket(1, 7, nil)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.b)
			a := impersonate(f)
			a.TOS = f.IPv4.TOS
			dst := make([]byte, 2048)
			n := PutEchoReply(dst, tc.b, f, &a)
			if tc.reply == nil {
				if n != 0 {
					t.Fatalf("PutEchoReply = %d, want no answer", n)
				}
				return
			}
			g := checkAnswer(t, dst[:n], f)
			if diff := cmp.Diff(hex.EncodeToString(tc.reply), hex.EncodeToString(dst[g.L4Off:g.L3End])); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
			if g.IsIPv4() && g.IPv4.TOS != 0x10 {
				t.Errorf("TOS %#x, want the request's 0x10", g.IPv4.TOS)
			}
			if PutEchoReply(dst[:n-1], tc.b, f, &a) != 0 && n > MinFrameLen {
				t.Error("a reply was written into a buffer one byte short")
			}
		})
	}
}
