package frame

import (
	"encoding/binary"
	"math/bits"
)

// Sum returns the 16-bit one's complement sum (RFC 1071) of b added to
// initial, not complemented. An odd trailing byte is padded with zero, so when
// chaining Sum over pieces only the last piece may have odd length. It reads
// 8 bytes at a time: the one's complement sum does not depend on byte order,
// so it adds little-endian 64-bit words and swaps the folded result.
func Sum(b []byte, initial uint16) uint16 {
	var s, c uint64
	s = uint64(bits.ReverseBytes16(initial))
	for len(b) >= 32 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:16]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:24]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		s, c = bits.Add64(s, uint64(binary.LittleEndian.Uint32(b[0:4])), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		s, c = bits.Add64(s, uint64(binary.LittleEndian.Uint16(b[0:2])), c)
		b = b[2:]
	}
	if len(b) == 1 {
		s, c = bits.Add64(s, uint64(b[0]), c)
	}
	s, c = bits.Add64(s, 0, c)
	s += c // s was all ones only if c is 0
	return bits.ReverseBytes16(fold64(s))
}

// fold64 folds a 64-bit one's complement accumulator to 16 bits.
func fold64(s uint64) uint16 {
	s = s&0xffffffff + s>>32
	s = s&0xffffffff + s>>32
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// Checksum returns the Internet checksum of b with initial folded in: the
// complement of Sum(b, initial). initial is typically a pseudo-header sum.
func Checksum(b []byte, initial uint16) uint16 { return ^Sum(b, initial) }

// PseudoSumIPv4 returns the sum of the IPv4 pseudo header (RFC 793/768) for
// a transport segment of the given length.
func PseudoSumIPv4(src, dst [4]byte, proto uint8, length uint16) uint16 {
	s := uint32(src[0])<<8 | uint32(src[1])
	s += uint32(src[2])<<8 | uint32(src[3])
	s += uint32(dst[0])<<8 | uint32(dst[1])
	s += uint32(dst[2])<<8 | uint32(dst[3])
	s += uint32(proto) + uint32(length)
	return fold64(uint64(s))
}

// PseudoSumIPv6 returns the sum of the IPv6 pseudo header (RFC 8200 8.1) for
// an upper-layer packet of the given length.
func PseudoSumIPv6(src, dst [16]byte, proto uint8, length uint32) uint16 {
	var s uint64
	for i := 0; i < 16; i += 4 {
		s += uint64(binary.BigEndian.Uint32(src[i:]))
		s += uint64(binary.BigEndian.Uint32(dst[i:]))
	}
	s += uint64(length) + uint64(proto)
	return fold64(s)
}

// IPv4HeaderChecksum computes the checksum of the IPv4 header hdr (IHL*4
// bytes), treating its checksum field as zero. It returns 0 when hdr is
// shorter than 20 bytes.
func IPv4HeaderChecksum(hdr []byte) uint16 {
	if len(hdr) < IPv4HeaderLen {
		return 0
	}
	return ^Sum(hdr[12:], Sum(hdr[:10], 0))
}

// VerifyIPv4Header reports whether the IPv4 header hdr (IHL*4 bytes) has a
// correct checksum.
func VerifyIPv4Header(hdr []byte) bool {
	return len(hdr) >= IPv4HeaderLen && Sum(hdr, 0) == 0xffff
}

// IPv4HeaderValid reports whether the IPv4 header of the parsed frame has a
// correct checksum; false for non-IPv4 frames.
func IPv4HeaderValid(b []byte, f *Frame) bool {
	if !f.IsIPv4() || f.IPv4.IHL < 5 {
		return false
	}
	end := f.L3Off + int(f.IPv4.IHL)*4
	if end > len(b) {
		return false
	}
	return VerifyIPv4Header(b[f.L3Off:end])
}

// l4Checksum locates the transport checksum of f: its offset in the frame and
// whether the pseudo header covers it. ok is false when there is no TCP, UDP,
// ICMP or ICMPv6 header.
func l4Checksum(f *Frame) (off int, pseudo bool, ok bool) {
	if f.L4Off == 0 {
		return 0, false, false
	}
	switch {
	case f.Proto == ProtoTCP:
		return f.L4Off + 16, true, true
	case f.Proto == ProtoUDP:
		return f.L4Off + 6, true, true
	case f.Proto == ProtoICMP && f.IsIPv4():
		return f.L4Off + 2, false, true
	case f.Proto == ProtoICMPv6 && f.IsIPv6():
		return f.L4Off + 2, true, true
	}
	return 0, false, false
}

// pseudoSum returns the pseudo header sum of f for a segment of length n.
func pseudoSum(f *Frame, n int) uint16 {
	if f.IsIPv4() {
		return PseudoSumIPv4(f.IPv4.Src, f.IPv4.Dst, f.Proto, uint16(n))
	}
	return PseudoSumIPv6(f.IPv6.Src, f.IPv6.Dst, f.Proto, uint32(n))
}

// L4Checksum computes the checksum the TCP, UDP, ICMP or ICMPv6 header of f
// should carry (its own checksum field counted as zero; a UDP result of 0 is
// returned as 0xffff). ok is false when it cannot be computed from this
// frame: no such header, or a fragment (the checksum covers the whole
// datagram).
func L4Checksum(b []byte, f *Frame) (csum uint16, ok bool) {
	off, pseudo, ok := l4Checksum(f)
	if !ok || f.Fragment || f.L3End > len(b) || off+2 > f.L3End {
		return 0, false
	}
	seg := b[f.L4Off:f.L3End]
	var s uint16
	if pseudo {
		s = pseudoSum(f, len(seg))
	}
	// Sum around the stored field (it is at an even offset of seg).
	// Subtracting it instead would give 0x0000 for all-zero data, where
	// 0xffff is the only checksum that verifies.
	rel := off - f.L4Off
	s = Sum(seg[rel+2:], Sum(seg[:rel], s))
	csum = ^s
	if csum == 0 && f.Proto == ProtoUDP {
		csum = 0xffff
	}
	return csum, true
}

// VerifyChecksums checks the IPv4 header checksum and, when the frame is not
// a fragment, the TCP/UDP/ICMP/ICMPv6 checksum. A zero UDP checksum over IPv4
// means "none" and passes. It returns ErrBadChecksum or nil.
func VerifyChecksums(b []byte, f *Frame) error {
	if f.IsIPv4() && !IPv4HeaderValid(b, f) {
		return ErrBadChecksum
	}
	off, pseudo, ok := l4Checksum(f)
	if !ok || f.Fragment || f.L3End > len(b) || off+2 > f.L3End {
		return nil
	}
	if f.Proto == ProtoUDP && f.IsIPv4() && f.UDP.Checksum == 0 {
		return nil
	}
	seg := b[f.L4Off:f.L3End]
	var s uint16
	if pseudo {
		s = pseudoSum(f, len(seg))
	}
	if Sum(seg, s) != 0xffff {
		return ErrBadChecksum
	}
	return nil
}

// SetChecksums recomputes and stores the IPv4 header checksum and the
// transport checksum of the parsed frame in b, and updates f to match. The
// transport checksum is left alone for fragments and unknown protocols, and a
// zero UDP checksum over IPv4 (none) stays zero.
func SetChecksums(b []byte, f *Frame) {
	if f.IsIPv4() && f.IPv4.IHL >= 5 && f.L3Off+int(f.IPv4.IHL)*4 <= len(b) {
		c := IPv4HeaderChecksum(b[f.L3Off : f.L3Off+int(f.IPv4.IHL)*4])
		binary.BigEndian.PutUint16(b[f.L3Off+10:], c)
		f.IPv4.Checksum = c
	}
	if f.Proto == ProtoUDP && f.IsIPv4() && f.UDP.Checksum == 0 {
		return
	}
	c, ok := L4Checksum(b, f)
	if !ok {
		return
	}
	off, _, _ := l4Checksum(f)
	binary.BigEndian.PutUint16(b[off:], c)
	f.setL4Checksum(c)
}

// setL4Checksum records a new transport checksum in f.
func (f *Frame) setL4Checksum(c uint16) {
	switch f.Proto {
	case ProtoTCP:
		f.TCP.Checksum = c
	case ProtoUDP:
		f.UDP.Checksum = c
	default:
		f.ICMP.Checksum = c
	}
}

// Update16 returns the checksum csum adjusted for one 16-bit word of the
// covered data changing from "from" to "to" (RFC 1624, eqn. 3). The result equals
// a full recompute except when the covered data before or after the change
// are all zero: then it gives 0x0000 where a recompute gives 0xffff. That
// cannot happen under an IPv4 header or a pseudo header; SetICMPEchoID
// handles the one case it can (an all-zero ICMPv4 echo reply).
func Update16(csum, from, to uint16) uint16 {
	s := uint32(^csum) + uint32(^from) + uint32(to)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}

// Update32 is Update16 for a 32-bit value (an IPv4 address, a port pair)
// aligned on a 16-bit word boundary of the covered data.
func Update32(csum uint16, from, to uint32) uint16 {
	s := uint64(^csum) + uint64(^uint16(from>>16)) + uint64(^uint16(from)) +
		uint64(to>>16) + uint64(to&0xffff)
	return ^fold64(s)
}

// UpdateBytes is Update16 for a run of bytes (an IPv6 address) starting on a
// 16-bit word boundary of the covered data. from and to must have the same
// length; an odd length is treated as zero-padded.
func UpdateBytes(csum uint16, from, to []byte) uint16 {
	s := uint32(^csum) + uint32(^Sum(from, 0))
	return ^Sum(to, uint16(s+s>>16))
}

// UpdateUDP16 is Update16 for a UDP checksum: 0 means "no checksum" (IPv4)
// and stays 0, and a computed 0 is sent as 0xffff (RFC 768).
func UpdateUDP16(csum, from, to uint16) uint16 {
	if csum == 0 {
		return 0
	}
	if c := Update16(csum, from, to); c != 0 {
		return c
	}
	return 0xffff
}

// UpdateUDP32 is Update32 for a UDP checksum, with the rules of UpdateUDP16.
func UpdateUDP32(csum uint16, from, to uint32) uint16 {
	if csum == 0 {
		return 0
	}
	if c := Update32(csum, from, to); c != 0 {
		return c
	}
	return 0xffff
}
