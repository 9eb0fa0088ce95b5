package dhcpclient

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"e1kbox/appliance/dataplane/frame"
)

const (
	ethLen  = frame.EthernetHeaderLen
	ipv4Len = frame.IPv4HeaderLen // without options
	ipv6Len = frame.IPv6HeaderLen // without extension headers
	udpLen  = frame.UDPHeaderLen
	ttl     = 64
	// hopLimit of the IPv6 frames: DHCPv6 clients send to link-scope
	// addresses only.
	hopLimit = 1
)

// Reasons a received frame is dropped before its payload is looked at, as
// the clients count them in Stats.Ignored.
const (
	DropShort          = "short"            // shorter than Ethernet + IP + UDP headers
	DropNotIPv4        = "not_ipv4"         // another EtherType (or a VLAN tag)
	DropNotIPv6        = "not_ipv6"         // another EtherType (or a VLAN tag)
	DropBadIPHeader    = "bad_ip_header"    // version, header, total or payload length wrong
	DropBadIPChecksum  = "bad_ip_checksum"  // IPv4 header checksum wrong
	DropFragment       = "fragment"         // an IPv4 fragment: DHCP replies are not fragmented
	DropNotUDP         = "not_udp"          // another IP protocol (IPv6 extension headers included)
	DropNotForUs       = "not_for_us"       // another Ethernet or IPv6 destination
	DropBadUDPLength   = "bad_udp_length"   // UDP length beyond the IP payload or short
	DropBadUDPChecksum = "bad_udp_checksum" // UDP checksum wrong (or zero, over IPv6)
	DropWrongPort      = "wrong_port"       // not from the server's port to the client's
	DropQueueFull      = "queue_full"       // the state machine fell behind
)

// Frame is an Ethernet/IP/UDP frame: the addresses around a payload. The
// IP addresses say IPv4 or IPv6.
type Frame struct {
	DstMAC, SrcMAC   net.HardwareAddr
	SrcIP, DstIP     netip.Addr
	SrcPort, DstPort uint16
	Payload          []byte
}

// Marshal builds the frame: Ethernet II; an IPv4 header without options
// (TTL 64, not fragmented) or an IPv6 header without extension headers
// (hop limit 1); UDP. Both checksums are filled in.
func (f *Frame) Marshal() []byte {
	v6 := f.SrcIP.Is6()
	ipLen, etherType := ipv4Len, uint16(frame.EtherTypeIPv4)
	if v6 {
		ipLen, etherType = ipv6Len, frame.EtherTypeIPv6
	}
	n := udpLen + len(f.Payload)
	b := make([]byte, ethLen+ipLen+n)
	copy(b[0:6], f.DstMAC)
	copy(b[6:12], f.SrcMAC)
	binary.BigEndian.PutUint16(b[12:14], etherType)

	ip := b[ethLen:]
	if v6 {
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:6], uint16(n))
		ip[6] = frame.ProtoUDP
		ip[7] = hopLimit
		src, dst := f.SrcIP.As16(), f.DstIP.As16()
		copy(ip[8:24], src[:])
		copy(ip[24:40], dst[:])
	} else {
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen+n))
		ip[8] = ttl
		ip[9] = frame.ProtoUDP
		src, dst := f.SrcIP.As4(), f.DstIP.As4()
		copy(ip[12:16], src[:])
		copy(ip[16:20], dst[:])
		binary.BigEndian.PutUint16(ip[10:12], frame.Checksum(ip[:ipLen], 0))
	}

	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:2], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], f.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(n))
	copy(udp[udpLen:], f.Payload)
	c := frame.Checksum(udp, pseudoSum(f.SrcIP, f.DstIP, n))
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(udp[6:8], c)
	return b
}

// pseudoSum is the sum of the UDP pseudo-header for a datagram of n bytes.
func pseudoSum(src, dst netip.Addr, n int) uint16 {
	if src.Is4() {
		return frame.PseudoSumIPv4(src.As4(), dst.As4(), frame.ProtoUDP, uint16(n))
	}
	return frame.PseudoSumIPv6(src.As16(), dst.As16(), frame.ProtoUDP, uint32(n))
}

