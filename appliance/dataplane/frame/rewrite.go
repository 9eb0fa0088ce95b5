package frame

import "encoding/binary"

// The Set* helpers rewrite header fields of a frame that Parse filled f from,
// in place, fixing every checksum that covers the field incrementally
// (RFC 1624) and keeping f in step. They report false and change nothing when
// the field does not exist in the frame (or b is not the parsed frame).

// adjustL4 folds a change of covered data from 'from' to 'to' into the
// transport checksum when the header is present. pseudoOnly marks a change in
// the pseudo header (addresses), which ICMPv4 does not cover.
func adjustL4(b []byte, f *Frame, from, to []byte, pseudoOnly bool) {
	off, pseudo, ok := l4Checksum(f)
	if !ok || pseudoOnly && !pseudo || off+2 > len(b) {
		return
	}
	old := binary.BigEndian.Uint16(b[off:])
	var c uint16
	if f.Proto == ProtoUDP {
		if old == 0 {
			return // no checksum (IPv4); stays none
		}
		if c = UpdateBytes(old, from, to); c == 0 {
			c = 0xffff
		}
	} else {
		c = UpdateBytes(old, from, to)
	}
	binary.BigEndian.PutUint16(b[off:], c)
	f.setL4Checksum(c)
}

func (f *Frame) fits(b []byte) bool { return f.L3End <= len(b) && f.L3End > f.L3Off }

// addrField returns the n bytes at L3Off+at of f's IPv4 (v6 false) or
// IPv6 header: an address. It is nil when f has no such header in b.
func (f *Frame) addrField(b []byte, v6 bool, at, n int) []byte {
	hlen, ok := IPv4HeaderLen, f.IsIPv4()
	if v6 {
		hlen, ok = IPv6HeaderLen, f.IsIPv6()
	}
	if !ok || !f.fits(b) || f.L3Off+hlen > f.L3End {
		return nil
	}
	return b[f.L3Off+at : f.L3Off+at+n]
}

// setIPv4Addr rewrites the 4 bytes at L3Off+at (12 source, 16
// destination), which f holds in *fa.
func setIPv4Addr(b []byte, f *Frame, at int, a [4]byte, fa *[4]byte) bool {
	p := f.addrField(b, false, at, 4)
	if p == nil {
		return false
	}
	old := binary.BigEndian.Uint32(p)
	adjustL4(b, f, p, a[:], true)
	c := Update32(binary.BigEndian.Uint16(b[f.L3Off+10:]), old, binary.BigEndian.Uint32(a[:]))
	binary.BigEndian.PutUint16(b[f.L3Off+10:], c)
	f.IPv4.Checksum = c
	copy(p, a[:])
	*fa = a
	return true
}

// SetIPv4Src rewrites the IPv4 source address (IP header and TCP/UDP checksums).
func SetIPv4Src(b []byte, f *Frame, a [4]byte) bool { return setIPv4Addr(b, f, 12, a, &f.IPv4.Src) }

// SetIPv4Dst rewrites the IPv4 destination address (IP header and TCP/UDP checksums).
func SetIPv4Dst(b []byte, f *Frame, a [4]byte) bool { return setIPv4Addr(b, f, 16, a, &f.IPv4.Dst) }

// setIPv6Addr rewrites the 16 bytes at L3Off+at (8 source, 24
// destination), which f holds in *fa.
func setIPv6Addr(b []byte, f *Frame, at int, a [16]byte, fa *[16]byte) bool {
	p := f.addrField(b, true, at, 16)
	if p == nil {
		return false
	}
	adjustL4(b, f, p, a[:], true)
	copy(p, a[:])
	*fa = a
	return true
}

// SetIPv6Src rewrites the IPv6 source address (TCP/UDP/ICMPv6 checksums).
func SetIPv6Src(b []byte, f *Frame, a [16]byte) bool { return setIPv6Addr(b, f, 8, a, &f.IPv6.Src) }

