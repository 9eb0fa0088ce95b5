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
	var err error
	if f.IsIPv4() {
		end, err = embeddedIPv4(b, in)
	} else {
		end, err = embeddedIPv6(b, in)
	}
	if err != nil || in.L4Off == 0 {
		return err
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

// embeddedIPv4 parses the quoted IPv4 header at in.L3Off; b ends at the
// ICMP error's end. It returns the end of the quoted packet within b and
// sets in.L4Off unless the quote is of a later fragment.
func embeddedIPv4(b []byte, in *Inner) (end int, err error) {
	off := in.L3Off
	ip := &in.IPv4
	if err := readIPv4(b[off:], ip); err != nil {
		return 0, err
	}
	hlen := int(ip.IHL) * 4
	if int(ip.TotalLen) < hlen {
		return 0, ErrBadLength
	}
	if len(b)-off < hlen {
		return 0, ErrTruncated
	}
	in.Proto = ip.Protocol
	end = min(len(b), off+int(ip.TotalLen))
	if ip.FragOff == 0 {
		in.L4Off = off + hlen
	}
	return end, nil
}

// embeddedIPv6 parses the quoted IPv6 header and extension headers at
// in.L3Off; b ends at the ICMP error's end. It returns the end of the
// quoted packet within b and sets in.L4Off unless the quote is of a later
// fragment or ends the chain without a transport header.
func embeddedIPv6(b []byte, in *Inner) (end int, err error) {
	off := in.L3Off
	if len(b)-off < IPv6HeaderLen {
		return 0, ErrTruncated
	}
	h := b[off : off+IPv6HeaderLen]
	if h[0]>>4 != 6 {
		return 0, ErrBadVersion
	}
	ip := &in.IPv6
	readIPv6(h, ip)
	end = min(len(b), off+IPv6HeaderLen+int(ip.PayloadLen))
	var later bool
	in.Proto, in.L4Off, _, later, err = walkIPv6(b[:end], off+IPv6HeaderLen, ip, false)
	if err != nil || later {
		in.L4Off = 0
	}
	return end, err
}
