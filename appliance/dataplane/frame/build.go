package frame

import "encoding/binary"

// The Put* writers build the frames the dataplane generates (answers to a
// received frame, ARP) into a caller's buffer, whole and with every
// checksum. They never allocate, and they return the frame's length, or 0
// when it does not fit in the buffer or must not be sent. Generated frames
// are padded to MinFrameLen.

// MinFrameLen is the Ethernet minimum frame length without FCS.
const MinFrameLen = 60

// Largest IP packet of an ICMP error: an ICMP error quotes as much of the
// offending packet as fits (RFC 1812 4.3.2.3, RFC 4443 2.4(c)).
const (
	ICMPv4ErrorMax = 576
	ICMPv6ErrorMax = 1280
)

// Answer says how the headers of an answer to a received frame are made.
// The answer goes back to the frame's source: its Ethernet destination is
// the frame's source MAC, its IP destination the frame's source address.
type Answer struct {
	MAC  [6]byte   // Ethernet source
	Tags []VLANTag // VLAN tags written in the bytes, outermost first
	Src4 [4]byte   // IP source of an answer to an IPv4 frame
	Src6 [16]byte  // IP source of an answer to an IPv6 frame
	TOS  uint8     // IPv4 type of service, IPv6 traffic class
	ID   uint16    // IPv4 identification
	DF   bool      // IPv4 don't fragment
	TTL  uint8     // IPv4 TTL, IPv6 hop limit
	Flow uint32    // IPv6 flow label
	// MTU is the largest IP packet the answer may be (the port's MTU); 0
	// means no limit of its own. It limits the quote of an ICMP error.
	MTU int
}

// IsICMPError reports whether f carries an ICMP (over IPv4) or ICMPv6 (over
// IPv6) error message: one that is never answered with an ICMP error (RFC
// 1122 3.2.2, RFC 1812 4.3.2.7, RFC 4443 2.4(e)). ICMPv6 errors are types
// 0-127 (RFC 4443 2.1). For ICMPv4 it follows Linux (icmp_pointers[].error):
// every type is an error except the queries and replies echo (0, 8),
// timestamp (13, 14), information (15, 16) and address mask (17, 18), so an
// unknown or deprecated type is never answered either. It is false for
// anything else, later fragments included (they carry no ICMP header).
func IsICMPError(f *Frame) bool {
	if !f.IsICMP() {
		return false
	}
	t := f.ICMP.Type
	if f.IsIPv6() {
		return t < 128
	}
	switch t {
	case ICMPEchoReply, ICMPEchoRequest, 13, 14, 15, 16, 17, 18:
		return false
	}
	return true
}

// IsUnicastIPv4 reports whether a can be a host's address on the wire: not
// in "this network" 0.0.0.0/8, loopback 127.0.0.0/8 (RFC 1122 3.2.1.3, RFC
// 1812 5.3.7), multicast 224.0.0.0/4 or the reserved 240.0.0.0/4, which
// holds the limited broadcast. A subnet's directed broadcast depends on the
// subnet and is the caller's to check.
func IsUnicastIPv4(a [4]byte) bool { return a[0] != 0 && a[0] != 127 && a[0] < 224 }

// IsUnicastIPv6 reports whether a can be a host's address on the wire: not
// multicast ff00::/8, the unspecified address or loopback (RFC 4291 2.5.2,
// 2.5.3).
func IsUnicastIPv6(a *[16]byte) bool {
	return a[0] != 0xff && *a != [16]byte{} && *a != [16]byte{15: 1}
}

