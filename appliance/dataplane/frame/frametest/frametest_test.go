package frametest

import (
	"bufio"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSum(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   [][]byte
		sum  uint16
		csum uint16
	}{
		// RFC 1071 section 3: 0001 + f203 + f4f5 + f6f7 = 2ddf0, folded ddf2.
		{"rfc 1071 example", [][]byte{{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}}, 0xddf2, 0x220d},
		// An IPv4 header with its checksum field zero (Wikipedia's example).
		{"ipv4 header", [][]byte{{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}}, 0x479e, 0xb861},
		{"odd length pads with zero", [][]byte{{0x01}}, 0x0100, 0xfeff},
		{"chunks are concatenated", [][]byte{{0x00, 0x01}, {0xf2, 0x03, 0xf4}, {0xf5, 0xf6, 0xf7}}, 0xddf2, 0x220d},
		{"empty", nil, 0, 0xffff},
		{"all ones stays all ones", [][]byte{{0xff, 0xff, 0xff, 0xff}}, 0xffff, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sum(tc.in...); got != tc.sum {
				t.Errorf("Sum = %#04x, want %#04x", got, tc.sum)
			}
			if got := Checksum(tc.in...); got != tc.csum {
				t.Errorf("Checksum = %#04x, want %#04x", got, tc.csum)
			}
		})
	}
}

