// Package frame parses, rewrites and builds Ethernet frames and computes Internet checksums without allocating.
package frame

import "net/netip"

// EtherTypes and IP protocol numbers the parser knows.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeVLAN = 0x8100 // IEEE 802.1Q customer tag
	EtherTypeQinQ = 0x88a8 // IEEE 802.1ad service tag
	EtherTypeIPv6 = 0x86dd

	ProtoHopByHop = 0
	ProtoICMP     = 1
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoESP      = 50
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNoNext   = 59
	ProtoDestOpts = 60
)

// Header sizes.
const (
	EthernetHeaderLen = 14
	VLANTagLen        = 4
	IPv4HeaderLen     = 20 // without options
	IPv6HeaderLen     = 40
	ARPLen            = 28 // Ethernet/IPv4 ARP body
	TCPHeaderLen      = 20 // without options
	UDPHeaderLen      = 8
	ICMPHeaderLen     = 8 // type, code, checksum and the 4-byte rest of header
)

// MaxVLANTags is the number of VLAN tags Parse accepts (802.1ad outer + 802.1Q inner).
const MaxVLANTags = 2

// maxExtHeaders bounds the IPv6 extension header chain Parse walks.
const maxExtHeaders = 8

// TCP flag bits as found in TCP.Flags.
const (
	TCPFin = 0x01
	TCPSyn = 0x02
	TCPRst = 0x04
	TCPPsh = 0x08
	TCPAck = 0x10
	TCPUrg = 0x20
	TCPEce = 0x40
	TCPCwr = 0x80
)

// VLANTag is one 802.1Q/802.1ad tag.
type VLANTag struct {
	TPID uint16 // EtherTypeVLAN or EtherTypeQinQ
	TCI  uint16 // PCP(3) DEI(1) VID(12)
}

// VID returns the 12-bit VLAN ID.
func (t VLANTag) VID() uint16 { return t.TCI & 0x0fff }

// PCP returns the 3-bit priority code point.
func (t VLANTag) PCP() uint8 { return uint8(t.TCI >> 13) }

// DEI reports the drop eligible indicator bit.
func (t VLANTag) DEI() bool { return t.TCI&0x1000 != 0 }

// ARP is an Ethernet/IPv4 ARP packet.
type ARP struct {
	Op        uint16
	SenderMAC [6]byte
	SenderIP  [4]byte
	TargetMAC [6]byte
	TargetIP  [4]byte
}

// IPv4 is an IPv4 header.
type IPv4 struct {
	IHL      uint8 // header length in 32-bit words (5..15)
	TOS      uint8
	TotalLen uint16
	ID       uint16
	DF, MF   bool
	FragOff  uint16 // fragment offset in 8-byte units
	TTL      uint8
	Protocol uint8
	Checksum uint16
	Src, Dst [4]byte
}

// SrcAddr returns Src as a netip.Addr.
func (h *IPv4) SrcAddr() netip.Addr { return netip.AddrFrom4(h.Src) }

// DstAddr returns Dst as a netip.Addr.
func (h *IPv4) DstAddr() netip.Addr { return netip.AddrFrom4(h.Dst) }

// ExtHeaders is a set of IPv6 extension headers seen in a chain.
type ExtHeaders uint8

// Extension header bits.
const (
	ExtHopByHop ExtHeaders = 1 << iota
	ExtRouting
	ExtFragment
	ExtDestOpts
	ExtAH
)

// IPv6 is an IPv6 header plus what Parse learned from its extension headers.
type IPv6 struct {
	TrafficClass uint8
	FlowLabel    uint32
	PayloadLen   uint16
	NextHeader   uint8 // next header field of the fixed header
	HopLimit     uint8
	Src, Dst     [16]byte
	Exts         ExtHeaders // extension headers walked
	// Fragment header fields, valid when Exts has ExtFragment.
	FragOff uint16 // fragment offset in 8-byte units
	MF      bool
	FragID  uint32
}

// SrcAddr returns Src as a netip.Addr.
func (h *IPv6) SrcAddr() netip.Addr { return netip.AddrFrom16(h.Src) }

// DstAddr returns Dst as a netip.Addr.
func (h *IPv6) DstAddr() netip.Addr { return netip.AddrFrom16(h.Dst) }

// TCP is a TCP header.
type TCP struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	DataOff          uint8 // header length in 32-bit words (5..15)
	Flags            uint8 // TCPFin ... TCPCwr
	Window           uint16
	Checksum         uint16
	Urgent           uint16
}