// SetIPv6Dst rewrites the IPv6 destination address (TCP/UDP/ICMPv6 checksums).
func SetIPv6Dst(b []byte, f *Frame, a [16]byte) bool { return setIPv6Addr(b, f, 24, a, &f.IPv6.Dst) }

// setPort rewrites the 16-bit word at L4Off+at of a TCP/UDP header.
func setPort(b []byte, f *Frame, at int, port uint16) bool {
	if f.L4Off == 0 || f.Proto != ProtoTCP && f.Proto != ProtoUDP || !f.fits(b) || f.L4Off+UDPHeaderLen > f.L3End {
		return false
	}
	var pb [2]byte
	binary.BigEndian.PutUint16(pb[:], port)
	p := b[f.L4Off+at : f.L4Off+at+2]
	adjustL4(b, f, p, pb[:], false)
	copy(p, pb[:])
	switch {
	case f.Proto == ProtoTCP && at == 0:
		f.TCP.SrcPort = port
	case f.Proto == ProtoTCP:
		f.TCP.DstPort = port
	case at == 0:
		f.UDP.SrcPort = port
	default:
		f.UDP.DstPort = port
	}
	return true
}

// SetSrcPort rewrites the TCP or UDP source port and its checksum.
func SetSrcPort(b []byte, f *Frame, port uint16) bool { return setPort(b, f, 0, port) }

// SetDstPort rewrites the TCP or UDP destination port and its checksum.
func SetDstPort(b []byte, f *Frame, port uint16) bool { return setPort(b, f, 2, port) }

// SetICMPEchoID rewrites the identifier of an ICMP or ICMPv6 echo request or
// reply and its checksum.
func SetICMPEchoID(b []byte, f *Frame, id uint16) bool {
	if !f.IsICMP() || !isEcho(f.IsIPv6(), f.ICMP.Type) || !f.fits(b) || f.L4Off+ICMPHeaderLen > f.L3End {
		return false
	}
	var ib [2]byte
	binary.BigEndian.PutUint16(ib[:], id)
	p := b[f.L4Off+4 : f.L4Off+6]
	adjustL4(b, f, p, ib[:], false)
	copy(p, ib[:])
	f.ICMP.ID = id
	// An ICMPv4 echo reply with identifier, sequence number and data all
	// zero sums to +0: its checksum is 0xffff, which the incremental
	// update gives as 0x0000. (ICMPv6 has a pseudo header, never zero.)
	if f.IsIPv4() && f.ICMP.Checksum == 0 && !f.Fragment &&
		Sum(b[f.L4Off:f.L4Off+2], 0) == 0 && Sum(b[f.L4Off+4:f.L3End], 0) == 0 {
		f.ICMP.Checksum = 0xffff
		binary.BigEndian.PutUint16(b[f.L4Off+2:], 0xffff)
	}
	return true
}

// DecTTL decrements the IPv4 TTL (fixing the header checksum) or the IPv6
// hop limit, as a router does when forwarding. It returns false, changing
// nothing, when the packet must not be forwarded (TTL or hop limit 0 or 1)
// or is not IP.
func DecTTL(b []byte, f *Frame) bool {
	if !f.fits(b) {
		return false
	}
	switch {
	case f.IsIPv4() && f.L3Off+IPv4HeaderLen <= f.L3End:
		ttl := b[f.L3Off+8]
		if ttl <= 1 {
			return false
		}
		// TTL is the high byte of the word it shares with the protocol.
		word := binary.BigEndian.Uint16(b[f.L3Off+8:])
		c := Update16(binary.BigEndian.Uint16(b[f.L3Off+10:]), word, word-0x100)
		b[f.L3Off+8] = ttl - 1
		binary.BigEndian.PutUint16(b[f.L3Off+10:], c)
		f.IPv4.TTL = ttl - 1
		f.IPv4.Checksum = c
		return true
	case f.IsIPv6() && f.L3Off+IPv6HeaderLen <= f.L3End:
		hl := b[f.L3Off+7]
		if hl <= 1 {
			return false
		}
		b[f.L3Off+7] = hl - 1
		f.IPv6.HopLimit = hl - 1
		return true
	}
	return false
}
