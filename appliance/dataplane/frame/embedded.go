package frame

import "encoding/binary"

// Inner is the start of the packet quoted by an ICMP or ICMPv6 error, as NAT
// needs it to find the connection and rewrite the quote. Offsets index the
// frame's bytes.
type Inner struct {
	L3Off int  // start of the quoted IP header (Frame.ICMP.EmbeddedOff)
	IPv4  IPv4 // quoted header when the frame is IPv4
	IPv6  IPv6 // quoted header when the frame is IPv6
	Proto uint8
	// L4Off is the offset of the quoted transport header, 0 when the quote
	// is of a later fragment or holds fewer than 8 bytes of it.
	L4Off int
	// SrcPort and DstPort are set for quoted TCP and UDP.
	SrcPort, DstPort uint16
	// ICMPType, ICMPCode and ICMPID are set for a quoted ICMP/ICMPv6
	// message (ICMPID only for echo request/reply).
	ICMPType, ICMPCode uint8
	ICMPID             uint16
}

// quotedL4Len is how much of the offending transport header an ICMP error
// is guaranteed to carry (RFC 792).
const quotedL4Len = 8

// ParseEmbedded parses the packet quoted by the ICMP/ICMPv6 error in f (which
// Parse filled from b) into in. The quote is usually cut short, so its IP
// length fields are not checked against the bytes present; only what is
// present is read. It returns ErrTruncated when f carries no quote.
func ParseEmbedded(b []byte, f *Frame, in *Inner) error {
	*in = Inner{}
	off := f.ICMP.EmbeddedOff
	if !f.IsICMP() || off == 0 || f.L3End > len(b) || off >= f.L3End {
		return ErrTruncated
	}
	b = b[:f.L3End]
	in.L3Off = off
	var end int
	if f.IsIPv4() {
		if len(b)-off < IPv4HeaderLen {
			return ErrTruncated
		}
		h := b[off : off+IPv4HeaderLen]
		if h[0]>>4 != 4 {
			return ErrBadVersion
		}
		ip := &in.IPv4
		ip.IHL = h[0] & 0x0f
		ip.TOS = h[1]
		ip.TotalLen = binary.BigEndian.Uint16(h[2:])
		ip.ID = binary.BigEndian.Uint16(h[4:])
		fo := binary.BigEndian.Uint16(h[6:])
		ip.DF = fo&0x4000 != 0
		ip.MF = fo&0x2000 != 0
		ip.FragOff = fo & 0x1fff
		ip.TTL = h[8]
		ip.Protocol = h[9]
		ip.Checksum = binary.BigEndian.Uint16(h[10:])
		copy(ip.Src[:], h[12:16])
		copy(ip.Dst[:], h[16:20])
		if ip.IHL < 5 {
			return ErrBadIHL
		}
		hlen := int(ip.IHL) * 4
		if int(ip.TotalLen) < hlen {
			return ErrBadLength
		}
		if len(b)-off < hlen {
			return ErrTruncated
		}
		in.Proto = ip.Protocol
		end = min(len(b), off+int(ip.TotalLen))
		if ip.FragOff != 0 {
			return nil
		}
		in.L4Off = off + hlen
	} else {
		if len(b)-off < IPv6HeaderLen {
			return ErrTruncated
		}
		h := b[off : off+IPv6HeaderLen]
		if h[0]>>4 != 6 {
			return ErrBadVersion
		}
		ip := &in.IPv6
		vtf := binary.BigEndian.Uint32(h[0:])
		ip.TrafficClass = uint8(vtf >> 20)
		ip.FlowLabel = vtf & 0xfffff
		ip.PayloadLen = binary.BigEndian.Uint16(h[4:])
		ip.NextHeader = h[6]
		ip.HopLimit = h[7]
		copy(ip.Src[:], h[8:24])
		copy(ip.Dst[:], h[24:40])
		end = min(len(b), off+IPv6HeaderLen+int(ip.PayloadLen))
		var err error
		var later bool
		in.Proto, in.L4Off, _, later, err = walkIPv6(b[:end], off+IPv6HeaderLen, ip, false)
		if err != nil || later {
			in.L4Off = 0
			return err
		}
		if in.L4Off == 0 {
			return nil
		}
	}
	if end-in.L4Off < quotedL4Len {
		in.L4Off = 0
		return nil
	}
	h := b[in.L4Off : in.L4Off+quotedL4Len]
	switch {
	case in.Proto == ProtoTCP || in.Proto == ProtoUDP:
		in.SrcPort = binary.BigEndian.Uint16(h[0:])
		in.DstPort = binary.BigEndian.Uint16(h[2:])
	case in.Proto == ProtoICMP && f.IsIPv4(), in.Proto == ProtoICMPv6 && f.IsIPv6():
		in.ICMPType, in.ICMPCode = h[0], h[1]
		if isEcho(f.IsIPv6(), in.ICMPType) {
			in.ICMPID = binary.BigEndian.Uint16(h[4:])
		}
	}
	return nil
}

// isEcho reports whether an ICMP (v6 false) or ICMPv6 type is an echo request or reply.
func isEcho(v6 bool, typ uint8) bool {
	if v6 {
		return typ == ICMPv6EchoRequest || typ == ICMPv6EchoReply
	}
	return typ == ICMPEchoRequest || typ == ICMPEchoReply
}
