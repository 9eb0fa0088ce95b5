// Package frametest builds Ethernet frames for tests, with checksums from a plain RFC 1071 reference that shares no code with package frame.
package frametest

import "slices"

// The builders return fresh slices and never fail: a test that wants a
// malformed packet says so with the override fields (IPv4.IHL, IPv4.TotalLen,
// IPv6.PayloadLen, TCP.DataOff, the Version fields) or by cutting what a
// builder returned. The package imports nothing of package frame (whose
// internal tests import it), so it has its own constants.

// EtherTypes.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeVLAN = 0x8100 // IEEE 802.1Q customer tag
	EtherTypeQinQ = 0x88a8 // IEEE 802.1ad service tag
	EtherTypeIPv6 = 0x86dd
)

// IP protocol numbers (IPv6 next headers).
const (
	ProtoHopByHop = 0
	ProtoICMP     = 1
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNoNext   = 59
	ProtoDestOpts = 60
)

const (
	// MinFrameLen is the Ethernet minimum without FCS; Pad pads to it.
	MinFrameLen = 60
	// DefaultTTL is the TTL (hop limit) of a header that leaves it 0.
	DefaultTTL = 64
)

// Tag is one 802.1Q/802.1ad VLAN tag: a frame.VLANTag converts to it.
type Tag struct {
	TPID uint16 // EtherTypeVLAN or EtherTypeQinQ
	TCI  uint16 // PCP(3) DEI(1) VID(12)
}

// Eth returns an Ethernet header: the MAC addresses, the tags (outermost
// first) and the EtherType.
func Eth(dst, src [6]byte, etype uint16, tags ...Tag) []byte {
	b := slices.Concat(dst[:], src[:])
	for _, t := range tags {
		b = append(b, be16(t.TPID)...)
		b = append(b, be16(t.TCI)...)
	}
	return append(b, be16(etype)...)
}

// Frame returns an Ethernet frame: Eth(dst, src, etype, tags...) followed by
// payload, not padded.
func Frame(dst, src [6]byte, etype uint16, payload []byte, tags ...Tag) []byte {
	return append(Eth(dst, src, etype, tags...), payload...)
}

// Pad returns b padded with zeros to MinFrameLen bytes (b itself when it is
// long enough).
func Pad(b []byte) []byte {
	for len(b) < MinFrameLen {
		b = append(b, 0)
	}
	return b
}

// ARP returns an Ethernet/IPv4 ARP packet (RFC 826; 28 bytes).
func ARP(op uint16, sha [6]byte, spa [4]byte, tha [6]byte, tpa [4]byte) []byte {
	return slices.Concat([]byte{0, 1, 8, 0, 6, 4}, be16(op), sha[:], spa[:], tha[:], tpa[:])
}

// ARPFrame returns an ARP packet in an Ethernet frame padded to MinFrameLen.
func ARPFrame(dst, src [6]byte, op uint16, sha [6]byte, spa [4]byte, tha [6]byte, tpa [4]byte) []byte {
	return Pad(Frame(dst, src, EtherTypeARP, ARP(op, sha, spa, tha, tpa)))
}

// Payload returns n bytes of a recognisable pattern.
func Payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}
