package frametest

import "slices"

// IPv4 describes an IPv4 header (RFC 791).
type IPv4 struct {
	Src, Dst [4]byte
	Proto    uint8
	TTL      uint8 // 0 means DefaultTTL
	ZeroTTL  bool  // a TTL of 0, which TTL cannot say
	TOS      uint8
	ID       uint16
	DF, MF   bool
	FragOff  uint16 // fragment offset in 8-byte units
	Opts     []byte // options, a multiple of 4 bytes
	// Overrides for malformed headers; 0 means the right value.
	IHL      uint8
	TotalLen uint16
	Version  uint8
}

// Build returns the header, with its checksum, followed by payload.
func (h IPv4) Build(payload []byte) []byte {
	ihl := h.IHL
	if ihl == 0 {
		ihl = uint8(5 + len(h.Opts)/4)
	}
	tl := h.TotalLen
	if tl == 0 {
		tl = uint16(20 + len(h.Opts) + len(payload))
	}
	fo := h.FragOff
	if h.DF {
		fo |= 0x4000
	}
	if h.MF {
		fo |= 0x2000
	}
	b := []byte{or(h.Version, 4)<<4 | ihl, h.TOS}
	b = slices.Concat(b, be16(tl), be16(h.ID), be16(fo), []byte{ttl(h.TTL, h.ZeroTTL), h.Proto, 0, 0}, h.Src[:], h.Dst[:], h.Opts)
	c := Checksum(b)
	b[10], b[11] = byte(c>>8), byte(c)
	return append(b, payload...)
}

// TCP returns a TCP segment with its checksum over h's addresses.
func (h IPv4) TCP(t TCP, payload []byte) []byte { return tcpSegment(h, t, payload) }

// UDP returns a UDP datagram with its checksum over h's addresses.
func (h IPv4) UDP(sport, dport uint16, payload []byte) []byte {
	return udpDatagram(h, sport, dport, payload)
}

func (h IPv4) pseudo(proto uint8, n int) []byte { return Pseudo4(h.Src, h.Dst, proto, n) }

// TCPPacket returns the IPv4 packet h (protocol TCP) carrying h.TCP(t, payload).
func (h IPv4) TCPPacket(t TCP, payload []byte) []byte {
	h.Proto = ProtoTCP
	return h.Build(h.TCP(t, payload))
}

// UDPPacket returns the IPv4 packet h (protocol UDP) carrying h.UDP(sport,
// dport, payload).
func (h IPv4) UDPPacket(sport, dport uint16, payload []byte) []byte {
	h.Proto = ProtoUDP
	return h.Build(h.UDP(sport, dport, payload))
}

// UDPPacketNoChecksum is UDPPacket with the UDP checksum 0: none (RFC 768).
func (h IPv4) UDPPacketNoChecksum(sport, dport uint16, payload []byte) []byte {
	h.Proto = ProtoUDP
	return h.Build(UDPRaw(sport, dport, payload))
}

// ICMPPacket returns the IPv4 packet h (protocol ICMP) carrying
// ICMPv4(typ, code, rest, payload).
func (h IPv4) ICMPPacket(typ, code uint8, rest uint32, payload []byte) []byte {
	h.Proto = ProtoICMP
	return h.Build(ICMPv4(typ, code, rest, payload))
}

// IPv6 describes an IPv6 fixed header (RFC 8200); extension headers go in
// the payload (Ext6, AH6, Frag6).
type IPv6 struct {
	Src, Dst     [16]byte
	NextHeader   uint8
	HopLimit     uint8 // 0 means DefaultTTL
	ZeroHopLimit bool  // a hop limit of 0, which HopLimit cannot say
	TrafficClass uint8
	FlowLabel    uint32
	// Overrides for malformed headers; 0 means the right value.
	PayloadLen uint16
	Version    uint8
}

// Build returns the header followed by payload.
func (h IPv6) Build(payload []byte) []byte {
	plen := h.PayloadLen
	if plen == 0 {
		plen = uint16(len(payload))
	}
	b := be32(uint32(or(h.Version, 6))<<28 | uint32(h.TrafficClass)<<20 | h.FlowLabel&0xfffff)
	b = slices.Concat(b, be16(plen), []byte{h.NextHeader, ttl(h.HopLimit, h.ZeroHopLimit)}, h.Src[:], h.Dst[:])
	return append(b, payload...)
}