// DecodeIPv4 parses b as an Ethernet/IPv4/UDP frame to port. It returns
// why b is not one, or "". csumValid says the kernel vouches for the UDP
// checksum (it was verified, or not yet filled in by a local sender's
// offload), so it is not checked; a zero one means none (RFC 768). The
// MACs and Payload alias b.
func DecodeIPv4(b []byte, port uint16, csumValid bool) (Frame, string) {
	var f Frame
	ip, why := f.ethernet(b, frame.EtherTypeIPv4, ipv4Len)
	if why != "" {
		return f, why
	}
	if ip[0]>>4 != 4 {
		return f, DropBadIPHeader
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if ihl < ipv4Len || total < ihl || total > len(ip) {
		return f, DropBadIPHeader
	}
	if frame.Sum(ip[:ihl], 0) != 0xffff {
		return f, DropBadIPChecksum
	}
	if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 { // MF or an offset
		return f, DropFragment
	}
	if ip[9] != frame.ProtoUDP {
		return f, DropNotUDP
	}
	f.SrcIP = netip.AddrFrom4([4]byte(ip[12:16]))
	f.DstIP = netip.AddrFrom4([4]byte(ip[16:20]))
	return f, f.datagram(ip[ihl:total], port, csumValid)
}

// DecodeIPv6 parses b as an Ethernet/IPv6/UDP frame without extension
// headers to port, for mac and ll (unicast) or to a multicast group. It
// returns why b is not one, or "". csumValid is as in DecodeIPv4; a zero
// UDP checksum is wrong (RFC 8200 section 8.1). The MACs and Payload
// alias b.
func DecodeIPv6(b []byte, mac net.HardwareAddr, ll netip.Addr, port uint16, csumValid bool) (Frame, string) {
	var f Frame
	ip, why := f.ethernet(b, frame.EtherTypeIPv6, ipv6Len)
	if why != "" {
		return f, why
	}
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if ip[0]>>4 != 6 || plen > len(ip)-ipv6Len {
		return f, DropBadIPHeader
	}
	if ip[6] != frame.ProtoUDP {
		return f, DropNotUDP
	}
	f.SrcIP = netip.AddrFrom16([16]byte(ip[8:24]))
	f.DstIP = netip.AddrFrom16([16]byte(ip[24:40]))
	if !(bytes.Equal(f.DstMAC, mac) && f.DstIP == ll) && !(f.DstMAC[0]&1 == 1 && f.DstIP.IsMulticast()) {
		return f, DropNotForUs
	}
	return f, f.datagram(ip[ipv6Len:ipv6Len+plen], port, csumValid)
}

// ethernet checks that b is long enough for Ethernet, an IP header of
// ipLen and UDP, and of etherType; it fills in the MACs and returns the IP
// packet, or why b is none.
func (f *Frame) ethernet(b []byte, etherType uint16, ipLen int) ([]byte, string) {
	if len(b) < ethLen+ipLen+udpLen {
		return nil, DropShort
	}
	if binary.BigEndian.Uint16(b[12:14]) != etherType {
		if etherType == frame.EtherTypeIPv6 {
			return nil, DropNotIPv6
		}
		return nil, DropNotIPv4
	}
	f.DstMAC, f.SrcMAC = net.HardwareAddr(b[0:6]), net.HardwareAddr(b[6:12])
	return b[ethLen:], ""
}

// datagram checks the UDP datagram at the start of p (the IP payload) for
// f's addresses and fills in the ports and the payload; it returns why it
// is not one to port, or "".
func (f *Frame) datagram(p []byte, port uint16, csumValid bool) string {
	if len(p) < udpLen {
		return DropBadUDPLength
	}
	n := int(binary.BigEndian.Uint16(p[4:6]))
	if n < udpLen || n > len(p) {
		return DropBadUDPLength
	}
	udp := p[:n]
	if csum := binary.BigEndian.Uint16(udp[6:8]); !csumValid {
		none := csum == 0 && f.SrcIP.Is4()
		if !none && (csum == 0 || frame.Sum(udp, pseudoSum(f.SrcIP, f.DstIP, n)) != 0xffff) {
			return DropBadUDPChecksum
		}
	}
	f.SrcPort = binary.BigEndian.Uint16(udp[0:2])
	f.DstPort = binary.BigEndian.Uint16(udp[2:4])
	if f.DstPort != port {
		return DropWrongPort
	}
	f.Payload = udp[udpLen:]
	return ""
}
