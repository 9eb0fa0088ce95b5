package frame

import "encoding/binary"

// shortHeader is the error for a header that does not fit in the IP packet:
// in a first fragment the header chain must be complete (RFC 7112, RFC 1858),
// otherwise the packet is truncated.
func (f *Frame) shortHeader() error {
	if f.Fragment {
		return ErrBadFragment
	}
	return ErrTruncated
}

// parseTCP parses the TCP header at f.L4Off; b ends at the L3 end.
func parseTCP(b []byte, f *Frame) error {
	off := f.L4Off
	rem := len(b) - off
	if rem < TCPHeaderLen {
		return f.shortHeader()
	}
	h := b[off : off+TCPHeaderLen]
	t := &f.TCP
	t.SrcPort = binary.BigEndian.Uint16(h[0:])
	t.DstPort = binary.BigEndian.Uint16(h[2:])
	t.Seq = binary.BigEndian.Uint32(h[4:])
	t.Ack = binary.BigEndian.Uint32(h[8:])
	t.DataOff = h[12] >> 4
	t.Flags = h[13]
	t.Window = binary.BigEndian.Uint16(h[14:])
	t.Checksum = binary.BigEndian.Uint16(h[16:])
	t.Urgent = binary.BigEndian.Uint16(h[18:])
	hlen := int(t.DataOff) * 4
	if t.DataOff < 5 {
		return ErrBadTCPOffset
	}
	if hlen > rem {
		if f.Fragment {
			return ErrBadFragment
		}
		return ErrBadTCPOffset
	}
	f.PayloadOff = off + hlen
	return nil
}

// parseUDP parses the UDP header at f.L4Off; b ends at the L3 end.
func parseUDP(b []byte, f *Frame) error {
	off := f.L4Off
	rem := len(b) - off
	if rem < UDPHeaderLen {
		return f.shortHeader()
	}
	h := b[off : off+UDPHeaderLen]
	u := &f.UDP
	u.SrcPort = binary.BigEndian.Uint16(h[0:])
	u.DstPort = binary.BigEndian.Uint16(h[2:])
	u.Length = binary.BigEndian.Uint16(h[4:])
	u.Checksum = binary.BigEndian.Uint16(h[6:])
	// In a first fragment the length covers the whole datagram.
	if u.Length < UDPHeaderLen || !f.Fragment && int(u.Length) > rem {
		return ErrBadUDPLength
	}
	f.PayloadOff = off + UDPHeaderLen
	return nil
}

// parseICMP parses the ICMP or ICMPv6 header at f.L4Off; b ends at the L3
// end.
func parseICMP(b []byte, f *Frame) error {
	off := f.L4Off
	rem := len(b) - off
	if rem < ICMPHeaderLen {
		return f.shortHeader()
	}
	h := b[off : off+ICMPHeaderLen]
	c := &f.ICMP
	c.Type = h[0]
	c.Code = h[1]
	c.Checksum = binary.BigEndian.Uint16(h[2:])
	f.PayloadOff = off + ICMPHeaderLen
	v6 := f.Proto == ProtoICMPv6
	if isEcho(v6, c.Type) {
		c.ID = binary.BigEndian.Uint16(h[4:])
		c.Seq = binary.BigEndian.Uint16(h[6:])
	}
	if quotesPacket(v6, c.Type) && rem > ICMPHeaderLen {
		c.EmbeddedOff = off + ICMPHeaderLen
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

// quotesPacket reports whether an ICMP (v6 false) or ICMPv6 type is an
// error message that quotes the offending packet in a layout the parser
// knows (ICMP destination unreachable, source quench, redirect, time
// exceeded, parameter problem; ICMPv6 destination unreachable, packet too
// big, time exceeded, parameter problem): where Frame.ICMP.EmbeddedOff is
// set. That is a narrower question than IsICMPError's "is it an error".
func quotesPacket(v6 bool, typ uint8) bool {
	if v6 {
		return typ >= ICMPv6DestUnreach && typ <= ICMPv6ParamProblem
	}
	switch typ {
	case ICMPDestUnreach, ICMPSourceQuench, ICMPRedirect, ICMPTimeExceeded, ICMPParamProblem:
		return true
	}
	return false
}
