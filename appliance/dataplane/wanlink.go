package dataplane

import (
	"encoding/binary"
	"fmt"

	"e1kbox/appliance/dataplane/frame"
)

// WANVLAN is the WAN link's 802.1Q VLAN (NAT.WANVLAN).
type WANVLAN struct {
	// ID is the VLAN, 1..4094; 0 leaves the WAN untagged.
	ID uint16
	// PCP is the 802.1p priority of the router's data frames,
	// ControlPCP that of its ARP and neighbour discovery (and DHCP), 0..7.
	PCP, ControlPCP uint8
}

func (v WANVLAN) check() error {
	if v.ID > 4094 || v.ID == 0 && v != (WANVLAN{}) || v.PCP > 7 || v.ControlPCP > 7 {
		return fmt.Errorf("WAN VLAN %d with priorities %d/%d: want VLAN 1..4094 (0 without priorities), priorities 0..7",
			v.ID, v.PCP, v.ControlPCP)
	}
	return nil
}

// wanLink is the WAN port's link layer: the headers between the port's
// Ethernet header and IP, which the router never sees. On the way in,
// wanIn takes them off a frame the WAN port received (the router gets an
// untagged Ethernet frame); on the way out, wanEmit puts them on every
// frame the router sends to the WAN: an 802.1Q tag or nothing, and under
// it a PPPoE session (wanlink_pppoe.go) or nothing. It lives in the
// settings snapshot, so that a new VLAN or session applies between two
// batches.
type wanLink struct {
	vid uint16 // 0: untagged (no link headers)
	// tci and ctlTCI are the tags of data and of control frames.
	tci, ctlTCI uint16
	ppp         pppoeLink // the PPPoE layer (wanlink_pppoe.go)
}

// framed reports whether the WAN link has headers of its own.
func (l *wanLink) framed() bool { return l.vid != 0 || l.ppp.on }

func newWANLink(v WANVLAN) wanLink {
	if v.ID == 0 {
		return wanLink{}
	}
	return wanLink{vid: v.ID, tci: uint16(v.PCP)<<13 | v.ID, ctlTCI: uint16(v.ControlPCP)<<13 | v.ID}
}

// wanIn takes the WAN link's headers off the parsed frame in w.f (data,
// its tag in data unless stripped) and returns the frame the router
// takes, with w.f parsed as that; false: the frame is not the link's
// (untagged or another VLAN on a tagged WAN, counted DropWANLink) or
// malformed. On an untagged WAN it returns data as it is: the router
// drops tagged frames itself. Stripping an in-frame tag moves the MAC
// addresses in data (the ring's frame) forward.
func (w *fwd) wanIn(data []byte, stripped bool) ([]byte, bool) {
	l, f := &w.set.wan, &w.f
	if l.vid == 0 {
		return w.wanPPPoEIn(data)
	}
	if f.NTags != 1 || f.Tags[0].TPID != frame.EtherTypeVLAN || f.Tags[0].VID() != l.vid {
		w.drop(DropWANLink)
		return nil, false
	}
	w.vid, w.tagged = 0, false
	if stripped { // the parse's offsets are the untagged data's already
		f.NTags, f.Tags[0], f.Stripped = 0, frame.VLANTag{}, false
		return w.wanPPPoEIn(data)
	}
	data, _, err := frame.StripVLAN(data)
	if err == nil {
		err = frame.Parse(data, f)
	}
	if err != nil {
		w.drop(Drop(frame.ReasonOf(err)))
		return nil, false
	}
	return w.wanPPPoEIn(data)
}

// wanPPPoEIn is the PPPoE layer's part of wanIn.
func (w *fwd) wanPPPoEIn(data []byte) ([]byte, bool) {
	if !w.set.wan.ppp.on {
		return data, true
	}
	return w.pppoeIn(data)
}

// wanEmit queues the router's untagged frame b on the WAN port's TX ring
// with the WAN link's headers: the VLAN tag, with the control priority
// for ARP, neighbour discovery and DHCP. It writes the tag into the TX
// slot (AppendTagged), without a copy of its own.
func (w *fwd) wanEmit(tx txPort, b []byte) bool {
	l := &w.set.wan
	if l.ppp.on {
		return w.pppoeEmit(tx, b)
	}
	tci := l.tci
	if control(b) {
		tci = l.ctlTCI
	}
	return tx.AppendTagged(b, frame.EtherTypeVLAN, tci)
}

// headerLen is the length of the WAN link's headers on the wire.
func (l *wanLink) headerLen() int {
	n := 0
	if l.vid != 0 {
		n += frame.VLANTagLen
	}
	if l.ppp.on {
		n += pppoeHeaderLen
	}
	return n
}

// control reports whether the untagged frame b is a control frame of the
// WAN link: ARP, ICMPv6 neighbour discovery (router and neighbour
// solicitations and advertisements, redirects), a DHCPv4 or DHCPv6
// message to a server (without IPv4 options or IPv6 extension headers).
func control(b []byte) bool {
	if len(b) < frame.EthernetHeaderLen {
		return false
	}
	const eth, ip4, ip6 = frame.EthernetHeaderLen, frame.IPv4HeaderLen, frame.IPv6HeaderLen
	switch binary.BigEndian.Uint16(b[12:]) {
	case frame.EtherTypeARP:
		return true
	case frame.EtherTypeIPv6:
		if len(b) < eth+ip6+4 {
			return false
		}
		switch b[eth+6] {
		case frame.ProtoICMPv6:
			t := b[eth+ip6]
			return t >= 133 && t <= 137
		case frame.ProtoUDP:
			return binary.BigEndian.Uint16(b[eth+ip6+2:]) == 547
		}
	case frame.EtherTypeIPv4:
		return len(b) >= eth+ip4+4 && b[eth] == 0x45 && b[eth+9] == frame.ProtoUDP &&
			binary.BigEndian.Uint16(b[eth+6:])&0x1fff == 0 && binary.BigEndian.Uint16(b[eth+ip4+2:]) == 67
	}
	return false
}