// PutEthernet writes an Ethernet header to to from from, with tags
// (outermost first) and the EtherType etype, and returns its length: 14
// bytes and 4 per tag, or 0 when dst is shorter.
func PutEthernet(dst []byte, to, from [6]byte, tags []VLANTag, etype uint16) int {
	n := EthernetHeaderLen + VLANTagLen*len(tags)
	if len(dst) < n {
		return 0
	}
	copy(dst[0:6], to[:])
	copy(dst[6:12], from[:])
	off := 12
	for _, t := range tags {
		binary.BigEndian.PutUint16(dst[off:], t.TPID)
		binary.BigEndian.PutUint16(dst[off+2:], t.TCI)
		off += VLANTagLen
	}
	binary.BigEndian.PutUint16(dst[off:], etype)
	return n
}

// PutIPv4Header writes h as a 20-byte IPv4 header, options left out (IHL
// is 5 whatever h says) and the checksum computed (h.Checksum is not
// read), and returns 20, or 0 when dst is shorter.
func PutIPv4Header(dst []byte, h *IPv4) int {
	if len(dst) < IPv4HeaderLen {
		return 0
	}
	b := dst[:IPv4HeaderLen]
	b[0], b[1] = 0x45, h.TOS
	binary.BigEndian.PutUint16(b[2:], h.TotalLen)
	binary.BigEndian.PutUint16(b[4:], h.ID)
	fo := h.FragOff & 0x1fff
	if h.DF {
		fo |= 0x4000
	}
	if h.MF {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(b[6:], fo)
	b[8], b[9] = h.TTL, h.Protocol
	b[10], b[11] = 0, 0
	copy(b[12:16], h.Src[:])
	copy(b[16:20], h.Dst[:])
	binary.BigEndian.PutUint16(b[10:], IPv4HeaderChecksum(b))
	return IPv4HeaderLen
}

// PutIPv6Header writes the 40-byte fixed IPv6 header of h (version,
// traffic class, flow label, payload length, next header, hop limit,
// addresses) and returns 40, or 0 when dst is shorter.
func PutIPv6Header(dst []byte, h *IPv6) int {
	if len(dst) < IPv6HeaderLen {
		return 0
	}
	b := dst[:IPv6HeaderLen]
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(h.TrafficClass)<<20|h.FlowLabel&0xfffff)
	binary.BigEndian.PutUint16(b[4:], h.PayloadLen)
	b[6], b[7] = h.NextHeader, h.HopLimit
	copy(b[8:24], h.Src[:])
	copy(b[24:40], h.Dst[:])
	return IPv6HeaderLen
}

// Pad zero-fills b from n to MinFrameLen and returns the padded length,
// max(n, MinFrameLen), or 0 when b is shorter than that.
func Pad(b []byte, n int) int {
	if n >= MinFrameLen {
		if n > len(b) {
			return 0
		}
		return n
	}
	if len(b) < MinFrameLen {
		return 0
	}
	clear(b[n:MinFrameLen])
	return MinFrameLen
}

// PutARP writes an untagged Ethernet/IPv4 ARP frame (RFC 826) carrying a,
// to to from from, and returns MinFrameLen, or 0 when dst is shorter.
func PutARP(dst []byte, to, from [6]byte, a *ARP) int {
	if len(dst) < MinFrameLen {
		return 0
	}
	off := PutEthernet(dst, to, from, nil, EtherTypeARP)
	h := dst[off : off+ARPLen]
	binary.BigEndian.PutUint16(h[0:], 1) // Ethernet
	binary.BigEndian.PutUint16(h[2:], EtherTypeIPv4)
	h[4], h[5] = 6, 4
	binary.BigEndian.PutUint16(h[6:], a.Op)
	copy(h[8:14], a.SenderMAC[:])
	copy(h[14:18], a.SenderIP[:])
	copy(h[18:24], a.TargetMAC[:])
	copy(h[24:28], a.TargetIP[:])
	return Pad(dst, off+ARPLen)
}

