package fastpath

import "fmt"

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
}

func (k *IPv6Key) raw() fastpathR6Key {
	return fastpathR6Key{Ifindex: uint32(k.Ifindex), Saddr: k.Src, Daddr: k.Dst, Sport: ne16(k.SrcPort), Dport: ne16(k.DstPort), Proto: k.Proto}
}

// PutIPv6 installs (or replaces) a routed IPv6 flow.
func (p *Program) PutIPv6(k IPv6Key, f IPv6Flow) error {
	if int(f.Slot) >= p.slots {
		return fmt.Errorf("fastpath: slot %d out of range", f.Slot)
	}
	v := fastpathR6Val{Dmac: f.DstMAC, Smac: f.SrcMAC, InDmac: f.InDstMAC, InSmac: f.InSrcMAC, OutIfindex: uint32(f.OutIfindex),
		Slot: f.Slot, MaxFrame: clamp16(f.MaxFrame), MaxIp: clamp16(f.MaxIP), IcmpType: f.ICMPType}
	if f.CheckSrcMAC {
		v.Flags |= 1
	}
	if err := p.markLive(false); err != nil {
		return err
	}
	rk := k.raw()
	if err := p.maps.R6Flows.Put(&rk, &v); err != nil {
		return fmt.Errorf("fastpath: IPv6 flow: %w", err)
	}
	return nil
}

// DeleteIPv6 removes a routed IPv6 flow; a missing flow is no error.
func (p *Program) DeleteIPv6(k IPv6Key) error {
	rk := k.raw()
	return ignoreMissing(p.maps.R6Flows.Delete(&rk), "IPv6 flow")
}
