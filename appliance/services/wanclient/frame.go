package wanclient

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/net/bpf"
)

const (
	etherTypeIPv4 = 0x0800
	ethHdrLen     = 14
	ipv4HdrLen    = 20
	udpHdrLen     = 8
	ipProtoUDP    = 17
	serverPort    = 67
	clientPort    = 68
	ipTTL         = 64
)

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Reasons a received frame is dropped, as counted in Stats.Ignored.
const (
	dropShort          = "short"            // shorter than Ethernet + IPv4 + UDP headers
	dropNotIPv4        = "not_ipv4"         // another EtherType (or a VLAN tag)
	dropBadIPHeader    = "bad_ip_header"    // version, header or total length wrong
	dropBadIPChecksum  = "bad_ip_checksum"  // IPv4 header checksum wrong
	dropFragment       = "fragment"         // a fragment: DHCP replies are not fragmented
	dropNotUDP         = "not_udp"          // another IP protocol
	dropBadUDPLength   = "bad_udp_length"   // UDP length beyond the IP payload or short
	dropBadUDPChecksum = "bad_udp_checksum" // UDP checksum wrong
	dropWrongPort      = "wrong_port"       // not from port 67 to port 68
	dropBadDHCP        = "bad_dhcp"         // the payload is no DHCP message
	dropNotReply       = "not_reply"        // op is not BOOTREPLY
	dropNotEthernet    = "not_ethernet"     // htype/hlen are not Ethernet's
	dropNoMessageType  = "no_message_type"  // option 53 missing
	dropNotOurMAC      = "not_our_mac"      // the frame is for another host
	dropWrongChaddr    = "wrong_chaddr"     // the reply is for another client
	dropWrongXID       = "wrong_xid"        // no exchange of ours has this xid
	dropUnexpected     = "unexpected_type"  // a message type the state does not take
	dropWrongServer    = "wrong_server"     // from a server other than the one asked
	dropBadOffer       = "bad_offer"        // an OFFER without a usable address or server id
	dropBadLease       = "bad_lease"        // an ACK whose lease cannot be used
	dropQueueFull      = "queue_full"       // the state machine fell behind
)

// udpFrame is an Ethernet/IPv4/UDP frame: the addresses around a payload.
type udpFrame struct {
	DstMAC, SrcMAC   net.HardwareAddr
	SrcIP, DstIP     netip.Addr
	SrcPort, DstPort uint16
	Payload          []byte
}

// marshal builds the frame: Ethernet II, an IPv4 header without options
// (TTL 64, not fragmented) and UDP, both checksums filled in.
func (f *udpFrame) marshal() []byte {
	b := make([]byte, ethHdrLen+ipv4HdrLen+udpHdrLen+len(f.Payload))
	copy(b[0:6], f.DstMAC)
	copy(b[6:12], f.SrcMAC)
	binary.BigEndian.PutUint16(b[12:14], etherTypeIPv4)

	ip := b[ethHdrLen:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipv4HdrLen+udpHdrLen+len(f.Payload)))
	ip[8] = ipTTL
	ip[9] = ipProtoUDP
	src, dst := f.SrcIP.As4(), f.DstIP.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:12], ^fold(sum(ip[:ipv4HdrLen], 0)))

	udp := ip[ipv4HdrLen:]
	binary.BigEndian.PutUint16(udp[0:2], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], f.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpHdrLen+len(f.Payload)))
	copy(udp[udpHdrLen:], f.Payload)
	c := ^fold(sum(udp, pseudoSum(src, dst, len(udp))))
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(udp[6:8], c)
	return b
}