// PutRST writes into dst the TCP reset that answers the TCP segment f
// (RFC 9293 3.10.7.1, RFC 793 "Reset Generation"), with headers from a and
// the segment's ports swapped. If the segment carries an ACK, the reset
// takes its sequence number from that acknowledgment; otherwise it has
// sequence number 0 and acknowledges the segment: its sequence number plus
// its length, SYN and FIN counting one each. It returns 0, writing nothing,
// when f is not a TCP segment over IP with its header, is a reset itself
// (never answered), or the frame does not fit in dst.
func PutRST(dst []byte, f *Frame, a *Answer) int {
	if f.Proto != ProtoTCP || f.L4Off == 0 || f.TCP.Flags&TCPRst != 0 || !f.IsIPv4() && !f.IsIPv6() {
		return 0
	}
	l3 := EthernetHeaderLen + VLANTagLen*len(a.Tags)
	n := l3 + ipHeaderLen(f) + TCPHeaderLen
	if len(dst) < max(n, MinFrameLen) {
		return 0
	}
	off := PutEthernet(dst, f.Src, a.MAC, a.Tags, f.EtherType)
	off += putAnswerIP(dst[off:], f, a, ProtoTCP, TCPHeaderLen)
	putRST(dst[off:n], &f.TCP, uint32(f.L3End-f.PayloadOff))
	putL4Checksum(dst[l3:n], f.IsIPv6(), ProtoTCP)
	return Pad(dst, n)
}

// putRST writes the 20-byte TCP header of the reset answering t, whose
// segment carries n bytes of data.
func putRST(h []byte, t *TCP, n uint32) {
	var seq, ack uint32
	flags := uint8(TCPRst)
	if t.Flags&TCPAck != 0 {
		seq = t.Ack
	} else {
		if t.Flags&TCPSyn != 0 {
			n++
		}
		if t.Flags&TCPFin != 0 {
			n++
		}
		ack = t.Seq + n
		flags |= TCPAck
	}
	binary.BigEndian.PutUint16(h[0:], t.DstPort)
	binary.BigEndian.PutUint16(h[2:], t.SrcPort)
	binary.BigEndian.PutUint32(h[4:], seq)
	binary.BigEndian.PutUint32(h[8:], ack)
	h[12], h[13] = 5<<4, flags
	binary.BigEndian.PutUint32(h[14:], 0) // window, checksum
	binary.BigEndian.PutUint16(h[18:], 0) // urgent pointer
}

// PutICMPError writes into dst the ICMP (for an IPv4 frame) or ICMPv6 (for
// IPv6) error of type typ and code, with rest as its 4-byte rest of header,
// about the packet that Parse found in b as f, with headers from a. It
// quotes the packet from its IP header on, as much as fits in an answer of
// ICMPv4ErrorMax (ICMPv6ErrorMax) bytes and a.MTU. dst must not overlap b.
// It returns 0, writing nothing, for what is never answered with an ICMP
// error (RFC 1812 4.3.2.7, RFC 4443 2.4(e)): frames that are not IP, ICMP
// errors (IsICMPError) and later fragments; and when a.MTU is too small for
// the headers or the frame does not fit in dst.
func PutICMPError(dst, b []byte, f *Frame, a *Answer, typ, code uint8, rest uint32) int {
	if !f.IsIPv4() && !f.IsIPv6() || f.LaterFragment || IsICMPError(f) || f.L3End > len(b) || f.L3Off >= f.L3End {
		return 0
	}
	iphdr := ipHeaderLen(f)
	limit, proto := ICMPv4ErrorMax, uint8(ProtoICMP)
	if f.IsIPv6() {
		limit, proto = ICMPv6ErrorMax, ProtoICMPv6
	}
	if a.MTU > 0 {
		limit = min(limit, a.MTU)
	}
	room := limit - iphdr - ICMPHeaderLen
	if room < 0 {
		return 0
	}
	quote := b[f.L3Off:f.L3End]
	quote = quote[:min(len(quote), room)]
	l3 := EthernetHeaderLen + VLANTagLen*len(a.Tags)
	msg := ICMPHeaderLen + len(quote)
	n := l3 + iphdr + msg
	if len(dst) < max(n, MinFrameLen) {
		return 0
	}
	off := PutEthernet(dst, f.Src, a.MAC, a.Tags, f.EtherType)
	off += putAnswerIP(dst[off:], f, a, proto, msg)
	m := dst[off:n]
	m[0], m[1], m[2], m[3] = typ, code, 0, 0
	binary.BigEndian.PutUint32(m[4:], rest)
	copy(m[ICMPHeaderLen:], quote)
	putL4Checksum(dst[l3:n], f.IsIPv6(), proto)
	return Pad(dst, n)
}

