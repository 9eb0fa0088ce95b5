package dataplane

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
)

// Limits of the packet quoted in an ICMP error: the answer's IP packet is
// at most 576 bytes for IPv4 (RFC 1812 4.3.2.3) and 1280 for IPv6 (RFC
// 4443 2.4(c)), and never more than the port's MTU.
const (
	icmpMaxIPv4 = 576
	icmpMaxIPv6 = 1280
	replyTTL    = 64
	minFrameLen = 60 // Ethernet minimum without FCS; answers are padded to it
)

// buildReject writes into dst the answer a "reject" rule gives to the
// frame b (parsed into f) and returns its length, or 0 when the frame must
// not be answered. TCP gets a RST, everything else over IP an ICMP (or
// ICMPv6) port unreachable, as nftables' reject does. The answer
// impersonates the destination: its source MAC and IP are the frame's
// destination ones, and it carries the frame's VLAN tags in the bytes (it
// leaves through the ingress port, where they were). Never answered:
// non-IP frames, group or broadcast destinations, sources that are not a
// unicast host, later fragments, TCP RSTs and ICMP errors. It does not
// allocate.
func buildReject(dst, b []byte, f *frame.Frame, mtu int) int {
	if bridge.IsGroup(&f.Dst) || f.LaterFragment {
		return 0
	}
	var ipLen, ipHdr int
	switch {
	case f.IsIPv4():
		if !unicast4(f.IPv4.Src) || !unicast4(f.IPv4.Dst) {
			return 0
		}
		ipHdr = frame.IPv4HeaderLen
	case f.IsIPv6():
		if !unicast6(&f.IPv6.Src) || !unicast6(&f.IPv6.Dst) {
			return 0
		}
		ipHdr = frame.IPv6HeaderLen
	default:
		return 0
	}
	tcp := f.Proto == frame.ProtoTCP
	switch {
	case tcp && (f.L4Off == 0 || f.TCP.Flags&frame.TCPRst != 0):
		return 0
	case f.IsICMP() && isICMPError(f):
		return 0
	}
	// Ethernet header with the frame's tags in the bytes.
	hdr := 12 + frame.VLANTagLen*f.NTags + 2
	var quote []byte
	if tcp {
		ipLen = ipHdr + frame.TCPHeaderLen
	} else {
		limit := icmpMaxIPv4
		if f.IsIPv6() {
			limit = icmpMaxIPv6
		}
		limit = min(limit, mtu)
		quote = b[f.L3Off:f.L3End]
		if room := limit - ipHdr - frame.ICMPHeaderLen; len(quote) > room {
			quote = quote[:max(room, 0)]
		}
		ipLen = ipHdr + frame.ICMPHeaderLen + len(quote)
	}
	n := hdr + ipLen
	if len(dst) < max(n, minFrameLen) {
		return 0
	}
	clear(dst[:max(n, minFrameLen)])
	copy(dst[0:6], f.Src[:])
	copy(dst[6:12], f.Dst[:])
	off := 12
	for i := range f.NTags {
		binary.BigEndian.PutUint16(dst[off:], f.Tags[i].TPID)
		binary.BigEndian.PutUint16(dst[off+2:], f.Tags[i].TCI)
		off += frame.VLANTagLen
	}
	binary.BigEndian.PutUint16(dst[off:], f.EtherType)
	ip := dst[hdr:n]
	l4 := ip[ipHdr:]
	var proto uint8
	if f.IsIPv4() {
		proto = frame.ProtoICMP
		if tcp {
			proto = frame.ProtoTCP
		}
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
		ip[6] = 0x40 // DF
		ip[8] = replyTTL
		ip[9] = proto
		copy(ip[12:16], f.IPv4.Dst[:])
		copy(ip[16:20], f.IPv4.Src[:])
		binary.BigEndian.PutUint16(ip[10:], frame.IPv4HeaderChecksum(ip[:ipHdr]))
	} else {
		proto = frame.ProtoICMPv6
		if tcp {
			proto = frame.ProtoTCP
		}
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(ipLen-ipHdr))
		ip[6] = proto
		ip[7] = replyTTL
		copy(ip[8:24], f.IPv6.Dst[:])
		copy(ip[24:40], f.IPv6.Src[:])
	}
	if tcp {
		t := &f.TCP
		binary.BigEndian.PutUint16(l4[0:], t.DstPort)
		binary.BigEndian.PutUint16(l4[2:], t.SrcPort)
		l4[12] = 5 << 4
		if t.Flags&frame.TCPAck != 0 {
			binary.BigEndian.PutUint32(l4[4:], t.Ack)
			l4[13] = frame.TCPRst
		} else {
			seg := uint32(f.L3End - f.PayloadOff)
			if t.Flags&frame.TCPSyn != 0 {
				seg++
			}
			if t.Flags&frame.TCPFin != 0 {
				seg++
			}
			binary.BigEndian.PutUint32(l4[8:], t.Seq+seg)
			l4[13] = frame.TCPRst | frame.TCPAck
		}
	} else if f.IsIPv4() {
		l4[0], l4[1] = frame.ICMPDestUnreach, 3 // port unreachable
		copy(l4[frame.ICMPHeaderLen:], quote)
	} else {
		l4[0], l4[1] = frame.ICMPv6DestUnreach, 4 // port unreachable
		copy(l4[frame.ICMPHeaderLen:], quote)
	}
	seg := l4[:ipLen-ipHdr]
	var sum uint16
	switch {
	case f.IsIPv4() && !tcp:
		sum = frame.Checksum(seg, 0)
	case f.IsIPv4():
		sum = frame.Checksum(seg, frame.PseudoSumIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), proto, uint16(len(seg))))
	default:
		sum = frame.Checksum(seg, frame.PseudoSumIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, uint32(len(seg))))
	}
	if tcp {
		binary.BigEndian.PutUint16(l4[16:], sum)
	} else {
		binary.BigEndian.PutUint16(l4[2:], sum)
	}
	return max(n, minFrameLen)
}

func isICMPError(f *frame.Frame) bool {
	t := f.ICMP.Type
	if f.IsIPv4() {
		return t != frame.ICMPEchoRequest && t != frame.ICMPEchoReply && t != 13 && t != 15 && t != 17
	}
	return t < 128 // ICMPv6 errors are types 0-127
}

func unicast4(a [4]byte) bool {
	switch {
	case a[0] == 0, a[0] >= 224, a == [4]byte{255, 255, 255, 255}:
		return false
	}
	return true
}

func unicast6(a *[16]byte) bool {
	return a[0] != 0xff && *a != [16]byte{}
}