// ValidFlags reports whether the flag combination is one a real TCP stack sends
// (the set Linux conntrack accepts; PSH, ECE and CWR are ignored). Parse does
// not drop on this: a bridge stays transparent, stateful code may check it.
func (t *TCP) ValidFlags() bool {
	switch t.Flags &^ (TCPPsh | TCPEce | TCPCwr) {
	case TCPSyn, TCPSyn | TCPUrg, TCPSyn | TCPAck, TCPRst, TCPRst | TCPAck,
		TCPFin | TCPAck, TCPFin | TCPAck | TCPUrg, TCPAck, TCPAck | TCPUrg:
		return true
	}
	return false
}

// UDP is a UDP header.
type UDP struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

// ICMP is an ICMP or ICMPv6 header (Frame.Proto tells which).
type ICMP struct {
	Type, Code uint8
	Checksum   uint16
	ID, Seq    uint16 // echo request/reply only
	// EmbeddedOff is the offset in the frame of the offending packet's IP
	// header carried by an error message, 0 for non-errors or when the
	// message carries no bytes of it.
	EmbeddedOff int
}

// ICMP and ICMPv6 types the parser interprets.
const (
	ICMPEchoReply      = 0
	ICMPDestUnreach    = 3
	ICMPSourceQuench   = 4
	ICMPRedirect       = 5
	ICMPEchoRequest    = 8
	ICMPTimeExceeded   = 11
	ICMPParamProblem   = 12
	ICMPv6DestUnreach  = 1
	ICMPv6PacketTooBig = 2
	ICMPv6TimeExceeded = 3
	ICMPv6ParamProblem = 4
	ICMPv6EchoRequest  = 128
	ICMPv6EchoReply    = 129
)

// Frame is the parsed view of one Ethernet frame. All offsets index the byte
// slice given to Parse and lie within it; Parse keeps no reference to it.
// Which sub-struct is valid follows from EtherType and Proto.
type Frame struct {
	Dst, Src [6]byte
	Tags     [MaxVLANTags]VLANTag // outermost first
	NTags    int                  // valid entries in Tags
	// Stripped reports that Tags[0] came from packet metadata (ParseWithTag)
	// and is not present in the bytes.
	Stripped bool
	// EtherType is the type after all VLAN tags (a length for 802.3 frames).
	EtherType uint16

	L3Off int // start of the L3 header (after the tags)
	// L3End is the end of the L3 packet, Ethernet padding excluded:
	// L3Off + total length for IPv4, L3Off + 40 + payload length for
	// IPv6, L3Off + 28 for ARP, len(b) otherwise.
	L3End int

	ARP  ARP  // EtherType == EtherTypeARP
	IPv4 IPv4 // EtherType == EtherTypeIPv4
	IPv6 IPv6 // EtherType == EtherTypeIPv6

	// Proto is the transport protocol: the IPv4 protocol or the IPv6 next
	// header that ends the extension chain (ProtoESP, ProtoNoNext included).
	Proto uint8
	// Fragment reports that the IP packet is a fragment of a larger
	// datagram (MF set or offset non-zero). An IPv6 atomic fragment (offset
	// 0, M clear) is not.
	Fragment bool
	// LaterFragment reports a non-first fragment: it carries no L4 header,
	// so L4Off is 0, TCP/UDP/ICMP are empty and PayloadOff is where the
	// fragment data starts.
	LaterFragment bool
	// L4Off is the start of the transport header (for ESP the ESP header),
	// 0 when there is none (non-IP, later fragment, ProtoNoNext).
	L4Off int
	// PayloadOff is the start of the TCP/UDP/ICMP payload, or for a later
	// fragment the start of its fragment data; 0 otherwise.
	PayloadOff int

	TCP  TCP  // Proto == ProtoTCP and L4Off != 0
	UDP  UDP  // Proto == ProtoUDP and L4Off != 0
	ICMP ICMP // Proto == ProtoICMP (IPv4) or ProtoICMPv6 (IPv6) and L4Off != 0
}

// IsIPv4 reports whether the frame carries IPv4.
func (f *Frame) IsIPv4() bool { return f.EtherType == EtherTypeIPv4 }

// IsIPv6 reports whether the frame carries IPv6.
func (f *Frame) IsIPv6() bool { return f.EtherType == EtherTypeIPv6 }

// HasL4 reports whether a transport header is present.
func (f *Frame) HasL4() bool { return f.L4Off != 0 }

// IsICMP reports whether the frame carries a parsed ICMP (over IPv4) or
// ICMPv6 (over IPv6) header.
func (f *Frame) IsICMP() bool {
	if f.L4Off == 0 {
		return false
	}
	return f.Proto == ProtoICMP && f.IsIPv4() || f.Proto == ProtoICMPv6 && f.IsIPv6()
}
