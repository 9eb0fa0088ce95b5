package dhcp6c

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/net/bpf"
)

const (
	etherTypeIPv6 = 0x86dd
	ethHdrLen     = 14
	ipv6HdrLen    = 40
	udpHdrLen     = 8
	ipProtoUDP    = 17
	clientPort    = 546
	serverPort    = 547
	hopLimit      = 1 // every message goes to a link-scope address
)

// allServers is All_DHCP_Relay_Agents_and_Servers, ff02::1:2, and its
// Ethernet multicast address (RFC 2464 section 7).
var (
	allServers    = netip.MustParseAddr("ff02::1:2")
	allServersMAC = net.HardwareAddr{0x33, 0x33, 0x00, 0x01, 0x00, 0x02}
)

// Reasons a received frame is dropped, as counted in Stats.Ignored.
const (
	dropShort          = "short"            // shorter than Ethernet + IPv6 + UDP headers
	dropNotIPv6        = "not_ipv6"         // another EtherType (or a VLAN tag)
	dropBadIPHeader    = "bad_ip_header"    // version or payload length wrong
	dropNotUDP         = "not_udp"          // another next header (extension headers included)
	dropBadUDPLength   = "bad_udp_length"   // UDP length beyond the IP payload or short
	dropBadUDPChecksum = "bad_udp_checksum" // UDP checksum wrong or zero
	dropWrongPort      = "wrong_port"       // not from port 547 to port 546
	dropNotForUs       = "not_for_us"       // another Ethernet or IPv6 destination
	dropBadDHCP        = "bad_dhcp"         // the payload is no DHCPv6 message
	dropWrongXID       = "wrong_xid"        // no exchange of ours has this transaction ID
	dropWrongClient    = "wrong_client"     // the client ID is not ours
	dropUnexpected     = "unexpected_type"  // a message type the state does not take
	dropNoServerID     = "no_server_id"     // an Advertise or Reply without a server ID
	dropWrongServer    = "wrong_server"     // a Reply from a server other than the one asked
	dropNothingOffered = "nothing_offered"  // an Advertise with neither prefix nor address
	dropQueueFull      = "queue_full"       // the state machine fell behind
)

// udp6Frame is an Ethernet/IPv6/UDP frame: the addresses around a payload.
type udp6Frame struct {
	DstMAC, SrcMAC   net.HardwareAddr
	SrcIP, DstIP     netip.Addr
	SrcPort, DstPort uint16
	Payload          []byte
}

// marshal builds the frame: Ethernet II, an IPv6 header without extension
// headers (hop limit 1) and UDP with its checksum.
func (f *udp6Frame) marshal() []byte {
	b := make([]byte, ethHdrLen+ipv6HdrLen+udpHdrLen+len(f.Payload))
	copy(b[0:6], f.DstMAC)
	copy(b[6:12], f.SrcMAC)
	binary.BigEndian.PutUint16(b[12:14], etherTypeIPv6)
	ip := b[ethHdrLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:6], uint16(udpHdrLen+len(f.Payload)))
	ip[6] = ipProtoUDP
	ip[7] = hopLimit
	src, dst := f.SrcIP.As16(), f.DstIP.As16()
	copy(ip[8:24], src[:])
	copy(ip[24:40], dst[:])
	udp := ip[ipv6HdrLen:]
	binary.BigEndian.PutUint16(udp[0:2], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], f.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpHdrLen+len(f.Payload)))
	copy(udp[udpHdrLen:], f.Payload)
	c := ^fold(udpSum(ip[8:40], udp))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:8], c)
	return b
}

// udpSum is the one's complement sum of the IPv6 pseudo-header (addrs is
// source and destination, 32 bytes) and the UDP datagram.
func udpSum(addrs, udp []byte) uint32 {
	s := sum(addrs, 0)
	s += uint32(len(udp)) + ipProtoUDP
	return sum(udp, s)
}

func sum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// received is a DHCPv6 payload as it came: who sent it and to what.
type received struct {
	SrcMAC  net.HardwareAddr
	SrcIP   netip.Addr
	Payload []byte
}

// decodeFrame checks an Ethernet frame from the socket and returns its
// DHCPv6 payload (aliasing b) if it is a UDP datagram from port 547 to
// port 546 for mac and ll (unicast) or a multicast group; why says what is
// wrong otherwise. csumValid skips the UDP checksum the kernel vouched
// for.
func decodeFrame(b []byte, mac net.HardwareAddr, ll netip.Addr, csumValid bool) (received, string) {
	if len(b) < ethHdrLen+ipv6HdrLen+udpHdrLen {
		return received{}, dropShort
	}
	if binary.BigEndian.Uint16(b[12:14]) != etherTypeIPv6 {
		return received{}, dropNotIPv6
	}
	ip := b[ethHdrLen:]
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if ip[0]>>4 != 6 || plen > len(ip)-ipv6HdrLen {
		return received{}, dropBadIPHeader
	}
	if ip[6] != ipProtoUDP {
		return received{}, dropNotUDP
	}
	dst := netip.AddrFrom16([16]byte(ip[24:40]))
	if !(bytes.Equal(b[0:6], mac) && dst == ll) && !(b[0]&1 == 1 && dst.IsMulticast()) {
		return received{}, dropNotForUs
	}
	udp := ip[ipv6HdrLen : ipv6HdrLen+plen]
	if len(udp) < udpHdrLen {
		return received{}, dropBadUDPLength
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:6]))
	if ulen < udpHdrLen || ulen > len(udp) {
		return received{}, dropBadUDPLength
	}
	udp = udp[:ulen]
	if !csumValid && (binary.BigEndian.Uint16(udp[6:8]) == 0 || fold(udpSum(ip[8:40], udp)) != 0xffff) {
		return received{}, dropBadUDPChecksum
	}
	if binary.BigEndian.Uint16(udp[0:2]) != serverPort || binary.BigEndian.Uint16(udp[2:4]) != clientPort {
		return received{}, dropWrongPort
	}
	return received{
		SrcMAC:  net.HardwareAddr(b[6:12]),
		SrcIP:   netip.AddrFrom16([16]byte(ip[8:24])),
		Payload: udp[udpHdrLen:],
	}, ""
}

// replyFilter passes IPv6 frames whose next header is UDP to port 546
// (without extension headers; the decoder checks the rest).
var replyFilter = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 12, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv6, SkipTrue: 5},
	bpf.LoadAbsolute{Off: ethHdrLen + 6, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ipProtoUDP, SkipTrue: 3},
	bpf.LoadAbsolute{Off: ethHdrLen + ipv6HdrLen + 2, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: clientPort, SkipTrue: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
}
