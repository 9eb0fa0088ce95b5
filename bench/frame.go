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
