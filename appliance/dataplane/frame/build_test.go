package frame

// Test packet construction. Checksums here come from refChecksum, a plain
// 16-bit-at-a-time RFC 1071 implementation that shares no code with the
// package, so packets built here are an independent oracle.

import (
	"encoding/binary"
	"slices"
)

// refSum is the textbook RFC 1071 sum: big-endian 16-bit words, odd byte
// padded, carries folded at the end.
func refSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s
}

// refChecksum is the Internet checksum of the concatenation of chunks (each
// but the last of even length).
func refChecksum(chunks ...[]byte) uint16 {
	return ^uint16(refSum(slices.Concat(chunks...)))
}

type mac = [6]byte

var (
	macA      = mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x0a}
	macB      = mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x0b}
	macBcast  = mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ip4A      = [4]byte{192, 168, 1, 100}
	ip4B      = [4]byte{192, 168, 1, 1}
	ip6A      = [16]byte{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a}
	ip6B      = [16]byte{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b}
	ip6LLA    = [16]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x0a}
	ip6SolB   = [16]byte{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x0b}
	ip4Zero   = [4]byte{}
	ip4Bcast  = [4]byte{255, 255, 255, 255}
	ip4IGMPv2 = [4]byte{224, 0, 0, 251}
)

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// eth returns an Ethernet header with optional tags (outermost first) and
// the final EtherType.
func eth(dst, src mac, etype uint16, tags ...VLANTag) []byte {
	b := slices.Concat(dst[:], src[:])
	for _, t := range tags {
		b = append(b, be16(t.TPID)...)
		b = append(b, be16(t.TCI)...)
	}
	return append(b, be16(etype)...)
}

// pad pads a frame to the 60-byte Ethernet minimum (without FCS).
func pad(b []byte) []byte {
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}

type v4 struct {
	src, dst [4]byte
	proto    uint8
	ttl      uint8
	tos      uint8
	id       uint16
	df, mf   bool
	fragOff  uint16 // 8-byte units
	opts     []byte // multiple of 4 bytes
	// Overrides for malformed packets; 0 means computed.
	ihl      uint8
	totalLen uint16
	version  uint8
}

func (h v4) build(payload []byte) []byte {
	ihl := h.ihl
	if ihl == 0 {
		ihl = uint8(5 + len(h.opts)/4)
	}
	ver := h.version
	if ver == 0 {
		ver = 4
	}
	tl := h.totalLen
	if tl == 0 {
		tl = uint16(20 + len(h.opts) + len(payload))
	}
	fo := h.fragOff
	if h.df {
		fo |= 0x4000
	}
	if h.mf {
		fo |= 0x2000
	}
	b := []byte{ver<<4 | ihl, h.tos}
	b = append(b, be16(tl)...)
	b = append(b, be16(h.id)...)
	b = append(b, be16(fo)...)
	b = append(b, h.ttl, h.proto, 0, 0)
	b = append(b, h.src[:]...)
	b = append(b, h.dst[:]...)
	b = append(b, h.opts...)
	binary.BigEndian.PutUint16(b[10:], refChecksum(b))
	return append(b, payload...)
}

func (h v4) pseudo(proto uint8, n int) []byte {
	p := slices.Concat(h.src[:], h.dst[:], []byte{0, proto})
	return append(p, be16(uint16(n))...)
}

type v6 struct {
	src, dst [16]byte
	nh       uint8
	hop      uint8
	tc       uint8
	flow     uint32
	plen     uint16 // override, 0 means computed
	version  uint8
}

func (h v6) build(payload []byte) []byte {
	ver := h.version
	if ver == 0 {
		ver = 6
	}
	plen := h.plen
	if plen == 0 {
		plen = uint16(len(payload))
	}
	b := be32(uint32(ver)<<28 | uint32(h.tc)<<20 | h.flow)
	b = append(b, be16(plen)...)
	b = append(b, h.nh, h.hop)
	b = append(b, h.src[:]...)
	b = append(b, h.dst[:]...)
	return append(b, payload...)
}

