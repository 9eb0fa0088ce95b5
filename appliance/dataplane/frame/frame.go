// Package frame parses Ethernet frames and computes Internet checksums without allocating.
package frame

import (
	"encoding/binary"
	"net/netip"
)

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

// Parse parses the Ethernet frame in b into f, overwriting all of f. On error
// f holds what was parsed before the problem was found. It never allocates,
// never panics and never reads outside b.
func Parse(b []byte, f *Frame) error {
	*f = Frame{}
	return parse(b, f)
}

// ParseWithTag is Parse for a frame whose outer VLAN tag was stripped by the
// kernel (tp_vlan_tci/tp_vlan_tpid of TPACKET_V3): tag becomes Tags[0] and
// Stripped is set; offsets still index b. A TPID of 0 means 802.1Q.
func ParseWithTag(b []byte, tag VLANTag, f *Frame) error {
	*f = Frame{}
	if tag.TPID == 0 {
		tag.TPID = EtherTypeVLAN
	}
	if tag.VID() == 0x0fff {
		return ErrBadVLAN
	}
	f.Tags[0] = tag
	f.NTags = 1
	f.Stripped = true
	return parse(b, f)
}

func parse(b []byte, f *Frame) error {
	if len(b) < EthernetHeaderLen {
		return ErrTruncated
	}
	copy(f.Dst[:], b[0:6])
	copy(f.Src[:], b[6:12])
	off := 12
	et := binary.BigEndian.Uint16(b[off:])
	off += 2
	for et == EtherTypeVLAN || et == EtherTypeQinQ {
		if f.NTags == MaxVLANTags {
			return ErrBadVLAN
		}
		if len(b) < off+VLANTagLen {
			return ErrTruncated
		}
		t := VLANTag{TPID: et, TCI: binary.BigEndian.Uint16(b[off:])}
		if t.VID() == 0x0fff {
			return ErrBadVLAN
		}
		f.Tags[f.NTags] = t
		f.NTags++
		et = binary.BigEndian.Uint16(b[off+2:])
		off += VLANTagLen
	}
	f.EtherType = et
	f.L3Off = off
	f.L3End = len(b)
	switch et {
	case EtherTypeARP:
		return parseARP(b, f)
	case EtherTypeIPv4:
		if err := parseIPv4(b, f); err != nil {
			return err
		}
	case EtherTypeIPv6:
		if err := parseIPv6(b, f); err != nil {
			return err
		}
	default:
		return nil
	}
	if f.L4Off == 0 {
		return nil
	}
	return parseL4(b[:f.L3End], f)
}

func parseARP(b []byte, f *Frame) error {
	off := f.L3Off
	if len(b) < off+ARPLen {
		return ErrTruncated
	}
	h := b[off : off+ARPLen]
	if binary.BigEndian.Uint16(h[0:]) != 1 || binary.BigEndian.Uint16(h[2:]) != EtherTypeIPv4 || h[4] != 6 || h[5] != 4 {
		return ErrBadARP
	}
	f.L3End = off + ARPLen
	a := &f.ARP
	a.Op = binary.BigEndian.Uint16(h[6:])
	copy(a.SenderMAC[:], h[8:14])
	copy(a.SenderIP[:], h[14:18])
	copy(a.TargetMAC[:], h[18:24])
	copy(a.TargetIP[:], h[24:28])
	return nil
}

func parseIPv4(b []byte, f *Frame) error {
	off := f.L3Off
	if len(b) < off+IPv4HeaderLen {
		return ErrTruncated
	}
	h := b[off : off+IPv4HeaderLen]
	if h[0]>>4 != 4 {
		return ErrBadVersion
	}
	ip := &f.IPv4
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
	tlen := int(ip.TotalLen)
	if tlen < hlen || tlen > len(b)-off {
		return ErrBadLength
	}
	f.L3End = off + tlen
	f.Proto = ip.Protocol
	payload := tlen - hlen
	if ip.MF || ip.FragOff != 0 {
		f.Fragment = true
		// The reassembled datagram must fit in 65535 bytes (ping of
		// death), non-last fragments carry multiples of 8 bytes, and a
		// TCP fragment at offset 1 would overwrite the header (RFC 1858).
		if int(ip.FragOff)*8+payload > 0xffff || ip.MF && payload%8 != 0 ||
			ip.FragOff == 1 && ip.Protocol == ProtoTCP {
			return ErrBadFragment
		}
		if ip.FragOff != 0 {
			f.LaterFragment = true
			f.PayloadOff = off + hlen
			return nil
		}
	}
	f.L4Off = off + hlen
	return nil
}

func parseIPv6(b []byte, f *Frame) error {
	off := f.L3Off
	if len(b) < off+IPv6HeaderLen {
		return ErrTruncated
	}
	h := b[off : off+IPv6HeaderLen]
	if h[0]>>4 != 6 {
		return ErrBadVersion
	}
	ip := &f.IPv6
	vtf := binary.BigEndian.Uint32(h[0:])
	ip.TrafficClass = uint8(vtf >> 20)
	ip.FlowLabel = vtf & 0xfffff
	ip.PayloadLen = binary.BigEndian.Uint16(h[4:])
	ip.NextHeader = h[6]
	ip.HopLimit = h[7]
	copy(ip.Src[:], h[8:24])
	copy(ip.Dst[:], h[24:40])
	end := off + IPv6HeaderLen + int(ip.PayloadLen)
	if end > len(b) {
		return ErrBadLength
	}
	f.L3End = end
	var err error
	var next int
	f.Proto, next, f.Fragment, f.LaterFragment, err = walkIPv6(b[:end], off+IPv6HeaderLen, ip, true)
	if f.LaterFragment {
		f.PayloadOff = next
	} else {
		f.L4Off = next
	}
	return err
}

