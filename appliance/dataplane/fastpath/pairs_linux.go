package fastpath

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

func (k *PairKey) raw() *fastpathBrKey {
	return &fastpathBrKey{Ifindex: uint32(k.Ifindex), Vid: k.VID, Tagged: uint8(k.Tag), Dmac: k.Dst, Smac: k.Src}
}

// PutPair installs (or replaces) a bridged pair.
func (p *Program) PutPair(k PairKey, f Pair) error {
	v := fastpathBrVal{OutIfindex: uint32(f.OutIfindex), Slot: f.Slot, MaxWire: clamp16(f.MaxWire), Vid: f.VID, Egress: uint8(f.Egress)}
	if f.L2Only {
		v.L2only = 1
	}
	return p.put(p.maps.BrPairs, "pair", f.Slot, liveAlways, k.raw(), &v)
}

// DeletePair removes a pair; a missing pair is no error.
func (p *Program) DeletePair(k PairKey) error {
	return ignoreMissing(p.maps.BrPairs.Delete(k.raw()), "pair")
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

func (k *MicroKey) raw() *fastpathMicroKey {
	return &fastpathMicroKey{Pair: k.Pair, Ethertype: k.EtherType, Proto: k.Proto, Sport: ne16(k.SrcPort), Dport: ne16(k.DstPort),
		Saddr: k.Src, Daddr: k.Dst}
}

// PutMicro installs (or replaces) a microflow whose frames count in slot.
func (p *Program) PutMicro(k MicroKey, slot uint32) error {
	return p.put(p.maps.BrMicro, "microflow", slot, liveAlways, k.raw(), &fastpathMicroVal{Slot: slot})
}

// DeleteMicro removes a microflow; a missing one is no error.
func (p *Program) DeleteMicro(k MicroKey) error {
	return ignoreMissing(p.maps.BrMicro.Delete(k.raw()), "microflow")
}
