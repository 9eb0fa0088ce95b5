package frame

import "encoding/binary"

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
		// IPv4 is parsed here, not in a parseIPv4 around readIPv4 (which
		// ParseEmbedded shares), so that the hot path makes one call per
		// layer.
		if err := readIPv4(b[off:], &f.IPv4); err != nil {
			return err
		}
		hlen := int(f.IPv4.IHL) * 4
		tlen := int(f.IPv4.TotalLen)
		if tlen < hlen || tlen > len(b)-off {
			return ErrBadLength
		}
		f.L3End = off + tlen
		f.Proto = f.IPv4.Protocol
		if f.IPv4.MF || f.IPv4.FragOff != 0 {
			if err := f.ipv4Fragment(hlen); err != nil || f.LaterFragment {
				return err
			}
		}
		f.L4Off = off + hlen
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
	// The transport header, within the IP packet.
	b = b[:f.L3End]
	switch {
	case f.Proto == ProtoTCP:
		return parseTCP(b, f)
	case f.Proto == ProtoUDP:
		return parseUDP(b, f)
	case f.Proto == ProtoICMP && et == EtherTypeIPv4, f.Proto == ProtoICMPv6 && et == EtherTypeIPv6:
		return parseICMP(b, f)
	}
	return nil
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

// readIPv4 reads the IPv4 header at the start of h into ip. It fails with
// ErrTruncated when its fixed part is not in h, ErrBadVersion and
// ErrBadIHL; the options and the total length are the caller's to check
// (Parse and ParseEmbedded check them differently: a quote may be cut
// short).
func readIPv4(h []byte, ip *IPv4) error {
	if len(h) < IPv4HeaderLen {
		return ErrTruncated
	}
	if h[0]>>4 != 4 {
		return ErrBadVersion
	}
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
	ip.Src = [4]byte(h[12:16])
	ip.Dst = [4]byte(h[16:20])
	if ip.IHL < 5 {
		return ErrBadIHL
	}
	return nil
}

// ipv4Fragment checks the IPv4 fragment f (whose header is hlen bytes) and
// records what it is.
func (f *Frame) ipv4Fragment(hlen int) error {
	ip := &f.IPv4
	payload := int(ip.TotalLen) - hlen
	f.Fragment = true
	// The reassembled datagram must fit in 65535 bytes (ping of death),
	// non-last fragments carry multiples of 8 bytes, and a TCP fragment at
	// offset 1 would overwrite the header (RFC 1858).
	if int(ip.FragOff)*8+payload > 0xffff || ip.MF && payload%8 != 0 ||
		ip.FragOff == 1 && ip.Protocol == ProtoTCP {
		return ErrBadFragment
	}
	if ip.FragOff != 0 {
		f.LaterFragment = true
		f.PayloadOff = f.L3Off + hlen
	}
	return nil
}

// readIPv6 reads the fixed IPv6 header h (40 bytes) into ip.
func readIPv6(h []byte, ip *IPv6) {
	_ = h[IPv6HeaderLen-1]
	vtf := binary.BigEndian.Uint32(h[0:])
	ip.TrafficClass = uint8(vtf >> 20)
	ip.FlowLabel = vtf & 0xfffff
	ip.PayloadLen = binary.BigEndian.Uint16(h[4:])
	ip.NextHeader = h[6]
	ip.HopLimit = h[7]
	ip.Src = [16]byte(h[8:24])
	ip.Dst = [16]byte(h[24:40])
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
	readIPv6(h, ip)
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
