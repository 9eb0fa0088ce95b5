package fastpath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// NATKey is a NAT flow as its frames arrive: package nat's connection key
// of one direction. ICMP echo carries the identifier in SrcPort for
// requests and in DstPort for replies (0 in the other).
type NATKey struct {
	Ifindex          int
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	Proto            uint8
}

// NATFlow is what a NAT flow's frames become, and the checks they pass.
type NATFlow struct {
	// DstMAC is the next hop's, SrcMAC the router's on the egress side.
	DstMAC, SrcMAC [6]byte
	// InDstMAC is the router's MAC on the ingress side (frames to
	// another MAC are not the router's); InSrcMAC, when CheckSrcMAC, the
	// MAC the flow's frames come from (the LAN host, which the bridge
	// learns).
	InDstMAC, InSrcMAC [6]byte
	CheckSrcMAC        bool
	// Src, Dst, SrcPort and DstPort are the translated header (ICMP echo:
	// the new identifier in SrcPort for requests, DstPort for replies).
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	OutIfindex       int
	// Slot is the flow's stats slot.
	Slot uint32
	// MaxFrame bounds the frame length (the smaller MTU of the two ports
	// plus 14), MaxIP the IP packet on the egress side (its MTU).
	MaxFrame, MaxIP int
	// ICMPType is the echo type (8 request, 0 reply) of an ICMP flow.
	ICMPType uint8
	// Ack is, for TCP, the highest acknowledgment the router tracked in
	// this direction before (0: none), Win its last window (unscaled) and
	// WinScale the direction's scale shift. The program's tracking goes
	// on from them by the router's rule (nat.AckAdvance): a later
	// acknowledgment no further ahead than twice the sender's window, at
	// least nat.AckAdvance. So a frame behind the router's (stale or
	// damaged) does not become the highest because it was the first the
	// kernel forwarded, and the router judges a later RST as it would
	// have without the fast path.
	Ack      uint32
	Win      uint16
	WinScale uint8
}

func (k *NATKey) raw() fastpathNatKey {
	return fastpathNatKey{Ifindex: uint32(k.Ifindex), Saddr: ne32(k.Src), Daddr: ne32(k.Dst),
		Sport: ne16(k.SrcPort), Dport: ne16(k.DstPort), Proto: k.Proto}
}

// PutNAT installs (or replaces) a NAT flow.
func (p *Program) PutNAT(k NATKey, f NATFlow) error {
	if int(f.Slot) >= p.slots {
		return fmt.Errorf("fastpath: slot %d out of range", f.Slot)
	}
	v := fastpathNatVal{Dmac: f.DstMAC, Smac: f.SrcMAC, InDmac: f.InDstMAC, InSmac: f.InSrcMAC,
		Saddr: ne32(f.Src), Daddr: ne32(f.Dst), Sport: ne16(f.SrcPort), Dport: ne16(f.DstPort),
		OutIfindex: uint32(f.OutIfindex), Slot: f.Slot, MaxFrame: clamp16(f.MaxFrame), MaxIp: clamp16(f.MaxIP),
		IcmpType: f.ICMPType, Ack: f.Ack, Win: uint32(f.Win), Wscale: min(f.WinScale, 14)}
	if f.CheckSrcMAC {
		v.Flags |= 1
	}
	if err := p.markLive(true); err != nil {
		return err
	}
	rk := k.raw()
	if err := p.maps.NatFlows.Put(&rk, &v); err != nil {
		return fmt.Errorf("fastpath: NAT flow: %w", err)
	}
	return nil
}

// DeleteNAT removes a NAT flow; a missing flow is no error.
func (p *Program) DeleteNAT(k NATKey) error {
	rk := k.raw()
	return ignoreMissing(p.maps.NatFlows.Delete(&rk), "NAT flow")
}

// TCPTrack is what a TCP NAT flow's frames told of their sender: the
// highest acknowledgment and the last window (unscaled), once it
// forwarded one.
type TCPTrack struct {
	Seen     bool
	Ack, Win uint32
}

// NATTrack returns a NAT flow's TCP tracking; ok is false when the flow
// is not installed.
func (p *Program) NATTrack(k NATKey) (t TCPTrack, ok bool, err error) {
	rk := k.raw()
	var v fastpathNatVal
	if err := p.maps.NatFlows.Lookup(&rk, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return TCPTrack{}, false, nil
		}
		return TCPTrack{}, false, fmt.Errorf("fastpath: NAT flow: %w", err)
	}
	return TCPTrack{Seen: v.TcpSeen != 0, Ack: v.Ack, Win: v.Win}, true, nil
}

