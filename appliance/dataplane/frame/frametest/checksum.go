package frametest

import "slices"

// The reference checksum: RFC 1071 as the RFC's own section 4.1 writes it,
// one big-endian 16-bit word at a time into a wide accumulator. It is
// deliberately slow and plain, and shares nothing with package frame, whose
// checksums it exists to check.

// Sum returns the one's complement sum of the concatenation of chunks, not
// complemented: big-endian 16-bit words, an odd final byte padded with a
// zero byte, the carries folded back in at the end. A word may straddle two
// chunks. It does not allocate.
func Sum(chunks ...[]byte) uint16 {
	var s uint64
	high := -1 // a word's high byte, when the chunk ended after it
	for _, b := range chunks {
		if high >= 0 && len(b) > 0 {
			s += uint64(high)<<8 | uint64(b[0])
			b, high = b[1:], -1
		}
		i := 0
		for ; i+1 < len(b); i += 2 {
			s += uint64(b[i])<<8 | uint64(b[i+1])
		}
		if i < len(b) {
			high = int(b[i])
		}
	}
	if high >= 0 {
		s += uint64(high) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// Checksum returns the Internet checksum of the concatenation of chunks: the
// complement of Sum. A packet whose checksum field holds it sums to 0xffff.
func Checksum(chunks ...[]byte) uint16 { return ^Sum(chunks...) }

// Pseudo4 returns the IPv4 pseudo header (RFC 793 3.1, RFC 768) of a
// transport segment of n bytes.
func Pseudo4(src, dst [4]byte, proto uint8, n int) []byte {
	return slices.Concat(src[:], dst[:], []byte{0, proto}, be16(uint16(n)))
}

// Pseudo6 returns the IPv6 pseudo header (RFC 8200 8.1) of an upper-layer
// packet of n bytes.
func Pseudo6(src, dst [16]byte, proto uint8, n int) []byte {
	return slices.Concat(src[:], dst[:], be32(uint32(n)), []byte{0, 0, 0, proto})
}

// WithChecksum returns a copy of seg with the checksum of pseudo and seg
// stored at seg[at:at+2] (the field counted as zero).
func WithChecksum(seg []byte, at int, pseudo []byte) []byte {
	seg = slices.Clone(seg)
	seg[at], seg[at+1] = 0, 0
	c := Checksum(pseudo, seg)
	seg[at], seg[at+1] = byte(c>>8), byte(c)
	return seg
}

func be16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }
func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
