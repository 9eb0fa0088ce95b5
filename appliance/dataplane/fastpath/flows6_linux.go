package fastpath

// IPv6Key is a routed IPv6 flow as its frames arrive: one direction of a
// route6 connection. ICMPv6 echo carries the identifier in SrcPort for
// requests and in DstPort for replies (0 in the other).
type IPv6Key struct {
	Ifindex          int
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Proto            uint8
}

// IPv6Flow is what a routed IPv6 flow's frames become, and the checks
// they pass: new Ethernet addresses and the hop limit one less (route6
// translates nothing, and the hop limit is in no checksum).
type IPv6Flow struct {
	// DstMAC is the next hop's, SrcMAC the router's on the egress side.
	DstMAC, SrcMAC [6]byte
	// InDstMAC is the router's MAC on the ingress side; InSrcMAC, when
	// CheckSrcMAC, the MAC the flow's frames come from (a LAN host).
	InDstMAC, InSrcMAC [6]byte
	CheckSrcMAC        bool
	OutIfindex         int
	// Slot is the flow's stats slot.
	Slot uint32
	// MaxFrame bounds the frame length (the smaller MTU of the two ports
	// plus 14), MaxIP the IP packet (the egress side's IPv6 MTU).
	MaxFrame, MaxIP int
	// ICMPType is the echo type (128 request, 129 reply) of an ICMPv6
	// flow.
	ICMPType uint8
	// InVID is the 802.1Q VLAN the flow's frames arrive tagged with (a
	// tagged WAN's; the kernel stripped the tag), 0 untagged; OutTCI the
	// tag they leave with, 0 none. The program pops the one and pushes
	// the other.
	InVID, OutTCI uint16
	// PPPoEIn, PPPoEOut and PPPoESession are NATFlow's: the flow's
	// frames arrive in, or leave in, the WAN link's PPPoE session (PPP
	// protocol IPv6).
	PPPoEIn, PPPoEOut bool
	PPPoESession      uint16
}

func (k *IPv6Key) raw() *fastpathR6Key {
	return &fastpathR6Key{Ifindex: uint32(k.Ifindex), Saddr: k.Src, Daddr: k.Dst, Sport: ne16(k.SrcPort), Dport: ne16(k.DstPort), Proto: k.Proto}
}

// PutIPv6 installs (or replaces) a routed IPv6 flow.
func (p *Program) PutIPv6(k IPv6Key, f IPv6Flow) error {
	v := fastpathR6Val{Fwd: fastpathFwd{Dmac: f.DstMAC, Smac: f.SrcMAC, InDmac: f.InDstMAC, InSmac: f.InSrcMAC, Flags: checkFlags(f.CheckSrcMAC) | pppFlags(f.PPPoEIn, f.PPPoEOut),
		OutIfindex: uint32(f.OutIfindex), Slot: f.Slot, MaxFrame: clamp16(f.MaxFrame), MaxIp: clamp16(f.MaxIP), IcmpType: f.ICMPType,
		InVid: f.InVID, OutTci: f.OutTCI, PppSid: f.PPPoESession}}
	return p.put(p.maps.R6Flows, "IPv6 flow", f.Slot, liveIPv6, k.raw(), &v)
}

// DeleteIPv6 removes a routed IPv6 flow; a missing flow is no error.
func (p *Program) DeleteIPv6(k IPv6Key) error {
	return ignoreMissing(p.maps.R6Flows.Delete(k.raw()), "IPv6 flow")
}
