package fastpath

import (
	"encoding/binary"
	"fmt"

	"e1kbox/appliance/dataplane/frame"
)

// Sample is the self-test's representative traffic (MeasureSelf): a LAN
// host's UDP datagram to a server on the internet, through the NAT router,
// and the same datagram bridged to a peer on the LAN. Its addresses are
// documentation ones (RFC 5737: 192.0.2.0/24 the LAN, 203.0.113.0/24 the
// WAN, 198.51.100.0/24 the server's) and its MACs locally administered, so
// no flow of the self-test can be a real host's.
type Sample struct {
	RouterLAN, RouterWAN, Host, Peer, Gateway           [6]byte
	LANAddr, WANAddr, HostAddr, ServerAddr, GatewayAddr [4]byte
	// Bits is the prefix length of the LAN and the WAN subnet.
	Bits int
	// SrcPort and DstPort are the datagram's (the NAT keeps the source
	// port).
	SrcPort, DstPort uint16
}

// SampleTraffic returns the self-test's traffic.
func SampleTraffic() Sample {
	mac := func(b byte) [6]byte { return [6]byte{0x02, 0xe1, 0x5e, 0x1f, 0x7e, b} }
	return Sample{
		RouterLAN: mac(1), RouterWAN: mac(2), Host: mac(3), Peer: mac(4), Gateway: mac(5),
		LANAddr: [4]byte{192, 0, 2, 1}, HostAddr: [4]byte{192, 0, 2, 10},
		WANAddr: [4]byte{203, 0, 113, 2}, GatewayAddr: [4]byte{203, 0, 113, 1},
		ServerAddr: [4]byte{198, 51, 100, 9},
		Bits:       24,
		SrcPort:    40000, DstPort: 53,
	}
}

// NATFrame is the host's datagram to the server, sent to the router's LAN
// MAC: a frame of an established NAT flow.
func (s *Sample) NATFrame() []byte {
	return udpFrame(s.RouterLAN, s.Host, s.HostAddr, s.ServerAddr, s.SrcPort, s.DstPort)
}

// PairFrame is the same datagram sent to the peer's MAC: a frame of a
// bridged pair.
func (s *Sample) PairFrame() []byte {
	return udpFrame(s.Peer, s.Host, s.HostAddr, s.ServerAddr, s.SrcPort, s.DstPort)
}

// MissFrame is NATFrame from the next source port: a frame of no flow.
func (s *Sample) MissFrame() []byte {
	return udpFrame(s.RouterLAN, s.Host, s.HostAddr, s.ServerAddr, s.SrcPort+1, s.DstPort)
}

// ReplyFrame is the server's answer to the WAN address and port (the
// NAT's source port of the host's datagram), from the gateway's MAC.
func (s *Sample) ReplyFrame(port uint16) []byte {
	return udpFrame(s.RouterWAN, s.Gateway, s.ServerAddr, s.WANAddr, s.DstPort, port)
}

// natRule is one NAT flow: its key and what it does.
type natRule struct {
	key  NATKey
	flow NATFlow
}

// natFlows are the sample's NAT flow as the router installs it (frames
// arriving on interface in leave on out, counted in slot) and, for the
// self-test's repeated runs on one frame, a flow that translates its
// frames back: the host's frame, translated, is a frame of the second
// flow, which makes it the host's again (one hop less). Both rewrite the
// source address, the MACs, the TTL and the checksums.
func (s *Sample) natFlows(in, out int, slot uint32) [2]natRule {
	return [2]natRule{
		{NATKey{Ifindex: in, Src: s.HostAddr, Dst: s.ServerAddr, SrcPort: s.SrcPort, DstPort: s.DstPort, Proto: frame.ProtoUDP},
			NATFlow{DstMAC: s.Gateway, SrcMAC: s.RouterWAN, InDstMAC: s.RouterLAN, InSrcMAC: s.Host, CheckSrcMAC: true,
				Src: s.WANAddr, Dst: s.ServerAddr, SrcPort: s.SrcPort, DstPort: s.DstPort, OutIfindex: out, Slot: slot,
				MaxFrame: 1514, MaxIP: 1500}},
		{NATKey{Ifindex: in, Src: s.WANAddr, Dst: s.ServerAddr, SrcPort: s.SrcPort, DstPort: s.DstPort, Proto: frame.ProtoUDP},
			NATFlow{DstMAC: s.RouterLAN, SrcMAC: s.Host, InDstMAC: s.Gateway, InSrcMAC: s.RouterWAN, CheckSrcMAC: true,
				Src: s.HostAddr, Dst: s.ServerAddr, SrcPort: s.SrcPort, DstPort: s.DstPort, OutIfindex: out, Slot: slot,
				MaxFrame: 1514, MaxIP: 1500}},
	}
}

// putNAT installs the sample's NAT flows (natFlows) into p.
func (s *Sample) putNAT(p *Program, in, out int, slot uint32) error {
	for _, f := range s.natFlows(in, out, slot) {
		if err := p.PutNAT(f.key, f.flow); err != nil {
			return err
		}
	}
	return nil
}

// pair is the sample's bridged pair (the rules give all its frames one
// verdict): frames arriving on interface in leave on out, counted in slot.
func (s *Sample) pair(in, out int, slot uint32) (PairKey, Pair) {
	return PairKey{Ifindex: in, Dst: s.Peer, Src: s.Host}, Pair{OutIfindex: out, Slot: slot, MaxWire: 1514, L2Only: true}
}

// udpPayload makes the sample's frames the shortest Ethernet frame
// (without its FCS), the size a bench's packet rate is quoted at.
const udpPayload = frame.MinFrameLen - frame.EthernetHeaderLen - frame.IPv4HeaderLen - 8

// udpFrame is a UDP/IPv4 datagram of udpPayload zero bytes, its checksums
// set, with a TTL of 255: the self-test forwards it up to 254 times
// (SelfTestBatch).
func udpFrame(to, from [6]byte, src, dst [4]byte, sport, dport uint16) []byte {
	b := make([]byte, frame.MinFrameLen)
	n := frame.PutEthernet(b, to, from, nil, frame.EtherTypeIPv4)
	n += frame.PutIPv4Header(b[n:], &frame.IPv4{TotalLen: uint16(len(b) - n), TTL: 255, Protocol: frame.ProtoUDP, Src: src, Dst: dst})
	binary.BigEndian.PutUint16(b[n:], sport)
	binary.BigEndian.PutUint16(b[n+2:], dport)
	binary.BigEndian.PutUint16(b[n+4:], uint16(8+udpPayload))
	binary.BigEndian.PutUint16(b[n+6:], 1) // not 0 ("no checksum"), so that SetChecksums sets it
	var f frame.Frame
	if err := frame.Parse(b, &f); err != nil {
		panic(fmt.Sprintf("fastpath: the sample's frame does not parse: %v", err)) // constant input: a bug here
	}
	frame.SetChecksums(b, &f)
	return b
}
