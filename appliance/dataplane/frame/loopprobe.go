package frame

import (
	"bytes"
	"encoding/binary"
)

// EtherTypeLoopback is the Configuration Testing Protocol's EtherType
// (ECTP, "loopback", Ethernet v2.0 §7), which loop probes use.
const EtherTypeLoopback = 0x9000

// A loop probe is an ECTP reply message (skip count 0, function 1: no
// ECTP station answers a reply) broadcast out of one bridge port; it
// carries a magic, the sending engine's nonce and the sending port id. An
// engine that receives its own probe on a port has found a path between
// two of its ports (or from a port back to itself) that is not through
// itself: a loop.
const (
	loopProbeMagic   = "e1kLOOP\x00"
	loopProbeDataLen = 6 + len(loopProbeMagic) + 8 // ECTP header, magic, nonce
)

// LoopProbe is what a probe says.
type LoopProbe struct {
	Nonce [8]byte // the sending engine's
	Port  uint16  // the port it was sent from (the ECTP receipt number)
}

// PutLoopProbe writes a broadcast loop probe from src carrying p, tagged
// with VLAN vid (0: untagged), and returns MinFrameLen (tagged or not it
// fits), or 0 when dst is shorter.
func PutLoopProbe(dst []byte, src [6]byte, vid uint16, p LoopProbe) int {
	if len(dst) < MinFrameLen {
		return 0
	}
	var tag [1]VLANTag
	tags := tag[:0]
	if vid != 0 {
		tags = append(tags, VLANTag{TPID: EtherTypeVLAN, TCI: vid & 0xfff})
	}
	off := PutEthernet(dst, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, src, tags, EtherTypeLoopback)
	h := dst[off:]
	binary.BigEndian.PutUint16(h[0:], 0) // skip count
	binary.BigEndian.PutUint16(h[2:], 1) // function: reply
	binary.BigEndian.PutUint16(h[4:], p.Port)
	copy(h[6:], loopProbeMagic)
	copy(h[6+len(loopProbeMagic):], p.Nonce[:])
	return Pad(dst, off+loopProbeDataLen)
}

// ParseLoopProbe reads the loop probe in b, parsed into f; ok is false
// when the frame is not one (any other ECTP message included). The probe
// may have gained VLAN tags on its way.
func ParseLoopProbe(b []byte, f *Frame) (p LoopProbe, ok bool) {
	if f.EtherType != EtherTypeLoopback || f.L3Off < EthernetHeaderLen || len(b)-f.L3Off < loopProbeDataLen {
		return LoopProbe{}, false
	}
	h := b[f.L3Off:]
	if binary.BigEndian.Uint16(h[0:]) != 0 || binary.BigEndian.Uint16(h[2:]) != 1 ||
		!bytes.Equal(h[6:6+len(loopProbeMagic)], []byte(loopProbeMagic)) {
		return LoopProbe{}, false
	}
	p.Port = binary.BigEndian.Uint16(h[4:])
	copy(p.Nonce[:], h[6+len(loopProbeMagic):])
	return p, true
}
