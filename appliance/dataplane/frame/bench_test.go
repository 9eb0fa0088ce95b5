package frame

import (
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame/frametest"
)

func benchParse(b *testing.B, pkt []byte) {
	var f Frame
	if err := Parse(pkt, &f); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Parse(pkt, &f)
	}
}

func BenchmarkParseUDPv4(b *testing.B) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64}
	benchParse(b, slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.UDP(5000, 53, frametest.Payload(18)))))
}

func BenchmarkParseTCPv6(b *testing.B) {
	ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoTCP, HopLimit: 64}
	benchParse(b, slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6),
		ip.Build(ip.TCP(frametest.TCP{SrcPort: 443, DstPort: 40000, Flags: TCPAck, Opts: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}}, frametest.Payload(1200)))))
}

func BenchmarkParseQinQTCPv4(b *testing.B) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoTCP, TTL: 64}
	benchParse(b, slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4, frametest.Tag{TPID: EtherTypeQinQ, TCI: 100}, frametest.Tag{TPID: EtherTypeVLAN, TCI: 200}),
		ip.Build(ip.TCP(frametest.TCP{SrcPort: 1, DstPort: 80, Flags: TCPSyn, Opts: synOpts}, nil))))
}

func BenchmarkParseWithTagUDPv4(b *testing.B) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64}
	pkt := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.UDP(5000, 53, frametest.Payload(18))))
	var f Frame
	b.ReportAllocs()
	for b.Loop() {
		_ = ParseWithTag(pkt, VLANTag{TCI: 10}, &f)
	}
}

func BenchmarkParseIPv6ExtFragment(b *testing.B) {
	ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoHopByHop, HopLimit: 64}
	dgram := ip.UDP(5000, 6000, frametest.Payload(1000))
	benchParse(b, slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6),
		ip.Build(slices.Concat(frametest.Ext6(ProtoFragment, []byte{5, 2, 0, 0, 1, 0}), frametest.Frag6(ProtoUDP, 0, true, 1), dgram[:520]))))
}

func BenchmarkSum1500(b *testing.B) {
	buf := frametest.Payload(1500)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Sum(buf, 0)
	}
}

// BenchmarkSum1500Reference is the textbook 16-bit loop, for comparison.
func BenchmarkSum1500Reference(b *testing.B) {
	buf := frametest.Payload(1500)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		_ = frametest.Sum(buf)
	}
}

func BenchmarkVerifyChecksumsTCPv4(b *testing.B) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoTCP, TTL: 64}
	pkt := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.TCP(frametest.TCP{SrcPort: 1, DstPort: 80, Flags: TCPAck}, frametest.Payload(1460))))
	var f Frame
	if err := Parse(pkt, &f); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if VerifyChecksums(pkt, &f) != nil {
			b.Fatal("bad checksum")
		}
	}
}

// BenchmarkNATRewriteTCPv4 is a source NAT of one packet: address and port
// with incremental checksum updates, plus the TTL decrement.
func BenchmarkNATRewriteTCPv4(b *testing.B) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoTCP, TTL: 255}
	pkt := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.TCP(frametest.TCP{SrcPort: 1, DstPort: 80, Flags: TCPAck}, frametest.Payload(100))))
	var f Frame
	if err := Parse(pkt, &f); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		SetIPv4Src(pkt, &f, [4]byte{10, 0, byte(i >> 8), byte(i)})
		SetSrcPort(pkt, &f, uint16(i))
		pkt[f.L3Off+8] = 64 // keep DecTTL working
		DecTTL(pkt, &f)
	}
}