// PutEchoReply writes into dst the ICMP (ICMPv6) echo reply to the echo
// request that Parse found in b as f, with headers from a: the request's
// identifier, sequence number and data. dst must not overlap b. It returns
// 0, writing nothing, when f is not a whole echo request or the frame does
// not fit in dst.
func PutEchoReply(dst, b []byte, f *Frame, a *Answer) int {
	request, typ, proto := uint8(ICMPEchoRequest), uint8(ICMPEchoReply), uint8(ProtoICMP)
	if f.IsIPv6() {
		request, typ, proto = ICMPv6EchoRequest, ICMPv6EchoReply, ProtoICMPv6
	}
	if !f.IsICMP() || f.ICMP.Type != request || f.Fragment || f.L3End > len(b) {
		return 0
	}
	req := b[f.L4Off:f.L3End]
	l3 := EthernetHeaderLen + VLANTagLen*len(a.Tags)
	n := l3 + ipHeaderLen(f) + len(req)
	if len(dst) < max(n, MinFrameLen) {
		return 0
	}
	off := PutEthernet(dst, f.Src, a.MAC, a.Tags, f.EtherType)
	off += putAnswerIP(dst[off:], f, a, proto, len(req))
	m := dst[off:n]
	copy(m, req)
	m[0], m[1], m[2], m[3] = typ, 0, 0, 0
	putL4Checksum(dst[l3:n], f.IsIPv6(), proto)
	return Pad(dst, n)
}

// ipHeaderLen is the length of the IP header of an answer to the IPv4 or
// IPv6 frame f.
func ipHeaderLen(f *Frame) int {
	if f.IsIPv6() {
		return IPv6HeaderLen
	}
	return IPv4HeaderLen
}

// putAnswerIP writes the IP header of an answer to f carrying n bytes of
// protocol proto, and returns its length.
func putAnswerIP(dst []byte, f *Frame, a *Answer, proto uint8, n int) int {
	if f.IsIPv6() {
		h := IPv6{TrafficClass: a.TOS, FlowLabel: a.Flow, PayloadLen: uint16(n), NextHeader: proto, HopLimit: a.TTL, Src: a.Src6, Dst: f.IPv6.Src}
		return PutIPv6Header(dst, &h)
	}
	h := IPv4{TOS: a.TOS, TotalLen: uint16(IPv4HeaderLen + n), ID: a.ID, DF: a.DF, TTL: a.TTL, Protocol: proto, Src: a.Src4, Dst: f.IPv4.Src}
	return PutIPv4Header(dst, &h)
}

// putL4Checksum computes and stores the transport checksum of the IP
// packet ip that putAnswerIP began: TCP, ICMP or ICMPv6 (whose checksum
// field must be zero).
func putL4Checksum(ip []byte, v6 bool, proto uint8) {
	var seg []byte
	var s uint16
	switch {
	case v6:
		seg = ip[IPv6HeaderLen:]
		s = PseudoSumIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, uint32(len(seg)))
	case proto == ProtoICMP:
		seg = ip[IPv4HeaderLen:]
	default:
		seg = ip[IPv4HeaderLen:]
		s = PseudoSumIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), proto, uint16(len(seg)))
	}
	at := 2 // ICMP, ICMPv6
	if proto == ProtoTCP {
		at = 16
	}
	binary.BigEndian.PutUint16(seg[at:], Checksum(seg, s))
}
