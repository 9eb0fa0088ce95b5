package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// Frame layout of the generated UDP/IPv4 frames.
const (
	fcsLen     = 4
	ethLen     = 14
	ipv4Len    = 20
	udpLen     = 8
	minFrame   = 64   // smallest Ethernet frame with FCS
	maxFrame   = 1518 // largest untagged frame with FCS at MTU 1500
	sportOff   = ethLen + ipv4Len
	firstSport = 1024
	udpDport   = 9 // discard
	maxFlows   = 65536 - firstSport
)

// Addresses of the generated traffic. The rules under test match
// 10.128.0.0/9 (ruleAddr), which never contains genIP.
var (
	genIP  = netip.MustParseAddr("10.77.0.1")
	sinkIP = netip.MustParseAddr("10.77.0.2")
)

// udpFrame returns a UDP/IPv4 frame of size bytes including the FCS (the
// returned slice is size-4 bytes long, as AF_PACKET sends it) from src to
// dst, source port firstSport, UDP checksum 0 (none).
func udpFrame(size int, src, dst net.HardwareAddr, sip, dip netip.Addr) ([]byte, error) {
	if size < minFrame || size > maxFrame {
		return nil, fmt.Errorf("frame size %d outside %d..%d", size, minFrame, maxFrame)
	}
	if len(src) != 6 || len(dst) != 6 || !sip.Is4() || !dip.Is4() {
		return nil, fmt.Errorf("frame addresses %v %v %v %v: want MACs and IPv4", src, dst, sip, dip)
	}
	payload := make([]byte, size-fcsLen-sportOff-udpLen)
	for i := range payload {
		payload[i] = byte(sportOff + udpLen + i) // the byte's offset in the frame
	}
	ip := frametest.IPv4{Src: sip.As4(), Dst: dip.As4(), DF: true}
	return frametest.Frame([6]byte(dst), [6]byte(src), frametest.EtherTypeIPv4, ip.UDPPacketNoChecksum(firstSport, udpDport, payload)), nil
}

// setFlow rewrites the UDP source port of a udpFrame for flow n (0-based,
// below maxFlows). The UDP checksum is 0 and the IP header is unchanged.
func setFlow(f []byte, n int) {
	binary.BigEndian.PutUint16(f[sportOff:], uint16(firstSport+n))
}

// setFresh gives a udpFrame the n-th of freshHosts×freshPorts×64000
// 5-tuples: the last byte of the source address (hosts .2 to .251 of its
// /24, as many hosts opening connections would; the IP header checksum
// updated), the source port (one of freshPorts: the NAT's
// endpoint-independent mappings, one per host and port, stay few) and the
// destination port (the UDP checksum is 0).
func setFresh(f []byte, n uint64) {
	const srcLast = ethLen + 15 // the last byte of the source address
	host := byte(2 + n%freshHosts)
	n /= freshHosts
	word := ethLen + 14 // the header word srcLast is the low byte of
	old := binary.BigEndian.Uint16(f[word:])
	f[srcLast] = host
	binary.BigEndian.PutUint16(f[ethLen+10:], frame.Update16(binary.BigEndian.Uint16(f[ethLen+10:]), old, binary.BigEndian.Uint16(f[word:])))
	binary.BigEndian.PutUint16(f[sportOff:], uint16(firstSport+n%freshPorts))
	binary.BigEndian.PutUint16(f[sportOff+2:], uint16(1+n/freshPorts%64000))
}

// freshHosts and freshPorts are how many source addresses and ports
// setFresh uses.
const (
	freshHosts = 250
	freshPorts = 16
)

// The send time stamp of a latency frame, at the start of the UDP
// payload: stampMagic, then the Unix time in ns (big endian).
const (
	stampOff   = sportOff + udpLen
	stampMagic = 0x65316b7374616d70 // "e1kstamp"
)

// putStamp writes the send time ns into frame f.
func putStamp(f []byte, ns int64) {
	binary.BigEndian.PutUint64(f[stampOff:], stampMagic)
	binary.BigEndian.PutUint64(f[stampOff+8:], uint64(ns))
}

// readStamp returns the send time of a stamped frame f.
func readStamp(f []byte) (int64, bool) {
	if len(f) < stampOff+16 || binary.BigEndian.Uint64(f[stampOff:]) != stampMagic {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(f[stampOff+8:])), true
}