// walkIPv6 walks the extension header chain of ip starting at off, within b,
// recording what it finds in ip. It returns the transport protocol, its
// offset (0 for none; for a later fragment the offset of the fragment data),
// whether the packet is a fragment and whether it is a later one. strict enables the fragment size checks, which need the whole
// packet (an ICMP error quotes only its start).
func walkIPv6(b []byte, off int, ip *IPv6, strict bool) (proto uint8, l4off int, frag, later bool, err error) {
	end := len(b)
	short := func() error {
		if frag {
			return ErrBadFragment
		}
		return ErrTruncated
	}
	nh := ip.NextHeader
	for n := 0; ; n++ {
		if n > maxExtHeaders {
			return nh, 0, frag, false, ErrBadExtHeader
		}
		var hlen int
		switch nh {
		case ProtoHopByHop, ProtoRouting, ProtoDestOpts, ProtoAH:
			if nh == ProtoHopByHop && n != 0 {
				return nh, 0, frag, false, ErrBadExtHeader // RFC 8200 4.3: only right after the fixed header
			}
			if end-off < 8 {
				return nh, 0, frag, false, short()
			}
			if nh == ProtoAH {
				hlen = (int(b[off+1]) + 2) * 4
			} else {
				hlen = (int(b[off+1]) + 1) * 8
			}
			if end-off < hlen {
				return nh, 0, frag, false, short()
			}
			switch nh {
			case ProtoHopByHop:
				ip.Exts |= ExtHopByHop
			case ProtoRouting:
				ip.Exts |= ExtRouting
			case ProtoDestOpts:
				ip.Exts |= ExtDestOpts
			case ProtoAH:
				ip.Exts |= ExtAH
			}
		case ProtoFragment:
			if ip.Exts&ExtFragment != 0 {
				return nh, 0, frag, false, ErrBadExtHeader
			}
			if end-off < 8 {
				return nh, 0, frag, false, short()
			}
			hlen = 8
			ip.Exts |= ExtFragment
			fo := binary.BigEndian.Uint16(b[off+2:])
			ip.FragOff = fo >> 3
			ip.MF = fo&1 != 0
			ip.FragID = binary.BigEndian.Uint32(b[off+4:])
			if ip.MF || ip.FragOff != 0 {
				frag = true
				payload := end - off - hlen
				if strict && (int(ip.FragOff)*8+payload > 0xffff || ip.MF && payload%8 != 0) {
					return nh, 0, frag, false, ErrBadFragment
				}
				if ip.FragOff != 0 {
					return b[off], off + hlen, frag, true, nil
				}
			}
		case ProtoNoNext:
			return nh, 0, frag, false, nil
		default: // ESP and upper-layer protocols end the chain
			return nh, off, frag, false, nil
		}
		nh = b[off]
		off += hlen
	}
}

// shortHeader is the error for a header that does not fit in the IP packet:
// in a first fragment the header chain must be complete (RFC 7112, RFC 1858),
// otherwise the packet is truncated.
func (f *Frame) shortHeader() error {
	if f.Fragment {
		return ErrBadFragment
	}
	return ErrTruncated
}

// parseL4 parses the transport header at f.L4Off; b ends at the L3 end.
func parseL4(b []byte, f *Frame) error {
	off := f.L4Off
	rem := len(b) - off
	switch {
	case f.Proto == ProtoTCP:
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
	case f.Proto == ProtoUDP:
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
	case f.Proto == ProtoICMP && f.EtherType == EtherTypeIPv4,
		f.Proto == ProtoICMPv6 && f.EtherType == EtherTypeIPv6:
		if rem < ICMPHeaderLen {
			return f.shortHeader()
		}
		h := b[off : off+ICMPHeaderLen]
		c := &f.ICMP
		c.Type = h[0]
		c.Code = h[1]
		c.Checksum = binary.BigEndian.Uint16(h[2:])
		f.PayloadOff = off + ICMPHeaderLen
		var echo, embeds bool
		if f.Proto == ProtoICMP {
			switch c.Type {
			case ICMPEchoRequest, ICMPEchoReply:
				echo = true
			case ICMPDestUnreach, ICMPSourceQuench, ICMPRedirect, ICMPTimeExceeded, ICMPParamProblem:
				embeds = true
			}
		} else {
			switch c.Type {
			case ICMPv6EchoRequest, ICMPv6EchoReply:
				echo = true
			case ICMPv6DestUnreach, ICMPv6PacketTooBig, ICMPv6TimeExceeded, ICMPv6ParamProblem:
				embeds = true
			}
		}
		if echo {
			c.ID = binary.BigEndian.Uint16(h[4:])
			c.Seq = binary.BigEndian.Uint16(h[6:])
		}
		if embeds && rem > ICMPHeaderLen {
			c.EmbeddedOff = off + ICMPHeaderLen
		}
	}
	return nil
}
