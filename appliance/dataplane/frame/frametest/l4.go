package frametest

import "slices"

// TCP describes a TCP header (RFC 9293).
type TCP struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8 // FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80
	Window           uint16
	Urgent           uint16
	Opts             []byte // options, a multiple of 4 bytes
	DataOff          uint8  // override of the data offset; 0 means the right value
}

// Raw returns the header followed by payload, with a zero checksum (IPv4.TCP
// and IPv6.TCP fill it in).
func (t TCP) Raw(payload []byte) []byte {
	off := t.DataOff
	if off == 0 {
		off = uint8(5 + len(t.Opts)/4)
	}
	return slices.Concat(be16(t.SrcPort), be16(t.DstPort), be32(t.Seq), be32(t.Ack),
		[]byte{off << 4, t.Flags}, be16(t.Window), []byte{0, 0}, be16(t.Urgent), t.Opts, payload)
}

// UDPRaw returns a UDP datagram with checksum 0: over IPv4 that means none
// (IPv4.UDP and IPv6.UDP fill it in).
func UDPRaw(sport, dport uint16, payload []byte) []byte {
	return slices.Concat(be16(sport), be16(dport), be16(uint16(8+len(payload))), []byte{0, 0}, payload)
}

// ICMPRaw returns an ICMP or ICMPv6 message with a zero checksum: type,
// code, the 4-byte rest of header, payload.
func ICMPRaw(typ, code uint8, rest uint32, payload []byte) []byte {
	return slices.Concat([]byte{typ, code, 0, 0}, be32(rest), payload)
}

// ICMPv4 returns an ICMP message (RFC 792) with its checksum (ICMP over IPv4
// has no pseudo header).
func ICMPv4(typ, code uint8, rest uint32, payload []byte) []byte {
	return WithChecksum(ICMPRaw(typ, code, rest, payload), 2, nil)
}
