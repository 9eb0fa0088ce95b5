package wantap

import (
	"fmt"

	"golang.org/x/net/bpf"

	"e1kbox/appliance/dataplane/ingressdrop"
)

// VLAN is the WAN's 802.1Q VLAN: the tag a socket puts in every frame it
// sends, and the VLAN whose replies it receives. The zero VLAN is
// untagged.
type VLAN struct {
	// ID is the VLAN, 1..4094; 0: untagged.
	ID uint16
	// PCP is the 802.1p priority of the frames sent, 0..7.
	PCP uint8
}

// tpid8021Q is the 802.1Q tag's EtherType.
const tpid8021Q = 0x8100

// Check says why v is no VLAN a socket can use, or nil.
func (v VLAN) Check() error {
	switch {
	case v.ID > 4094:
		return fmt.Errorf("VLAN %d out of range 1..4094", v.ID)
	case v.PCP > 7:
		return fmt.Errorf("VLAN priority %d out of range 0..7", v.PCP)
	case v.ID == 0 && v.PCP != 0:
		return fmt.Errorf("VLAN priority %d without a VLAN", v.PCP)
	}
	return nil
}

// TCI is the tag's control information: priority, DEI 0, VLAN.
func (v VLAN) TCI() uint16 { return uint16(v.PCP)<<13 | v.ID&0x0fff }

// Tag returns frame (an untagged Ethernet frame) with v's tag after its
// MACs, in a new slice; frame itself when v is untagged or frame has no
// room for MACs and an EtherType.
func (v VLAN) Tag(frame []byte) []byte {
	if v.ID == 0 || len(frame) < 14 {
		return frame
	}
	tci := v.TCI()
	b := make([]byte, 0, len(frame)+4)
	b = append(b, frame[:12]...)
	b = append(b, tpid8021Q>>8, tpid8021Q&0xff, byte(tci>>8), byte(tci))
	return append(b, frame[12:]...)
}

// Filter returns filter behind a check of the frame's mark: on a VLAN,
// it passes only frames that ingressdrop's program took off that VLAN
// for the WAN clients (ingressdrop.ReplyMark); untagged, none of those.
func (v VLAN) Filter(filter []bpf.Instruction) []bpf.Instruction {
	check := []bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtMark}}
	if v.ID != 0 {
		check = append(check, bpf.JumpIf{Cond: bpf.JumpEqual, Val: ingressdrop.ReplyMark(v.ID), SkipTrue: 1})
	} else {
		check = append(check, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ingressdrop.ReplyMarkMask},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ingressdrop.ReplyMarkBase, SkipTrue: 1})
	}
	check = append(check, bpf.RetConstant{Val: 0})
	return append(check, filter...)
}