// decodeUDP parses b as an Ethernet/IPv4/UDP frame to dstPort. It returns
// why b is not one, or "". csumValid says the kernel vouches for the UDP
// checksum (it was verified, or not yet filled in by a local sender's
// offload), so it is not checked. Payload aliases b.
func decodeUDP(b []byte, dstPort uint16, csumValid bool) (udpFrame, string) {
	var f udpFrame
	if len(b) < ethHdrLen+ipv4HdrLen+udpHdrLen {
		return f, dropShort
	}
	if binary.BigEndian.Uint16(b[12:14]) != etherTypeIPv4 {
		return f, dropNotIPv4
	}
	f.DstMAC, f.SrcMAC = net.HardwareAddr(b[0:6]), net.HardwareAddr(b[6:12])
	ip := b[ethHdrLen:]
	if ip[0]>>4 != 4 {
		return f, dropBadIPHeader
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if ihl < ipv4HdrLen || total < ihl || total > len(ip) {
		return f, dropBadIPHeader
	}
	if fold(sum(ip[:ihl], 0)) != 0xffff {
		return f, dropBadIPChecksum
	}
	if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 { // MF or an offset
		return f, dropFragment
	}
	if ip[9] != ipProtoUDP {
		return f, dropNotUDP
	}
	f.SrcIP = netip.AddrFrom4([4]byte(ip[12:16]))
	f.DstIP = netip.AddrFrom4([4]byte(ip[16:20]))
	udp := ip[ihl:total]
	if len(udp) < udpHdrLen {
		return f, dropBadUDPLength
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:6]))
	if ulen < udpHdrLen || ulen > len(udp) {
		return f, dropBadUDPLength
	}
	udp = udp[:ulen]
	if binary.BigEndian.Uint16(udp[6:8]) != 0 && !csumValid &&
		fold(sum(udp, pseudoSum(f.SrcIP.As4(), f.DstIP.As4(), ulen))) != 0xffff {
		return f, dropBadUDPChecksum
	}
	f.SrcPort = binary.BigEndian.Uint16(udp[0:2])
	f.DstPort = binary.BigEndian.Uint16(udp[2:4])
	if f.DstPort != dstPort {
		return f, dropWrongPort
	}
	f.Payload = udp[udpHdrLen:]
	return f, ""
}

// reply is a DHCP reply as received, with the frame's addresses.
type reply struct {
	DstMAC, SrcMAC net.HardwareAddr
	SrcIP          netip.Addr
	Msg            *dhcpv4.DHCPv4
}

// decodeReply parses a received frame as a DHCP reply from a server (port
// 67 to port 68). It returns why the frame is not one, or "".
func decodeReply(b []byte, csumValid bool) (reply, string) {
	f, why := decodeUDP(b, clientPort, csumValid)
	if why != "" {
		return reply{}, why
	}
	if f.SrcPort != serverPort {
		return reply{}, dropWrongPort
	}
	msg, err := dhcpv4.FromBytes(f.Payload)
	if err != nil {
		return reply{}, dropBadDHCP
	}
	if msg.OpCode != dhcpv4.OpcodeBootReply {
		return reply{}, dropNotReply
	}
	if msg.HWType != iana.HWTypeEthernet || len(msg.ClientHWAddr) != 6 {
		return reply{}, dropNotEthernet
	}
	if msg.MessageType() == dhcpv4.MessageTypeNone {
		return reply{}, dropNoMessageType
	}
	r := reply{
		DstMAC: append(net.HardwareAddr(nil), f.DstMAC...),
		SrcMAC: append(net.HardwareAddr(nil), f.SrcMAC...),
		SrcIP:  f.SrcIP,
		Msg:    msg,
	}
	return r, ""
}

// replyFilter is the socket's BPF program: IPv4, UDP, not a later
// fragment, destination port 68 (the IPv4 header may carry options).
var replyFilter = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 12, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv4, SkipTrue: 8},
	bpf.LoadAbsolute{Off: ethHdrLen + 9, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ipProtoUDP, SkipTrue: 6},
	bpf.LoadAbsolute{Off: ethHdrLen + 6, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 4},
	bpf.LoadMemShift{Off: ethHdrLen},
	bpf.LoadIndirect{Off: ethHdrLen + 2, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: clientPort, SkipFalse: 1},
	bpf.RetConstant{Val: 0x40000},
	bpf.RetConstant{Val: 0},
}

// sum adds b as big-endian 16-bit words to s (RFC 1071).
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

// fold folds the carries of s into 16 bits.
func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// pseudoSum is the sum of the UDP pseudo-header.
func pseudoSum(src, dst [4]byte, udpLen int) uint32 {
	s := sum(src[:], 0)
	s = sum(dst[:], s)
	return s + ipProtoUDP + uint32(udpLen)
}
