package rules

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// Key is what a lookup matches: the fields of one frame, filled by the
// dataplane from the parsed headers. It is a fixed-size value without
// pointers. Fields that do not apply to a frame must be zero (Proto for
// non-IP frames, ports for non-TCP/UDP, ...); rules only look at L4 fields
// when Proto matches, but stray values cost flow cache hits.
type Key struct {
	// SrcIP and DstIP hold the addresses: an IPv4 address in the first four
	// bytes (the rest zero), an IPv6 address in all sixteen. The family is
	// given by EtherType.
	SrcIP, DstIP   [16]byte
	SrcMAC, DstMAC [6]byte
	// InPort and OutPort are the port ids of Options.Ports.
	InPort, OutPort uint16
	EtherType       EtherType
	// VLAN is the VLAN id (12 bits) when Tagged.
	VLAN             uint16
	SrcPort, DstPort uint16
	Chain            Chain
	Tagged           bool
	// Proto is the L4 protocol (after IPv6 extension headers).
	Proto    Proto
	TCPFlags TCPFlagSet
	ICMPType uint8
	ICMPCode uint8
	// CtState is the packet's connection state: exactly one bit. Zero (or
	// several bits) matches no rule with a ct state.
	CtState CtState
}

// SetAddrs stores src and dst in SrcIP/DstIP (IPv4 in the first four bytes)
// and sets EtherType to match their family. Addresses of mixed families
// are both stored as IPv6 (IPv4-mapped).
func (k *Key) SetAddrs(src, dst netip.Addr) {
	k.SrcIP, k.DstIP = [16]byte{}, [16]byte{}
	if src.Is4() && dst.Is4() {
		a, b := src.As4(), dst.As4()
		copy(k.SrcIP[:], a[:])
		copy(k.DstIP[:], b[:])
		k.EtherType = EtherTypeIPv4
		return
	}
	k.SrcIP, k.DstIP = src.As16(), dst.As16()
	k.EtherType = EtherTypeIPv6
}

// String describes the key for logs, e.g.
// "forward iif=1 oif=2 ip 10.0.0.1 > 10.0.0.2 tcp 1234 > 22 flags=syn ct=new".
func (k *Key) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s iif=%d oif=%d %s > %s", k.Chain, k.InPort, k.OutPort, MAC(k.SrcMAC), MAC(k.DstMAC))
	if k.Tagged {
		fmt.Fprintf(&b, " vlan=%d", k.VLAN&0xfff)
	}
	switch k.EtherType {
	case EtherTypeIPv4:
		fmt.Fprintf(&b, " ip %s > %s", netip.AddrFrom4([4]byte(k.SrcIP[:4])), netip.AddrFrom4([4]byte(k.DstIP[:4])))
	case EtherTypeIPv6:
		fmt.Fprintf(&b, " ip6 %s > %s", netip.AddrFrom16(k.SrcIP), netip.AddrFrom16(k.DstIP))
	default:
		fmt.Fprintf(&b, " type %s", k.EtherType)
	}
	switch k.Proto {
	case 0:
	case ProtoTCP, ProtoUDP:
		fmt.Fprintf(&b, " %s %d > %d", k.Proto, k.SrcPort, k.DstPort)
		if k.Proto == ProtoTCP {
			fmt.Fprintf(&b, " flags=%s", k.TCPFlags)
		}
	case ProtoICMP, ProtoICMPv6:
		fmt.Fprintf(&b, " %s type=%s code=%d", k.Proto, icmpTypeString(k.Proto, k.ICMPType), k.ICMPCode)
	default:
		fmt.Fprintf(&b, " %s", k.Proto)
	}
	if k.CtState != 0 {
		fmt.Fprintf(&b, " ct=%s", k.CtState)
	}
	return b.String()
}

// Verdict is the result of a lookup.
type Verdict struct {
	// Rule is the index of the matching rule in the table's rule set, or
	// -1 when no rule matched and Action is the chain's policy.
	Rule   int32
	Action Action
	// Counter and Log are the matching rule's flags.
	Counter, Log bool
}

// packed is a Key laid out as 512 bits, so that a mask is eight words and
// masking, hashing and comparing are word operations. Layout (bit offsets
// within a word, most significant first):
//
//	w0: chain 56..63 | ct 48..55 | ethertype 32..47 | proto 24..31 | tcp flags 16..23 | dport 0..15
//	w1: sport 48..63 | icmp type 40..47 | icmp code 32..39 | iif 16..31 | oif 0..15
//	w2: vlan (tagged bit 15, id 0..11) 48..63 | src mac 0..47
//	w3: dst mac 16..63
//	w4,w5: src ip (big endian; IPv4 in the top 32 bits of w4)
//	w6,w7: dst ip
type packed [8]uint64

