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
	// InVID is the 802.1Q VLAN the flow's frames arrive tagged with (a
	// tagged WAN's; the kernel stripped the tag), 0 untagged; OutTCI the
	// tag they leave with, 0 none. The program pops the one and pushes
	// the other.
	InVID, OutTCI uint16
	// PPPoEIn says the flow's frames arrive in the WAN link's PPPoE
	// session PPPoESession (the program takes its header off), PPPoEOut
	// that they leave in it (the program puts it on). The program
	// forwards them only while PPPoESession is the session SetPPPoE
	// names, to (or from) its AC.
	PPPoEIn, PPPoEOut bool
	PPPoESession      uint16
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

func (k *NATKey) raw() *fastpathNatKey {
	return &fastpathNatKey{Ifindex: uint32(k.Ifindex), Saddr: ne32(k.Src), Daddr: ne32(k.Dst),
		Sport: ne16(k.SrcPort), Dport: ne16(k.DstPort), Proto: k.Proto}
}

// PutNAT installs (or replaces) a NAT flow.
func (p *Program) PutNAT(k NATKey, f NATFlow) error {
	v := fastpathNatVal{
		Fwd: fastpathFwd{Dmac: f.DstMAC, Smac: f.SrcMAC, InDmac: f.InDstMAC, InSmac: f.InSrcMAC, Flags: checkFlags(f.CheckSrcMAC) | pppFlags(f.PPPoEIn, f.PPPoEOut),
			OutIfindex: uint32(f.OutIfindex), Slot: f.Slot, MaxFrame: clamp16(f.MaxFrame), MaxIp: clamp16(f.MaxIP), IcmpType: f.ICMPType,
			InVid: f.InVID, OutTci: f.OutTCI, PppSid: f.PPPoESession},
		Saddr: ne32(f.Src), Daddr: ne32(f.Dst), Sport: ne16(f.SrcPort), Dport: ne16(f.DstPort),
		Ack: f.Ack, Win: uint32(f.Win), Wscale: min(f.WinScale, 14)}
	return p.put(p.maps.NatFlows, "NAT flow", f.Slot, liveNAT, k.raw(), &v)
}

// DeleteNAT removes a NAT flow; a missing flow is no error.
func (p *Program) DeleteNAT(k NATKey) error {
	return ignoreMissing(p.maps.NatFlows.Delete(k.raw()), "NAT flow")
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
	var v fastpathNatVal
	if err := p.maps.NatFlows.Lookup(k.raw(), &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return TCPTrack{}, false, nil
		}
		return TCPTrack{}, false, fmt.Errorf("fastpath: NAT flow: %w", err)
	}
	return TCPTrack{Seen: v.TcpSeen != 0, Ack: v.Ack, Win: v.Win}, true, nil
}

// checkFlags is fwd.flags for a flow that checks (or not) its frames'
// source MAC.
func checkFlags(checkSrcMAC bool) uint8 {
	if checkSrcMAC {
		return 1 // NAT_CHECK_SMAC
	}
	return 0
}

// pppFlags are fwd.flags for a flow whose frames arrive in the PPPoE
// session (in) or leave in it (out).
func pppFlags(in, out bool) uint8 {
	var f uint8
	if in {
		f |= 2 // FWD_PPP_IN
	}
	if out {
		f |= 4 // FWD_PPP_OUT
	}
	return f
}

// SetPPPoE makes sid, with the access concentrator ac, the WAN link's
// PPPoE session (0: none): from now on the program forwards the frames
// of the flows of this session only (NATFlow.PPPoESession).
func (p *Program) SetPPPoE(sid uint16, ac [6]byte) error {
	if err := p.maps.WanPpp.Put(uint32(0), &fastpathPppSession{Sid: sid, Ac: ac}); err != nil {
		return fmt.Errorf("fastpath: PPPoE session: %w", err)
	}
	return nil
}

// put installs (or replaces) k → v in m, a flow whose frames count in
// slot; live is m as markLive names it.
func (p *Program) put(m *ebpf.Map, what string, slot uint32, live liveMap, k, v any) error {
	if int(slot) >= p.slots {
		return fmt.Errorf("fastpath: slot %d out of range", slot)
	}
	if err := p.markLive(live); err != nil {
		return err
	}
	if err := m.Put(k, v); err != nil {
		return fmt.Errorf("fastpath: %s: %w", what, err)
	}
	return nil
}

func ignoreMissing(err error, what string) error {
	if err == nil || errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return fmt.Errorf("fastpath: %s: %w", what, err)
}

func clamp16(v int) uint16 { return uint16(min(max(v, 0), 0xffff)) }