func pseudo6(src, dst [16]byte, proto uint8, n int) []byte {
	p := slices.Concat(src[:], dst[:])
	p = append(p, be32(uint32(n))...)
	return append(p, 0, 0, 0, proto)
}

// withCsum stores the checksum of pseudo+seg at seg[at:] and returns seg.
func withCsum(seg []byte, at int, pseudo []byte) []byte {
	seg = slices.Clone(seg)
	seg[at], seg[at+1] = 0, 0
	binary.BigEndian.PutUint16(seg[at:], refChecksum(pseudo, seg))
	return seg
}

type tcpH struct {
	sport, dport uint16
	seq, ack     uint32
	flags        uint8
	win          uint16
	urg          uint16
	opts         []byte // multiple of 4
	dataOff      uint8  // override
}

// raw returns the TCP header and payload with a zero checksum.
func (t tcpH) raw(payload []byte) []byte {
	off := t.dataOff
	if off == 0 {
		off = uint8(5 + len(t.opts)/4)
	}
	b := slices.Concat(be16(t.sport), be16(t.dport), be32(t.seq), be32(t.ack))
	b = append(b, off<<4, t.flags)
	b = append(b, be16(t.win)...)
	b = append(b, 0, 0)
	b = append(b, be16(t.urg)...)
	b = append(b, t.opts...)
	return append(b, payload...)
}

func udpRaw(sport, dport uint16, payload []byte) []byte {
	b := slices.Concat(be16(sport), be16(dport), be16(uint16(8+len(payload))), []byte{0, 0})
	return append(b, payload...)
}

func icmpRaw(typ, code uint8, rest uint32, payload []byte) []byte {
	b := append([]byte{typ, code, 0, 0}, be32(rest)...)
	return append(b, payload...)
}

// Transport segments over IPv4/IPv6 with correct checksums.
func (h v4) tcp(t tcpH, payload []byte) []byte {
	seg := t.raw(payload)
	return withCsum(seg, 16, h.pseudo(ProtoTCP, len(seg)))
}

func (h v4) udp(sport, dport uint16, payload []byte) []byte {
	seg := udpRaw(sport, dport, payload)
	return withCsum(seg, 6, h.pseudo(ProtoUDP, len(seg)))
}

func icmp4(typ, code uint8, rest uint32, payload []byte) []byte {
	return withCsum(icmpRaw(typ, code, rest, payload), 2, nil)
}

func (h v6) tcp(t tcpH, payload []byte) []byte {
	seg := t.raw(payload)
	return withCsum(seg, 16, pseudo6(h.src, h.dst, ProtoTCP, len(seg)))
}

func (h v6) udp(sport, dport uint16, payload []byte) []byte {
	seg := udpRaw(sport, dport, payload)
	return withCsum(seg, 6, pseudo6(h.src, h.dst, ProtoUDP, len(seg)))
}

func (h v6) icmp(typ, code uint8, rest uint32, payload []byte) []byte {
	seg := icmpRaw(typ, code, rest, payload)
	return withCsum(seg, 2, pseudo6(h.src, h.dst, ProtoICMPv6, len(seg)))
}

// ext6 builds an IPv6 extension header (hop-by-hop, routing, destination
// options) of 8*(len8+1) bytes; body fills the bytes after the first two.
func ext6(nh uint8, body []byte) []byte {
	n := (2 + len(body) + 7) / 8 * 8
	b := make([]byte, n)
	b[0] = nh
	b[1] = uint8(n/8 - 1)
	copy(b[2:], body)
	return b
}

// ah6 builds an authentication header with a 12-byte ICV.
func ah6(nh uint8, spi, seq uint32) []byte {
	b := []byte{nh, 4, 0, 0} // (4+2)*4 = 24 bytes
	b = append(b, be32(spi)...)
	b = append(b, be32(seq)...)
	return append(b, make([]byte, 12)...)
}

// frag6 builds a fragment header.
func frag6(nh uint8, off uint16, more bool, id uint32) []byte {
	fo := off << 3
	if more {
		fo |= 1
	}
	return slices.Concat([]byte{nh, 0}, be16(fo), be32(id))
}

// payloadBytes returns n bytes of a recognisable pattern.
func payloadBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}