func (k *Key) pack(p *packed) {
	p[0] = uint64(k.Chain)<<56 | uint64(k.CtState)<<48 | uint64(k.EtherType)<<32 |
		uint64(k.Proto)<<24 | uint64(k.TCPFlags)<<16 | uint64(k.DstPort)
	p[1] = uint64(k.SrcPort)<<48 | uint64(k.ICMPType)<<40 | uint64(k.ICMPCode)<<32 |
		uint64(k.InPort)<<16 | uint64(k.OutPort)
	var vlan uint64
	if k.Tagged {
		vlan = 1<<15 | uint64(k.VLAN&0xfff)
	}
	p[2] = vlan<<48 | mac48(&k.SrcMAC)
	p[3] = mac48(&k.DstMAC) << 16
	p[4] = binary.BigEndian.Uint64(k.SrcIP[0:8])
	p[5] = binary.BigEndian.Uint64(k.SrcIP[8:16])
	p[6] = binary.BigEndian.Uint64(k.DstIP[0:8])
	p[7] = binary.BigEndian.Uint64(k.DstIP[8:16])
}

func mac48(m *[6]byte) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// keyField describes where a Key field lives in the packed form; fields
// up to 64 bits. IP addresses are two fields each (hi, lo).
type keyField struct {
	name         string
	word, shift  uint8
	width        uint8
	prefixMasked bool // masks are prefixes (addresses, ports)
}

var keyFields = []keyField{
	{"chain", 0, 56, 8, false},
	{"ct", 0, 48, 8, false},
	{"ethertype", 0, 32, 16, false},
	{"proto", 0, 24, 8, false},
	{"tcpflags", 0, 16, 8, false},
	{"dport", 0, 0, 16, true},
	{"sport", 1, 48, 16, true},
	{"icmptype", 1, 40, 8, false},
	{"icmpcode", 1, 32, 8, false},
	{"iif", 1, 16, 16, false},
	{"oif", 1, 0, 16, false},
	{"vlan", 2, 48, 16, false},
	{"ether_saddr", 2, 0, 48, false},
	{"ether_daddr", 3, 16, 48, false},
	{"saddr", 4, 0, 64, true},
	{"saddr.lo", 5, 0, 64, true},
	{"daddr", 6, 0, 64, true},
	{"daddr.lo", 7, 0, 64, true},
}

func (f *keyField) ones() uint64 {
	if f.width == 64 {
		return ^uint64(0)
	}
	return (1<<f.width - 1) << f.shift
}

// put sets field f of v to val under mask m (both within the field's width).
func (f *keyField) put(v, mask *packed, val, m uint64) {
	v[f.word] |= (val & m) << f.shift
	mask[f.word] |= m << f.shift
}

func fieldByName(name string) *keyField {
	for i := range keyFields {
		if keyFields[i].name == name {
			return &keyFields[i]
		}
	}
	panic("rules: no key field " + name)
}

var (
	kfChain    = fieldByName("chain")
	kfCt       = fieldByName("ct")
	kfEther    = fieldByName("ethertype")
	kfProto    = fieldByName("proto")
	kfFlags    = fieldByName("tcpflags")
	kfDport    = fieldByName("dport")
	kfSport    = fieldByName("sport")
	kfICMPType = fieldByName("icmptype")
	kfICMPCode = fieldByName("icmpcode")
	kfIIf      = fieldByName("iif")
	kfOIf      = fieldByName("oif")
	kfVLAN     = fieldByName("vlan")
	kfSrcMAC   = fieldByName("ether_saddr")
	kfDstMAC   = fieldByName("ether_daddr")
)

// putPrefix sets a 128-bit address prefix in words w, w+1. IPv4 addresses
// occupy the top 32 bits of word w.
func putPrefix(v, mask *packed, w int, p netip.Prefix) {
	var a [16]byte
	n := p.Bits()
	if p.Addr().Is4() {
		a4 := p.Addr().As4()
		copy(a[:], a4[:])
	} else {
		a = p.Addr().As16()
	}
	hi, lo := binary.BigEndian.Uint64(a[0:8]), binary.BigEndian.Uint64(a[8:16])
	mhi, mlo := prefixMask(n)
	v[w] |= hi & mhi
	v[w+1] |= lo & mlo
	mask[w] |= mhi
	mask[w+1] |= mlo
}

// prefixMask returns the two words of a 128-bit prefix mask of n bits.
func prefixMask(n int) (hi, lo uint64) {
	switch {
	case n >= 128:
		return ^uint64(0), ^uint64(0)
	case n > 64:
		return ^uint64(0), ^uint64(0) << (128 - n)
	case n > 0:
		return ^uint64(0) << (64 - n), 0
	}
	return 0, 0
}
