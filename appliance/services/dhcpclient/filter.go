package dhcpclient

import (
	"golang.org/x/net/bpf"

	"e1kbox/appliance/dataplane/frame"
)

// FilterIPv4 is the BPF program of OpenIPv4's socket: IPv4, UDP, not a
// later fragment, destination port (the IPv4 header may carry options).
// The decoder checks the rest.
func FilterIPv4(port uint16) []bpf.Instruction {
	return udpFilter(frame.EtherTypeIPv4, ethLen+9, 0x40000,
		bpf.LoadAbsolute{Off: ethLen + 6, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 4},
		bpf.LoadMemShift{Off: ethLen},
		bpf.LoadIndirect{Off: ethLen + 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipFalse: 1},
	)
}

// FilterIPv6 is the BPF program of OpenIPv6's socket: IPv6 frames whose
// next header is UDP to port (without extension headers). The decoder
// checks the rest.
func FilterIPv6(port uint16) []bpf.Instruction {
	return udpFilter(frame.EtherTypeIPv6, ethLen+6, 0xffff,
		bpf.LoadAbsolute{Off: ethLen + ipv6Len + 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(port), SkipTrue: 1},
	)
}

// udpFilter passes the frames of etherType whose IP protocol (the byte at
// protoOff) is UDP and that check lets through, cut to snap bytes; check
// drops a frame by jumping past its own last instruction and the next.
func udpFilter(etherType uint16, protoOff uint32, snap uint32, check ...bpf.Instruction) []bpf.Instruction {
	n := uint8(len(check))
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(etherType), SkipTrue: n + 3},
		bpf.LoadAbsolute{Off: protoOff, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: frame.ProtoUDP, SkipTrue: n + 1},
	}
	prog = append(prog, check...)
	return append(prog, bpf.RetConstant{Val: snap}, bpf.RetConstant{Val: 0})
}