// Tag is the TPID of a pair's outer VLAN tag.
type Tag uint8

// The tags.
const (
	Untagged Tag = iota
	Tag8021Q
	Tag8021AD
)

// PairKey is a bridged MAC pair: the ingress port, the outer VLAN tag (as
// the kernel holds it: the NIC's or the stack's stripped tag) and the
// destination and source MACs.
type PairKey struct {
	Ifindex  int
	VID      uint16
	Tag      Tag
	Dst, Src [6]byte
}

// Egress is what a pair does to the VLAN tag.
type Egress uint8

// The egress modes (the dataplane's for a VLAN-aware output port).
const (
	EgressAsIs  Egress = iota // the frame leaves as it came
	EgressUntag               // without its outer tag
	EgressTag                 // with an 802.1Q outer tag of VID (keeping a tag's PCP and DEI)
)

// Pair is a bridged pair's forwarding.
type Pair struct {
	OutIfindex int
	// Slot counts every frame of the pair (port counters, FDB refresh).
	Slot uint32
	// MaxWire bounds the frame on the wire (outer tag included) as it
	// arrives, for the ingress and the egress MTU.
	MaxWire int
	Egress  Egress
	VID     uint16
	// L2Only: the rules give every frame of the pair this verdict, so no
	// microflow is needed; otherwise a frame needs a PutMicro entry too.
	L2Only bool
}

func (k *PairKey) raw() fastpathBrKey {
	return fastpathBrKey{Ifindex: uint32(k.Ifindex), Vid: k.VID, Tagged: uint8(k.Tag), Dmac: k.Dst, Smac: k.Src}
}

// PutPair installs (or replaces) a bridged pair.
func (p *Program) PutPair(k PairKey, f Pair) error {
	if int(f.Slot) >= p.slots {
		return fmt.Errorf("fastpath: slot %d out of range", f.Slot)
	}
	v := fastpathBrVal{OutIfindex: uint32(f.OutIfindex), Slot: f.Slot, MaxWire: clamp16(f.MaxWire), Vid: f.VID, Egress: uint8(f.Egress)}
	if f.L2Only {
		v.L2only = 1
	}
	rk := k.raw()
	if err := p.maps.BrPairs.Put(&rk, &v); err != nil {
		return fmt.Errorf("fastpath: pair: %w", err)
	}
	return nil
}

// DeletePair removes a pair; a missing pair is no error.
func (p *Program) DeletePair(k PairKey) error {
	rk := k.raw()
	return ignoreMissing(p.maps.BrPairs.Delete(&rk), "pair")
}

// MicroKey is a bridged TCP or UDP flow of a pair that is not L2Only: the
// pair's slot and the frame's 5-tuple (IPv4 addresses in the first four
// bytes).
type MicroKey struct {
	Pair             uint32
	EtherType        uint16
	Proto            uint8
	SrcPort, DstPort uint16
	Src, Dst         [16]byte
}

func (k *MicroKey) raw() fastpathMicroKey {
	return fastpathMicroKey{Pair: k.Pair, Ethertype: k.EtherType, Proto: k.Proto, Sport: ne16(k.SrcPort), Dport: ne16(k.DstPort),
		Saddr: k.Src, Daddr: k.Dst}
}

// PutMicro installs (or replaces) a microflow whose frames count in slot.
func (p *Program) PutMicro(k MicroKey, slot uint32) error {
	if int(slot) >= p.slots {
		return fmt.Errorf("fastpath: slot %d out of range", slot)
	}
	rk := k.raw()
	if err := p.maps.BrMicro.Put(&rk, &fastpathMicroVal{Slot: slot}); err != nil {
		return fmt.Errorf("fastpath: microflow: %w", err)
	}
	return nil
}

// DeleteMicro removes a microflow; a missing one is no error.
func (p *Program) DeleteMicro(k MicroKey) error {
	rk := k.raw()
	return ignoreMissing(p.maps.BrMicro.Delete(&rk), "microflow")
}

func ignoreMissing(err error, what string) error {
	if err == nil || errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return fmt.Errorf("fastpath: %s: %w", what, err)
}

func clamp16(v int) uint16 { return uint16(min(max(v, 0), 0xffff)) }
