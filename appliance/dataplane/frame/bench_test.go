package frame

import (
	"slices"
	"testing"
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
	ip := v4{src: ip4A, dst: ip4B, proto: ProtoUDP, ttl: 64}
	benchParse(b, slices.Concat(eth(macB, macA, EtherTypeIPv4), ip.build(ip.udp(5000, 53, payloadBytes(18)))))
}

func BenchmarkParseTCPv6(b *testing.B) {
	ip := v6{src: ip6A, dst: ip6B, nh: ProtoTCP, hop: 64}
	benchParse(b, slices.Concat(eth(macB, macA, EtherTypeIPv6),
		ip.build(ip.tcp(tcpH{sport: 443, dport: 40000, flags: TCPAck, opts: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}}, payloadBytes(1200)))))
}

func BenchmarkParseQinQTCPv4(b *testing.B) {
	ip := v4{src: ip4A, dst: ip4B, proto: ProtoTCP, ttl: 64}
	benchParse(b, slices.Concat(eth(macB, macA, EtherTypeIPv4, VLANTag{TPID: EtherTypeQinQ, TCI: 100}, VLANTag{TPID: EtherTypeVLAN, TCI: 200}),
		ip.build(ip.tcp(tcpH{sport: 1, dport: 80, flags: TCPSyn, opts: synOpts}, nil))))
}

func BenchmarkParseWithTagUDPv4(b *testing.B) {
	ip := v4{src: ip4A, dst: ip4B, proto: ProtoUDP, ttl: 64}
	pkt := slices.Concat(eth(macB, macA, EtherTypeIPv4), ip.build(ip.udp(5000, 53, payloadBytes(18))))
	var f Frame
	b.ReportAllocs()
	for b.Loop() {
		_ = ParseWithTag(pkt, VLANTag{TCI: 10}, &f)
	}
}

func BenchmarkParseIPv6ExtFragment(b *testing.B) {
	ip := v6{src: ip6A, dst: ip6B, nh: ProtoHopByHop, hop: 64}
	dgram := ip.udp(5000, 6000, payloadBytes(1000))
	benchParse(b, slices.Concat(eth(macB, macA, EtherTypeIPv6),
		ip.build(slices.Concat(ext6(ProtoFragment, []byte{5, 2, 0, 0, 1, 0}), frag6(ProtoUDP, 0, true, 1), dgram[:520]))))
}

func BenchmarkSum1500(b *testing.B) {
	buf := payloadBytes(1500)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Sum(buf, 0)
	}
}

// BenchmarkSum1500Reference is the textbook 16-bit loop, for comparison.
func BenchmarkSum1500Reference(b *testing.B) {
	buf := payloadBytes(1500)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		_ = refSum(buf)
	}
}

func BenchmarkVerifyChecksumsTCPv4(b *testing.B) {
	ip := v4{src: ip4A, dst: ip4B, proto: ProtoTCP, ttl: 64}
	pkt := slices.Concat(eth(macB, macA, EtherTypeIPv4), ip.build(ip.tcp(tcpH{sport: 1, dport: 80, flags: TCPAck}, payloadBytes(1460))))
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
	ip := v4{src: ip4A, dst: ip4B, proto: ProtoTCP, ttl: 255}
	pkt := slices.Concat(eth(macB, macA, EtherTypeIPv4), ip.build(ip.tcp(tcpH{sport: 1, dport: 80, flags: TCPAck}, payloadBytes(100))))
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