// learnFrame is a broadcast frame from src with an experimental
// EtherType: bridges learn src from it and the sink drops it.
func learnFrame(src net.HardwareAddr) []byte {
	return frametest.Pad(frametest.Eth([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, [6]byte(src), 0x88b5))
}

// Frame layout of the generated UDP/IPv6 frames.
const (
	ipv6Len     = 40
	sportOff6   = ethLen + ipv6Len
	udpSumOff6  = sportOff6 + 6
	minFrame6   = ethLen + ipv6Len + udpLen + fcsLen // 66: the IPv6 paths send it for smaller sizes
	defaultHops = 64
)

// udpFrame6 returns a UDP/IPv6 frame like udpFrame, of size bytes
// including the FCS but at least minFrame6, with its UDP checksum (IPv6
// requires one, RFC 8200 8.1).
func udpFrame6(size int, src, dst net.HardwareAddr, sip, dip netip.Addr, sport, dport uint16) ([]byte, error) {
	size = max(size, minFrame6)
	if size > maxFrame {
		return nil, fmt.Errorf("frame size %d outside %d..%d", size, minFrame6, maxFrame)
	}
	if len(src) != 6 || len(dst) != 6 || !sip.Is6() || !dip.Is6() || sip.Is4In6() || dip.Is4In6() {
		return nil, fmt.Errorf("frame addresses %v %v %v %v: want MACs and IPv6", src, dst, sip, dip)
	}
	payload := make([]byte, size-fcsLen-sportOff6-udpLen)
	for i := range payload {
		payload[i] = byte(sportOff6 + udpLen + i)
	}
	ip := frametest.IPv6{Src: sip.As16(), Dst: dip.As16(), HopLimit: defaultHops}
	return frametest.Frame([6]byte(dst), [6]byte(src), frametest.EtherTypeIPv6, ip.UDPPacket(sport, dport, payload)), nil
}

// setFlow6 rewrites the UDP source port of a udpFrame6 for flow n (0-based,
// below maxFlows) and updates its checksum.
func setFlow6(f []byte, n int) { setPort6(f, sportOff6, uint16(firstSport+n)) }

// setDport6 is setFlow6 for the destination port: a reply to flow n.
func setDport6(f []byte, n int) { setPort6(f, sportOff6+2, uint16(firstSport+n)) }

// setPort6 writes port at off of a udpFrame6 and updates the UDP
// checksum (RFC 1624).
func setPort6(f []byte, off int, port uint16) {
	old := binary.BigEndian.Uint16(f[off:])
	binary.BigEndian.PutUint16(f[off:], port)
	sum := frame.Update16(binary.BigEndian.Uint16(f[udpSumOff6:]), old, port)
	if sum == 0 {
		sum = 0xffff // 0 is "no checksum", which IPv6 forbids; the same sum in one's complement
	}
	binary.BigEndian.PutUint16(f[udpSumOff6:], sum)
}

// linkLocal is the link-local address of mac by modified EUI-64, as the
// kernel gives an interface with that MAC.
func linkLocal(mac net.HardwareAddr) netip.Addr {
	a := [16]byte{0: 0xfe, 1: 0x80, 8: mac[0] ^ 0x02, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]}
	return netip.AddrFrom16(a)
}

// ruleAddr6 is the address of the i-th non-matching ip6 rule:
// 2001:db8:8000::1 on, never in ipv6Prefix.
func ruleAddr6(i int) netip.Addr {
	a := netip.MustParseAddr("2001:db8:8000::").As16()
	n := uint32(i) + 1
	a[12], a[13], a[14], a[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return netip.AddrFrom16(a)
}

// ruleAddr is the address of the i-th non-matching rule: 10.128.0.1 on.
func ruleAddr(i int) netip.Addr {
	n := uint32(10)<<24 | uint32(128)<<16 + uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// Interfaces and their fixed, locally administered MAC addresses.
var (
	macG0 = net.HardwareAddr{0x02, 0xe1, 0xb0, 0, 0, 0x01}
	macB0 = net.HardwareAddr{0x02, 0xe1, 0xb0, 0, 0, 0x02}
	macB1 = net.HardwareAddr{0x02, 0xe1, 0xb0, 0, 0, 0x03}
	macS0 = net.HardwareAddr{0x02, 0xe1, 0xb0, 0, 0, 0x04}
	macG1 = net.HardwareAddr{0x02, 0xe1, 0xb0, 0, 0, 0x05}
	macS1 = net.HardwareAddr{0x02, 0xe1, 0xb0, 0, 0, 0x06}
)