// TCP returns a TCP segment with its checksum over h's addresses.
func (h IPv6) TCP(t TCP, payload []byte) []byte { return tcpSegment(h, t, payload) }

// UDP returns a UDP datagram with its checksum over h's addresses.
func (h IPv6) UDP(sport, dport uint16, payload []byte) []byte {
	return udpDatagram(h, sport, dport, payload)
}

// ICMP returns an ICMPv6 message (RFC 4443) with its checksum over h's
// addresses.
func (h IPv6) ICMP(typ, code uint8, rest uint32, payload []byte) []byte {
	seg := ICMPRaw(typ, code, rest, payload)
	return WithChecksum(seg, 2, h.pseudo(ProtoICMPv6, len(seg)))
}

func (h IPv6) pseudo(proto uint8, n int) []byte { return Pseudo6(h.Src, h.Dst, proto, n) }

// ipHeader is an IPv4 or IPv6 header: what a transport checksum covers of it.
type ipHeader interface {
	pseudo(proto uint8, n int) []byte
}

func tcpSegment(h ipHeader, t TCP, payload []byte) []byte {
	seg := t.Raw(payload)
	return WithChecksum(seg, 16, h.pseudo(ProtoTCP, len(seg)))
}

func udpDatagram(h ipHeader, sport, dport uint16, payload []byte) []byte {
	seg := UDPRaw(sport, dport, payload)
	seg = WithChecksum(seg, 6, h.pseudo(ProtoUDP, len(seg)))
	if seg[6] == 0 && seg[7] == 0 {
		seg[6], seg[7] = 0xff, 0xff // 0 means none: a computed 0 is sent as 0xffff (RFC 768, RFC 8200 8.1)
	}
	return seg
}

// TCPPacket returns the IPv6 packet h (next header TCP) carrying
// h.TCP(t, payload).
func (h IPv6) TCPPacket(t TCP, payload []byte) []byte {
	h.NextHeader = ProtoTCP
	return h.Build(h.TCP(t, payload))
}

// UDPPacket returns the IPv6 packet h (next header UDP) carrying
// h.UDP(sport, dport, payload).
func (h IPv6) UDPPacket(sport, dport uint16, payload []byte) []byte {
	h.NextHeader = ProtoUDP
	return h.Build(h.UDP(sport, dport, payload))
}

// ICMPPacket returns the IPv6 packet h (next header ICMPv6) carrying
// h.ICMP(typ, code, rest, payload).
func (h IPv6) ICMPPacket(typ, code uint8, rest uint32, payload []byte) []byte {
	h.NextHeader = ProtoICMPv6
	return h.Build(h.ICMP(typ, code, rest, payload))
}

// Ext6 returns an IPv6 hop-by-hop, routing or destination options header
// of 8*(n+1) bytes: next header nh, the length byte, then body, zero-padded
// to a multiple of 8 bytes.
func Ext6(nh uint8, body []byte) []byte {
	n := (2 + len(body) + 7) / 8 * 8
	b := make([]byte, n)
	b[0] = nh
	b[1] = uint8(n/8 - 1)
	copy(b[2:], body)
	return b
}

// AH6 returns an authentication header (RFC 4302) with a 12-byte ICV of
// zeros.
func AH6(nh uint8, spi, seq uint32) []byte {
	return slices.Concat([]byte{nh, 4, 0, 0}, be32(spi), be32(seq), make([]byte, 12)) // (4+2)*4 = 24 bytes
}

// Frag6 returns an IPv6 fragment header: offset in 8-byte units, more
// fragments, identification.
func Frag6(nh uint8, off uint16, more bool, id uint32) []byte {
	fo := off << 3
	if more {
		fo |= 1
	}
	return slices.Concat([]byte{nh, 0}, be16(fo), be32(id))
}

// or returns v, or def when v is 0.
func or(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

// ttl returns the TTL (hop limit) field for v: DefaultTTL for 0 unless zero.
func ttl(v uint8, zero bool) uint8 {
	if zero {
		return 0
	}
	return or(v, DefaultTTL)
}
