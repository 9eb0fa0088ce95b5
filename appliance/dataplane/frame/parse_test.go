package frame

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
)

func u16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }

type parseCase struct {
	name  string
	b     []byte
	tag   *VLANTag // ParseWithTag when set
	want  Frame
	inner *Inner // ParseEmbedded result when set
}

// bootp returns a DHCPDISCOVER body as dhclient sends it (300 bytes).
func bootp(chaddr mac, xid uint32) []byte {
	b := make([]byte, 236)
	b[0], b[1], b[2] = 1, 1, 6 // BOOTREQUEST, Ethernet, hlen 6
	binary.BigEndian.PutUint32(b[4:], xid)
	copy(b[28:], chaddr[:])
	b = append(b, 0x63, 0x82, 0x53, 0x63) // magic cookie
	b = append(b, 53, 1, 1)               // DHCPDISCOVER
	b = append(b, 55, 4, 1, 3, 6, 15)     // parameter request list
	b = append(b, 255)
	for len(b) < 300 {
		b = append(b, 0)
	}
	return b
}

// synOpts are the options of a Linux SYN: MSS, SACK permitted, timestamps,
// NOP, window scale.
var synOpts = []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x00, 0x6e, 0x2d, 0x41, 0, 0, 0, 0, 1, 3, 3, 7}