// kernelFrames reads the frames the Linux kernel built (../testdata).
func kernelFrames(t *testing.T) map[string][]byte {
	t.Helper()
	f, err := os.Open("../testdata/kernel-frames.hex")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, h, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m[name] = b
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// The addresses of testdata/capture.sh: namespace A (v0) and B (v1).
var (
	kMACA = [6]byte{0x02, 0, 0, 0, 0, 0x0a}
	kMACB = [6]byte{0x02, 0, 0, 0, 0, 0x0b}
	kIP4A = [4]byte{192, 168, 77, 1}
	kIP4B = [4]byte{192, 168, 77, 2}
	kIP6A = [16]byte{0xfd, 0, 0, 0x77, 15: 1}
	kIP6B = [16]byte{0xfd, 0, 0, 0x77, 15: 2}
)

// TestKernelFrames rebuilds frames the kernel built from their header
// fields (payloads are taken from the captured frame) and wants the
// kernel's bytes, checksums included.
func TestKernelFrames(t *testing.T) {
	k := kernelFrames(t)
	synOpts := []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x36, 0x72, 0xca, 0xf5, 0, 0, 0, 0, 1, 3, 3, 10}
	syn6Opts := []byte{2, 4, 0x05, 0xa0, 4, 2, 8, 10, 0x7f, 0x5c, 0xb9, 0xfe, 0, 0, 0, 0, 1, 3, 3, 10}
	ethAB4 := func(ip []byte) []byte { return Frame(kMACB, kMACA, EtherTypeIPv4, ip) }
	ethBA4 := func(ip []byte) []byte { return Frame(kMACA, kMACB, EtherTypeIPv4, ip) }
	ethAB6 := func(ip []byte) []byte { return Frame(kMACB, kMACA, EtherTypeIPv6, ip) }
	ethBA6 := func(ip []byte) []byte { return Frame(kMACA, kMACB, EtherTypeIPv6, ip) }
	// The IPv4 and IPv6 pings' datagrams, reassembled from their fragments.
	ping4 := slices.Concat(k["ipv4-frag-first"][34+8:], k["ipv4-frag-later"][34:], k["ipv4-frag-last"][34:])
	icmp4 := ICMPv4(8, 0, 0x547d0001, ping4)
	ping6 := slices.Concat(k["ipv6-frag-first"][62+8:], k["ipv6-frag-later"][62:], k["ipv6-frag-last"][62:])
	h6 := IPv6{Src: kIP6A, Dst: kIP6B, NextHeader: ProtoFragment, FlowLabel: 0xfae95}
	icmp6 := h6.ICMP(128, 0, 0x547f0001, ping6)
	frag4 := IPv4{Src: kIP4A, Dst: kIP4B, Proto: ProtoICMP, ID: 24687, MF: true}
	for _, tc := range []struct {
		name  string
		build func(k []byte) []byte // k is the kernel's frame
	}{
		{"arp-request", func([]byte) []byte {
			return Frame([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, kMACA, EtherTypeARP, ARP(1, kMACA, kIP4A, [6]byte{}, kIP4B))
		}},
		{"arp-reply", func([]byte) []byte {
			return Frame(kMACA, kMACB, EtherTypeARP, ARP(2, kMACB, kIP4B, kMACA, kIP4A))
		}},
		{"icmp-echo-request", func(k []byte) []byte {
			return ethAB4(IPv4{Src: kIP4A, Dst: kIP4B, ID: 24686, DF: true}.ICMPPacket(8, 0, 0x547c0001, k[42:]))
		}},
		{"udp4", func(k []byte) []byte {
			return ethAB4(IPv4{Src: kIP4A, Dst: kIP4B, ID: 1168, DF: true}.UDPPacket(0xe2fb, 0x829a, k[42:]))
		}},
		{"icmp-port-unreachable", func(k []byte) []byte {
			return ethBA4(IPv4{Src: kIP4B, Dst: kIP4A, TOS: 0xc0, ID: 55070}.ICMPPacket(3, 3, 0, k[42:]))
		}},
		{"dhcp-discover", func(k []byte) []byte {
			h := IPv4{Src: [4]byte{}, Dst: [4]byte{255, 255, 255, 255}, TOS: 0x10, TTL: 128}
			return Frame([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, kMACA, EtherTypeIPv4, h.UDPPacket(68, 67, k[42:]))
		}},
		{"tcp4-syn", func([]byte) []byte {
			return ethAB4(IPv4{Src: kIP4A, Dst: kIP4B, ID: 767, DF: true}.TCPPacket(TCP{SrcPort: 0xb09c, DstPort: 9, Seq: 0x332c8491, Flags: 0x02, Window: 0xfaf0, Opts: synOpts}, nil))
		}},
		{"tcp4-rst-ack", func([]byte) []byte {
			return ethBA4(IPv4{Src: kIP4B, Dst: kIP4A, DF: true}.TCPPacket(TCP{SrcPort: 9, DstPort: 0xb09c, Ack: 0x332c8492, Flags: 0x14}, nil))
		}},
		{"tcp6-syn", func([]byte) []byte {
			return ethAB6(IPv6{Src: kIP6A, Dst: kIP6B, FlowLabel: 0xb2237}.TCPPacket(TCP{SrcPort: 0x89b4, DstPort: 9, Seq: 0x9c7a2a9e, Flags: 0x02, Window: 0xfd20, Opts: syn6Opts}, nil))
		}},
		{"tcp6-rst-ack", func([]byte) []byte {
			return ethBA6(IPv6{Src: kIP6B, Dst: kIP6A, FlowLabel: 0x01b22}.TCPPacket(TCP{SrcPort: 9, DstPort: 0x89b4, Ack: 0x9c7a2a9f, Flags: 0x14}, nil))
		}},
		{"udp6", func(k []byte) []byte {
			return ethAB6(IPv6{Src: kIP6A, Dst: kIP6B, FlowLabel: 0xbee09}.UDPPacket(0xd69c, 0x829b, k[62:]))
		}},
		{"icmpv6-port-unreachable", func(k []byte) []byte {
			return ethBA6(IPv6{Src: kIP6B, Dst: kIP6A, FlowLabel: 0x0beba}.ICMPPacket(1, 4, 0, k[62:]))
		}},
		{"icmpv6-echo-request", func(k []byte) []byte {
			return ethAB6(IPv6{Src: kIP6A, Dst: kIP6B, FlowLabel: 0xfae95}.ICMPPacket(128, 0, 0x547e0001, k[62:]))
		}},
		{"mldv2-report-hop-by-hop", func(k []byte) []byte {
			h := IPv6{Dst: [16]byte{0xff, 0x02, 15: 0x16}, NextHeader: ProtoHopByHop, HopLimit: 1}
			rtalert := []byte{5, 2, 0, 0, 1, 0} // router alert (MLD), PadN
			return Frame([6]byte{0x33, 0x33, 0, 0, 0, 0x16}, kMACB, EtherTypeIPv6, h.Build(slices.Concat(Ext6(ProtoICMPv6, rtalert), h.ICMP(143, 0, 2, k[70:]))))
		}},
		{"ipv4-frag-first", func([]byte) []byte { return ethAB4(frag4.Build(icmp4[:1480])) }},
		{"ipv4-frag-later", func([]byte) []byte {
			h := frag4
			h.FragOff = 185
			return ethAB4(h.Build(icmp4[1480:2960]))
		}},
		{"ipv4-frag-last", func([]byte) []byte {
			h := frag4
			h.FragOff, h.MF = 370, false
			return ethAB4(h.Build(icmp4[2960:]))
		}},
		{"ipv6-frag-first", func([]byte) []byte {
			return ethAB6(h6.Build(slices.Concat(Frag6(ProtoICMPv6, 0, true, 0xfc26913a), icmp6[:1448])))
		}},
		{"ipv6-frag-later", func([]byte) []byte {
			return ethAB6(h6.Build(slices.Concat(Frag6(ProtoICMPv6, 181, true, 0xfc26913a), icmp6[1448:2896])))
		}},
		{"ipv6-frag-last", func([]byte) []byte {
			return ethAB6(h6.Build(slices.Concat(Frag6(ProtoICMPv6, 362, false, 0xfc26913a), icmp6[2896:])))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, ok := k[tc.name]
			if !ok {
				t.Fatalf("no frame %q in testdata", tc.name)
			}
			if diff := cmp.Diff(hex.EncodeToString(want), hex.EncodeToString(tc.build(want))); diff != "" {
				t.Errorf("frame (-kernel +frametest):\n%s", diff)
			}
		})
	}
}

func TestBuilders(t *testing.T) {
	mac1, mac2 := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	for _, tc := range []struct {
		name string
		got  []byte
		want string // hex
	}{
		{"ethernet with 802.1ad and 802.1q tags",
			Eth(mac2, mac1, EtherTypeARP, Tag{TPID: EtherTypeQinQ, TCI: 100}, Tag{TPID: EtherTypeVLAN, TCI: 0x2005}),
			"020000000002" + "020000000001" + "88a80064" + "81002005" + "0806"},
		{"pad to 60 bytes", Pad([]byte{1, 2, 3}), "010203" + strings.Repeat("00", 57)},
		{"pad leaves a long frame alone", Pad(make([]byte, 61)), strings.Repeat("00", 61)},
		{"ipv4 with options, ttl, tos, fragment",
			IPv4{Src: a, Dst: b, Proto: ProtoUDP, TTL: 3, TOS: 0xb8, ID: 0x1234, MF: true, FragOff: 0x11, Opts: []byte{0x94, 4, 0, 0}}.Build([]byte{0xaa}),
			"46b80019" + "1234" + "2011" + "0311" + "dbd0" + "0a000001" + "0a000002" + "94040000" + "aa"},
		{"ipv4 DF and default TTL", IPv4{Src: a, Dst: b, Proto: ProtoTCP, DF: true}.Build(nil),
			"45000014" + "0000" + "4000" + "4006" + "26e2" + "0a000001" + "0a000002"},
		{"ipv4 overrides for malformed headers", IPv4{Src: a, Dst: b, IHL: 4, TotalLen: 7, Version: 6}.Build(nil),
			"64000007" + "0000" + "0000" + "4000" + "47f5" + "0a000001" + "0a000002"},
		{"ipv4 ttl 0", IPv4{Src: a, Dst: b, TTL: 9, ZeroTTL: true}.Build(nil),
			"45000014" + "0000" + "0000" + "0000" + "a6e8" + "0a000001" + "0a000002"},
		{"udp without checksum", IPv4{Src: a, Dst: b}.UDPPacketNoChecksum(1, 2, []byte{0xee}),
			"4500001d" + "0000" + "0000" + "4011" + "66ce" + "0a000001" + "0a000002" + "0001" + "0002" + "0009" + "0000" + "ee"},
		// Pseudo header and header sum to 0x142b: a payload word of 0xebd4
		// makes the sum 0xffff, the checksum 0, which UDP sends as 0xffff.
		{"udp checksum 0 is sent as ffff", IPv4{Src: a, Dst: b}.UDP(1, 2, []byte{0xeb, 0xd4}), "0001" + "0002" + "000a" + "ffff" + "ebd4"},
		{"tcp with options", TCP{SrcPort: 1, DstPort: 2, Seq: 3, Ack: 4, Flags: 0x12, Window: 5, Urgent: 6, Opts: []byte{1, 1, 1, 0}}.Raw([]byte{9}),
			"0001" + "0002" + "00000003" + "00000004" + "6012" + "0005" + "0000" + "0006" + "01010100" + "09"},
		{"tcp data offset override", TCP{DataOff: 4}.Raw(nil), "0000000000000000000000004000000000000000"},
		{"icmp", ICMPv4(8, 0, 0x00010002, nil), "0800" + "f7fc" + "00010002"},
		{"arp frame is padded", ARPFrame(mac2, mac1, 2, mac1, a, mac2, b),
			"020000000002" + "020000000001" + "0806" + "0001080006040002" + "020000000001" + "0a000001" + "020000000002" + "0a000002" + strings.Repeat("00", 18)},
		{"ipv6 traffic class, flow label, hop limit", IPv6{Src: [16]byte{15: 1}, Dst: [16]byte{15: 2}, NextHeader: ProtoNoNext, HopLimit: 1, TrafficClass: 0xb8, FlowLabel: 0x12345}.Build(nil),
			"6b812345" + "0000" + "3b01" + strings.Repeat("00", 15) + "01" + strings.Repeat("00", 15) + "02"},
		{"ipv6 hop limit 0", IPv6{NextHeader: ProtoNoNext, ZeroHopLimit: true}.Build(nil), "60000000" + "0000" + "3b00" + strings.Repeat("00", 32)},
		{"ipv6 extension header padded to 8 bytes", Ext6(ProtoTCP, []byte{1, 2, 3}), "0600010203000000"},
		{"ipv6 extension header of 16 bytes", Ext6(ProtoUDP, make([]byte, 7)), "1101" + strings.Repeat("00", 14)},
		{"ipv6 fragment header", Frag6(ProtoUDP, 185, true, 0xdeadbeef), "1100" + "05c9" + "deadbeef"},
		{"ipv6 authentication header", AH6(ProtoTCP, 1, 2), "06040000" + "00000001" + "00000002" + strings.Repeat("00", 12)},
		{"payload pattern", Payload(4), "030a1118"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, hex.EncodeToString(tc.got)); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChecksumsVerify: every checksum a builder writes makes its header or
// segment sum to 0xffff with the pseudo header it belongs to.
func TestChecksumsVerify(t *testing.T) {
	a, b := [4]byte{192, 0, 2, 1}, [4]byte{198, 51, 100, 2}
	a6, b6 := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}, [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
	h4, h6 := IPv4{Src: a, Dst: b}, IPv6{Src: a6, Dst: b6}
	for _, n := range []int{0, 1, 2, 7, 64, 1001} {
		p := Payload(n)
		for _, tc := range []struct {
			name   string
			seg    []byte
			pseudo []byte
		}{
			{"ipv4 header", IPv4{Src: a, Dst: b, Opts: p[:n/4*4]}.Build(nil), nil},
			{"tcp over ipv4", h4.TCP(TCP{SrcPort: 1, Flags: 0x10}, p), Pseudo4(a, b, ProtoTCP, 20+n)},
			{"udp over ipv4", h4.UDP(1, 2, p), Pseudo4(a, b, ProtoUDP, 8+n)},
			{"icmp", ICMPv4(3, 3, 0, p), nil},
			{"tcp over ipv6", h6.TCP(TCP{SrcPort: 1, Flags: 0x10}, p), Pseudo6(a6, b6, ProtoTCP, 20+n)},
			{"udp over ipv6", h6.UDP(1, 2, p), Pseudo6(a6, b6, ProtoUDP, 8+n)},
			{"icmpv6", h6.ICMP(1, 4, 0, p), Pseudo6(a6, b6, ProtoICMPv6, 8+n)},
		} {
			if n > 40 && tc.name == "ipv4 header" {
				continue // options are at most 40 bytes
			}
			if s := Sum(tc.pseudo, tc.seg); s != 0xffff {
				t.Errorf("%s, %d payload bytes: sums to %#04x, want 0xffff", tc.name, n, s)
			}
		}
	}
}

// TestSumChunks: a sum over chunks is the sum of their concatenation,
// wherever the chunks split the words.
func TestSumChunks(t *testing.T) {
	b := Payload(37)
	want := Sum(b)
	for i := range len(b) + 1 {
		for j := i; j <= len(b); j++ {
			if got := Sum(b[:i], b[i:j], nil, b[j:]); got != want {
				t.Fatalf("Sum of chunks split at %d and %d = %#04x, want %#04x", i, j, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { Sum(b[:3], b[3:]) }); n != 0 {
		t.Errorf("Sum: %v allocs per run, want 0", n)
	}
}