func parseCases() []parseCase {
	var cs []parseCase

	{ // DHCPDISCOVER: 0.0.0.0:68 -> 255.255.255.255:67, broadcast
		ip := frametest.IPv4{Src: ip4Zero, Dst: ip4Bcast, Proto: ProtoUDP, TTL: 64, TOS: 0x10}
		b := slices.Concat(frametest.Eth(macBcast, macA, EtherTypeIPv4), ip.Build(ip.UDP(68, 67, bootp(macA, 0x3903f326))))
		cs = append(cs, parseCase{name: "dhcp discover", b: b, want: Frame{
			Dst: macBcast, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 342,
			IPv4:  IPv4{IHL: 5, TOS: 0x10, TotalLen: 328, TTL: 64, Protocol: ProtoUDP, Checksum: u16(b, 24), Src: ip4Zero, Dst: ip4Bcast},
			Proto: ProtoUDP, L4Off: 34, PayloadOff: 42,
			UDP: UDP{SrcPort: 68, DstPort: 67, Length: 308, Checksum: u16(b, 40)},
		}})
	}
	{ // ARP request, padded to the Ethernet minimum
		b := frametest.Pad(slices.Concat(frametest.Eth(macBcast, macA, EtherTypeARP), frametest.ARP(1, macA, ip4A, mac{}, ip4B)))
		cs = append(cs, parseCase{name: "arp request", b: b, want: Frame{
			Dst: macBcast, Src: macA, EtherType: EtherTypeARP, L3Off: 14, L3End: 42,
			ARP: ARP{Op: 1, SenderMAC: macA, SenderIP: ip4A, TargetIP: ip4B},
		}})
	}
	{ // ARP reply
		b := frametest.Pad(slices.Concat(frametest.Eth(macA, macB, EtherTypeARP), frametest.ARP(2, macB, ip4B, macA, ip4A)))
		cs = append(cs, parseCase{name: "arp reply", b: b, want: Frame{
			Dst: macA, Src: macB, EtherType: EtherTypeARP, L3Off: 14, L3End: 42,
			ARP: ARP{Op: 2, SenderMAC: macB, SenderIP: ip4B, TargetMAC: macA, TargetIP: ip4A},
		}})
	}
	{ // ICMP echo request as ping sends it (56 data bytes)
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 64, ID: 0x1c46, DF: true}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPEchoRequest, 0, 0x1234<<16|1, frametest.Payload(56))))
		cs = append(cs, parseCase{name: "icmp echo request", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 98,
			IPv4:  IPv4{IHL: 5, TotalLen: 84, ID: 0x1c46, DF: true, TTL: 64, Protocol: ProtoICMP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoICMP, L4Off: 34, PayloadOff: 42,
			ICMP: ICMP{Type: ICMPEchoRequest, Checksum: u16(b, 36), ID: 0x1234, Seq: 1},
		}})
	}
	{ // ICMP echo reply without data: Ethernet padding is not part of the packet
		ip := frametest.IPv4{Src: ip4B, Dst: ip4A, Proto: ProtoICMP, TTL: 64, ID: 7}
		b := frametest.Pad(slices.Concat(frametest.Eth(macA, macB, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPEchoReply, 0, 0x1234<<16|9, nil))))
		cs = append(cs, parseCase{name: "icmp echo reply padded", b: b, want: Frame{
			Dst: macA, Src: macB, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 42,
			IPv4:  IPv4{IHL: 5, TotalLen: 28, ID: 7, TTL: 64, Protocol: ProtoICMP, Checksum: u16(b, 24), Src: ip4B, Dst: ip4A},
			Proto: ProtoICMP, L4Off: 34, PayloadOff: 42,
			ICMP: ICMP{Type: ICMPEchoReply, Checksum: u16(b, 36), ID: 0x1234, Seq: 9},
		}})
	}
	{ // TCP SYN with the options Linux sends
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoTCP, TTL: 64, ID: 0xbeef, DF: true}
		t := frametest.TCP{SrcPort: 43210, DstPort: 80, Seq: 0x9a3b1c2d, Flags: TCPSyn, Window: 64240, Opts: synOpts}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.TCP(t, nil)))
		cs = append(cs, parseCase{name: "tcp syn with options", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 74,
			IPv4:  IPv4{IHL: 5, TotalLen: 60, ID: 0xbeef, DF: true, TTL: 64, Protocol: ProtoTCP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoTCP, L4Off: 34, PayloadOff: 74,
			TCP: TCP{SrcPort: 43210, DstPort: 80, Seq: 0x9a3b1c2d, DataOff: 10, Flags: TCPSyn, Window: 64240, Checksum: u16(b, 50)},
		}})
	}
	{ // IPv6 neighbour solicitation with a source link-layer address option
		ip := frametest.IPv6{Src: ip6LLA, Dst: ip6SolB, NextHeader: ProtoICMPv6, HopLimit: 255}
		body := slices.Concat(ip6B[:], []byte{1, 1}, macA[:])
		dst := mac{0x33, 0x33, 0xff, 0x00, 0x00, 0x0b}
		b := slices.Concat(frametest.Eth(dst, macA, EtherTypeIPv6), ip.Build(ip.ICMP(135, 0, 0, body)))
		cs = append(cs, parseCase{name: "ipv6 neighbour solicitation", b: b, want: Frame{
			Dst: dst, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 86,
			IPv6:  IPv6{PayloadLen: 32, NextHeader: ProtoICMPv6, HopLimit: 255, Src: ip6LLA, Dst: ip6SolB},
			Proto: ProtoICMPv6, L4Off: 54, PayloadOff: 62,
			ICMP: ICMP{Type: 135, Checksum: u16(b, 56)},
		}})
	}
	{ // ICMPv6 echo request with traffic class and flow label
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoICMPv6, HopLimit: 64, TrafficClass: 0xb8, FlowLabel: 0x12345}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(ip.ICMP(ICMPv6EchoRequest, 0, 0x0042<<16|3, frametest.Payload(56))))
		cs = append(cs, parseCase{name: "icmpv6 echo request", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 118,
			IPv6:  IPv6{TrafficClass: 0xb8, FlowLabel: 0x12345, PayloadLen: 64, NextHeader: ProtoICMPv6, HopLimit: 64, Src: ip6A, Dst: ip6B},
			Proto: ProtoICMPv6, L4Off: 54, PayloadOff: 62,
			ICMP: ICMP{Type: ICMPv6EchoRequest, Checksum: u16(b, 56), ID: 0x42, Seq: 3},
		}})
	}
	{ // IPv6 hop-by-hop (router alert) + fragment header, first fragment of UDP
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoHopByHop, HopLimit: 64}
		dgram := ip.UDP(5000, 6000, frametest.Payload(1000)) // 1008 bytes in all
		payload := slices.Concat(frametest.Ext6(ProtoFragment, []byte{5, 2, 0, 0, 1, 0}), frametest.Frag6(ProtoUDP, 0, true, 0xdeadbeef), dgram[:520])
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(payload))
		cs = append(cs, parseCase{name: "ipv6 hop-by-hop + first fragment", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 590,
			IPv6: IPv6{PayloadLen: 536, NextHeader: ProtoHopByHop, HopLimit: 64, Src: ip6A, Dst: ip6B,
				Exts: ExtHopByHop | ExtFragment, MF: true, FragID: 0xdeadbeef},
			Proto: ProtoUDP, Fragment: true, L4Off: 70, PayloadOff: 78,
			UDP: UDP{SrcPort: 5000, DstPort: 6000, Length: 1008, Checksum: u16(dgram, 6)},
		}})
		ip.NextHeader = ProtoFragment
		b = slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(slices.Concat(frametest.Frag6(ProtoUDP, 65, false, 0xdeadbeef), dgram[520:])))
		cs = append(cs, parseCase{name: "ipv6 later fragment", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 550,
			IPv6: IPv6{PayloadLen: 496, NextHeader: ProtoFragment, HopLimit: 64, Src: ip6A, Dst: ip6B,
				Exts: ExtFragment, FragOff: 65, FragID: 0xdeadbeef},
			Proto: ProtoUDP, Fragment: true, LaterFragment: true, PayloadOff: 62,
		}})
	}
	{ // IPv6 atomic fragment (offset 0, M clear) is a whole packet
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoFragment, HopLimit: 64}
		seg := ip.UDP(53, 53000, frametest.Payload(20))
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(slices.Concat(frametest.Frag6(ProtoUDP, 0, false, 1), seg)))
		cs = append(cs, parseCase{name: "ipv6 atomic fragment", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 90,
			IPv6:  IPv6{PayloadLen: 36, NextHeader: ProtoFragment, HopLimit: 64, Src: ip6A, Dst: ip6B, Exts: ExtFragment, FragID: 1},
			Proto: ProtoUDP, L4Off: 62, PayloadOff: 70,
			UDP: UDP{SrcPort: 53, DstPort: 53000, Length: 28, Checksum: u16(seg, 6)},
		}})
	}
	{ // IPv6 destination options + routing + AH + TCP
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoDestOpts, HopLimit: 64}
		seg := ip.TCP(frametest.TCP{SrcPort: 22, DstPort: 50000, Seq: 1, Ack: 2, Flags: TCPAck | TCPPsh, Window: 501}, frametest.Payload(10))
		payload := slices.Concat(frametest.Ext6(ProtoRouting, []byte{1, 4, 0, 0, 0, 0}),
			frametest.Ext6(ProtoAH, slices.Concat([]byte{4, 0, 0, 0, 0, 0}, ip6B[:])), frametest.AH6(ProtoTCP, 0x100, 5), seg)
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(payload))
		l4 := 14 + 40 + 8 + 24 + 24
		cs = append(cs, parseCase{name: "ipv6 destopts routing ah tcp", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: l4 + 30,
			IPv6:  IPv6{PayloadLen: uint16(len(payload)), NextHeader: ProtoDestOpts, HopLimit: 64, Src: ip6A, Dst: ip6B, Exts: ExtDestOpts | ExtRouting | ExtAH},
			Proto: ProtoTCP, L4Off: l4, PayloadOff: l4 + 20,
			TCP: TCP{SrcPort: 22, DstPort: 50000, Seq: 1, Ack: 2, DataOff: 5, Flags: TCPAck | TCPPsh, Window: 501, Checksum: u16(seg, 16)},
		}})
	}
	{ // IPv6 ESP ends the chain
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoESP, HopLimit: 64}
		esp := []byte{0, 0, 0x10, 0x01, 0, 0, 0, 1} // SPI 0x1001, sequence number 1
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(slices.Concat(esp, frametest.Payload(40))))
		cs = append(cs, parseCase{name: "ipv6 esp", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 102,
			IPv6:  IPv6{PayloadLen: 48, NextHeader: ProtoESP, HopLimit: 64, Src: ip6A, Dst: ip6B},
			Proto: ProtoESP, L4Off: 54,
		}})
	}
	{ // IPv6 hop-by-hop then no next header
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoHopByHop, HopLimit: 1}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(frametest.Ext6(ProtoNoNext, []byte{1, 4})))
		cs = append(cs, parseCase{name: "ipv6 no next header", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 62,
			IPv6:  IPv6{PayloadLen: 8, NextHeader: ProtoHopByHop, HopLimit: 1, Src: ip6A, Dst: ip6B, Exts: ExtHopByHop},
			Proto: ProtoNoNext,
		}})
	}
	{ // QinQ: 802.1ad outer (PCP 3, VID 100) + 802.1Q inner (VID 200), UDP
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 255, ID: 1}
		outer := VLANTag{TPID: EtherTypeQinQ, TCI: 3<<13 | 100}
		inner := VLANTag{TPID: EtherTypeVLAN, TCI: 0x1000 | 200} // DEI set
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4, frametest.Tag(outer), frametest.Tag(inner)), ip.Build(ip.UDP(5353, 5353, frametest.Payload(12))))
		cs = append(cs, parseCase{name: "qinq udp", b: b, want: Frame{
			Dst: macB, Src: macA, Tags: [2]VLANTag{outer, inner}, NTags: 2, EtherType: EtherTypeIPv4, L3Off: 22, L3End: 62,
			IPv4:  IPv4{IHL: 5, TotalLen: 40, ID: 1, TTL: 255, Protocol: ProtoUDP, Checksum: u16(b, 32), Src: ip4A, Dst: ip4B},
			Proto: ProtoUDP, L4Off: 42, PayloadOff: 50,
			UDP: UDP{SrcPort: 5353, DstPort: 5353, Length: 20, Checksum: u16(b, 48)},
		}})
	}
	{ // 802.1Q (PCP 5, VID 10) TCP over IPv6 with a timestamp option
		ip := frametest.IPv6{Src: ip6B, Dst: ip6A, NextHeader: ProtoTCP, HopLimit: 63}
		tag := VLANTag{TPID: EtherTypeVLAN, TCI: 5<<13 | 10}
		seg := ip.TCP(frametest.TCP{SrcPort: 443, DstPort: 40000, Seq: 1000, Ack: 2000, Flags: TCPAck, Window: 1024,
			Opts: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}}, frametest.Payload(100))
		b := slices.Concat(frametest.Eth(macA, macB, EtherTypeIPv6, frametest.Tag(tag)), ip.Build(seg))
		cs = append(cs, parseCase{name: "vlan tcp ipv6", b: b, want: Frame{
			Dst: macA, Src: macB, Tags: [2]VLANTag{tag}, NTags: 1, EtherType: EtherTypeIPv6, L3Off: 18, L3End: 190,
			IPv6:  IPv6{PayloadLen: 132, NextHeader: ProtoTCP, HopLimit: 63, Src: ip6B, Dst: ip6A},
			Proto: ProtoTCP, L4Off: 58, PayloadOff: 90,
			TCP: TCP{SrcPort: 443, DstPort: 40000, Seq: 1000, Ack: 2000, DataOff: 8, Flags: TCPAck, Window: 1024, Checksum: u16(seg, 16)},
		}})
	}
	{ // IPv4 with a router alert option: IGMPv2 membership report, padded
		ip := frametest.IPv4{Src: ip4A, Dst: ip4IGMPv2, Proto: 2, TTL: 1, TOS: 0xc0, Opts: []byte{0x94, 4, 0, 0}}
		igmp := frametest.WithChecksum(slices.Concat([]byte{0x16, 0, 0, 0}, ip4IGMPv2[:]), 2, nil)
		dst := mac{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb}
		b := frametest.Pad(slices.Concat(frametest.Eth(dst, macA, EtherTypeIPv4), ip.Build(igmp)))
		cs = append(cs, parseCase{name: "ipv4 options igmp", b: b, want: Frame{
			Dst: dst, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 46,
			IPv4:  IPv4{IHL: 6, TOS: 0xc0, TotalLen: 32, TTL: 1, Protocol: 2, Checksum: u16(b, 24), Src: ip4A, Dst: ip4IGMPv2},
			Proto: 2, L4Off: 38,
		}})
	}
	{ // IPv4 with options (NOPs + timestamp) carrying UDP
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64, Opts: []byte{1, 1, 1, 0x44, 12, 5, 0, 0, 0, 0, 0, 0}}
		seg := ip.UDP(1000, 2000, frametest.Payload(5))
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(seg))
		cs = append(cs, parseCase{name: "ipv4 options udp", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 59,
			IPv4:  IPv4{IHL: 8, TotalLen: 45, TTL: 64, Protocol: ProtoUDP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoUDP, L4Off: 46, PayloadOff: 54,
			UDP: UDP{SrcPort: 1000, DstPort: 2000, Length: 13, Checksum: u16(seg, 6)},
		}})
	}
	{ // IPv4 first and later fragment of a 2008-byte UDP datagram
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64, ID: 0x4242, MF: true}
		dgram := ip.UDP(7000, 8000, frametest.Payload(2000))
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(dgram[:1480]))
		cs = append(cs, parseCase{name: "ipv4 first fragment", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 1514,
			IPv4:  IPv4{IHL: 5, TotalLen: 1500, ID: 0x4242, MF: true, TTL: 64, Protocol: ProtoUDP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoUDP, Fragment: true, L4Off: 34, PayloadOff: 42,
			UDP: UDP{SrcPort: 7000, DstPort: 8000, Length: 2008, Checksum: u16(dgram, 6)},
		}})
		ip.MF, ip.FragOff = false, 185
		b = slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(dgram[1480:]))
		cs = append(cs, parseCase{name: "ipv4 later fragment", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 562,
			IPv4:  IPv4{IHL: 5, TotalLen: 548, ID: 0x4242, FragOff: 185, TTL: 64, Protocol: ProtoUDP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoUDP, Fragment: true, LaterFragment: true, PayloadOff: 34,
		}})
	}
	{ // ICMP port unreachable quoting the IPv4 + UDP header
		orig := frametest.IPv4{Src: ip4B, Dst: ip4A, Proto: ProtoUDP, TTL: 64, ID: 0x77}
		quoted := orig.Build(orig.UDP(40001, 33434, frametest.Payload(32)))
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 64, TOS: 0xc0, ID: 0x99}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPDestUnreach, 3, 0, quoted[:28])))
		cs = append(cs, parseCase{name: "icmp port unreachable", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 70,
			IPv4:  IPv4{IHL: 5, TOS: 0xc0, TotalLen: 56, ID: 0x99, TTL: 64, Protocol: ProtoICMP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoICMP, L4Off: 34, PayloadOff: 42,
			ICMP: ICMP{Type: ICMPDestUnreach, Code: 3, Checksum: u16(b, 36), EmbeddedOff: 42},
		}, inner: &Inner{
			L3Off: 42,
			IPv4:  IPv4{IHL: 5, TotalLen: 60, ID: 0x77, TTL: 64, Protocol: ProtoUDP, Checksum: u16(quoted, 10), Src: ip4B, Dst: ip4A},
			Proto: ProtoUDP, L4Off: 62, SrcPort: 40001, DstPort: 33434,
		}})
	}
	{ // ICMP time exceeded quoting an ICMP echo request
		orig := frametest.IPv4{Src: ip4B, Dst: ip4A, Proto: ProtoICMP, TTL: 1, ID: 5}
		quoted := orig.Build(frametest.ICMPv4(ICMPEchoRequest, 0, 0xabcd<<16|2, frametest.Payload(8)))
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 64}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPTimeExceeded, 0, 0, quoted)))
		cs = append(cs, parseCase{name: "icmp time exceeded quoting echo", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv4, L3Off: 14, L3End: 78,
			IPv4:  IPv4{IHL: 5, TotalLen: 64, TTL: 64, Protocol: ProtoICMP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoICMP, L4Off: 34, PayloadOff: 42,
			ICMP: ICMP{Type: ICMPTimeExceeded, Checksum: u16(b, 36), EmbeddedOff: 42},
		}, inner: &Inner{
			L3Off: 42,
			IPv4:  IPv4{IHL: 5, TotalLen: 36, ID: 5, TTL: 1, Protocol: ProtoICMP, Checksum: u16(quoted, 10), Src: ip4B, Dst: ip4A},
			Proto: ProtoICMP, L4Off: 62, ICMPType: ICMPEchoRequest, ICMPID: 0xabcd,
		}})
	}
	{ // ICMPv6 port unreachable quoting IPv6 + UDP
		orig := frametest.IPv6{Src: ip6B, Dst: ip6A, NextHeader: ProtoUDP, HopLimit: 64}
		quoted := orig.Build(orig.UDP(40002, 33435, frametest.Payload(100)))
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoICMPv6, HopLimit: 64}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(ip.ICMP(ICMPv6DestUnreach, 4, 0, quoted)))
		cs = append(cs, parseCase{name: "icmpv6 port unreachable", b: b, want: Frame{
			Dst: macB, Src: macA, EtherType: EtherTypeIPv6, L3Off: 14, L3End: 210,
			IPv6:  IPv6{PayloadLen: 156, NextHeader: ProtoICMPv6, HopLimit: 64, Src: ip6A, Dst: ip6B},
			Proto: ProtoICMPv6, L4Off: 54, PayloadOff: 62,
			ICMP: ICMP{Type: ICMPv6DestUnreach, Code: 4, Checksum: u16(b, 56), EmbeddedOff: 62},
		}, inner: &Inner{
			L3Off: 62,
			IPv6:  IPv6{PayloadLen: 108, NextHeader: ProtoUDP, HopLimit: 64, Src: ip6B, Dst: ip6A},
			Proto: ProtoUDP, L4Off: 102, SrcPort: 40002, DstPort: 33435,
		}})
	}
	{ // LLDP: unknown EtherType, no L3 parsing
		b := frametest.Pad(slices.Concat(frametest.Eth(mac{0x01, 0x80, 0xc2, 0, 0, 0x0e}, macA, 0x88cc), []byte{2, 7, 4, 2, 0, 0, 0, 0, 0x0a}))
		cs = append(cs, parseCase{name: "lldp", b: b, want: Frame{
			Dst: mac{0x01, 0x80, 0xc2, 0, 0, 0x0e}, Src: macA, EtherType: 0x88cc, L3Off: 14, L3End: 60,
		}})
	}
	{ // STP BPDU: 802.3 length field
		bpdu := slices.Concat([]byte{0x42, 0x42, 0x03}, make([]byte, 35))
		b := frametest.Pad(slices.Concat(frametest.Eth(mac{0x01, 0x80, 0xc2, 0, 0, 0}, macA, uint16(len(bpdu))), bpdu))
		cs = append(cs, parseCase{name: "stp bpdu 802.3", b: b, want: Frame{
			Dst: mac{0x01, 0x80, 0xc2, 0, 0, 0}, Src: macA, EtherType: 38, L3Off: 14, L3End: 60,
		}})
	}
	{ // tag stripped by the kernel, frame untagged in the buffer
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64}
		b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.UDP(1, 2, frametest.Payload(4))))
		cs = append(cs, parseCase{name: "stripped tag", b: b, tag: &VLANTag{TCI: 0x2064}, want: Frame{
			Dst: macB, Src: macA, Tags: [2]VLANTag{{TPID: EtherTypeVLAN, TCI: 0x2064}}, NTags: 1, Stripped: true,
			EtherType: EtherTypeIPv4, L3Off: 14, L3End: 46,
			IPv4:  IPv4{IHL: 5, TotalLen: 32, TTL: 64, Protocol: ProtoUDP, Checksum: u16(b, 24), Src: ip4A, Dst: ip4B},
			Proto: ProtoUDP, L4Off: 34, PayloadOff: 42,
			UDP: UDP{SrcPort: 1, DstPort: 2, Length: 12, Checksum: u16(b, 40)},
		}})
		inner := VLANTag{TPID: EtherTypeVLAN, TCI: 30}
		b = slices.Concat(frametest.Eth(macB, macA, EtherTypeARP, frametest.Tag(inner)), frametest.ARP(1, macA, ip4A, mac{}, ip4B))
		cs = append(cs, parseCase{name: "stripped service tag plus in-band tag", b: b, tag: &VLANTag{TPID: EtherTypeQinQ, TCI: 7}, want: Frame{
			Dst: macB, Src: macA, Tags: [2]VLANTag{{TPID: EtherTypeQinQ, TCI: 7}, inner}, NTags: 2, Stripped: true,
			EtherType: EtherTypeARP, L3Off: 18, L3End: 46,
			ARP: ARP{Op: 1, SenderMAC: macA, SenderIP: ip4A, TargetIP: ip4B},
		}})
	}
	return cs
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			var got Frame
			var err error
			if tc.tag != nil {
				err = ParseWithTag(tc.b, *tc.tag, &got)
			} else {
				err = Parse(tc.b, &got)
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
			// Every frame built here carries correct checksums.
			if err := VerifyChecksums(tc.b, &got); err != nil {
				t.Errorf("VerifyChecksums: %v", err)
			}
			var in Inner
			err = ParseEmbedded(tc.b, &got, &in)
			if tc.inner == nil {
				if err == nil {
					t.Errorf("ParseEmbedded on a frame without a quote succeeded: %+v", in)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEmbedded: %v", err)
			}
			if diff := cmp.Diff(*tc.inner, in); diff != "" {
				t.Errorf("ParseEmbedded mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTagAccessors(t *testing.T) {
	tag := VLANTag{TPID: EtherTypeVLAN, TCI: 5<<13 | 1<<12 | 0x123}
	got := struct {
		VID uint16
		PCP uint8
		DEI bool
	}{tag.VID(), tag.PCP(), tag.DEI()}
	want := struct {
		VID uint16
		PCP uint8
		DEI bool
	}{0x123, 5, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accessors (-want +got):\n%s", diff)
	}
}
