package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
)

// The PPPoE layer of the WAN link (RFC 2516), under the VLAN layer: on a
// PPPoE WAN (NAT.WANPPPoE) the router's IPv4 and IPv6 travel in the
// session's frames. wanIn hands pppoeIn the untagged frame; pppoeIn
// decapsulates the session's IPv4 and IPv6 into an untagged Ethernet
// frame for the router and queues discovery and the session's control
// protocols (LCP, PAP, CHAP, IPCP, IPv6CP, ...) for the PPPoE client
// (pppoeQueue, read through PPPoELink). wanEmit hands pppoeEmit the
// router's frames, which it frames in the session, to the AC's MAC.

// EtherTypes and PPP protocols of PPPoE (RFC 2516, RFC 1661).
const (
	EtherTypePPPoEDiscovery = 0x8863
	EtherTypePPPoESession   = 0x8864

	pppoeHeaderLen = 8 // the PPPoE session header (6) and the PPP protocol (2)
	pppIPv4        = 0x0021
	pppIPv6        = 0x0057

	dhcp6ClientPort = 546
)

// PPPoESession is the PPPoE session the WAN link frames the router's
// packets in (NAT.PPPoESession), from the PPPoE client once it is up; the
// zero value is no session.
type PPPoESession struct {
	// ID is the session ID (PADS), 1..0xfffe.
	ID uint16
	// ACMAC is the access concentrator's Ethernet address.
	ACMAC bridge.MAC
	// LocalLinkLocal and PeerLinkLocal are the link-local addresses
	// IPv6CP negotiated (RFC 5072), invalid while it is not up: the IPv6
	// router's on the WAN and its default route (route6's point-to-point
	// WAN).
	LocalLinkLocal, PeerLinkLocal netip.Addr
}

func (s PPPoESession) check() error {
	if s == (PPPoESession{}) {
		return nil
	}
	if s.ID == 0 || s.ID == 0xffff || s.ACMAC[0]&1 != 0 || s.ACMAC == (bridge.MAC{}) {
		return fmt.Errorf("PPPoE session %#04x with AC %v: want a session ID 1..0xfffe and a unicast AC MAC",
			s.ID, s.ACMAC)
	}
	if s.LocalLinkLocal.IsValid() != s.PeerLinkLocal.IsValid() {
		return fmt.Errorf("PPPoE session %#04x: IPv6CP's link-local addresses %v and %v: want both or none",
			s.ID, s.LocalLinkLocal, s.PeerLinkLocal)
	}
	for _, a := range []netip.Addr{s.LocalLinkLocal, s.PeerLinkLocal} {
		if a.IsValid() && (!a.Is6() || !a.IsLinkLocalUnicast() || a.Zone() != "") {
			return fmt.Errorf("PPPoE session %#04x: %v is not an IPv6 link-local address", s.ID, a)
		}
	}
	return nil
}

// pppoeLink is the PPPoE part of wanLink.
type pppoeLink struct {
	on  bool    // the WAN is a PPPoE link
	sid uint16  // the session; 0: none up
	ac  [6]byte // the AC's MAC
}

func newPPPoELink(n *NAT) pppoeLink {
	if !n.WANPPPoE {
		return pppoeLink{}
	}
	return pppoeLink{on: true, sid: n.PPPoESession.ID, ac: n.PPPoESession.ACMAC}
}

// parsePPPoESession reads a PPPoE session packet b (the bytes after the
// Ethernet header): its session ID, PPP protocol and the PPP payload's
// length (Ethernet padding cut off). It allocates nothing.
func parsePPPoESession(b []byte) (sid, proto uint16, n int, ok bool) {
	if len(b) < pppoeHeaderLen || b[0] != 0x11 || b[1] != 0 {
		return 0, 0, 0, false
	}
	l := int(binary.BigEndian.Uint16(b[4:]))
	if l < 2 || 6+l > len(b) {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint16(b[6:]), l - 2, true
}

// putPPPoESession writes the session header and PPP protocol for n bytes
// of PPP payload into b[:pppoeHeaderLen].
func putPPPoESession(b []byte, sid, proto uint16, n int) {
	_ = b[pppoeHeaderLen-1]
	b[0], b[1] = 0x11, 0
	binary.BigEndian.PutUint16(b[2:], sid)
	binary.BigEndian.PutUint16(b[4:], uint16(n+2))
	binary.BigEndian.PutUint16(b[6:], proto)
}

// pppoeIn takes the PPPoE layer off the untagged frame data (parsed in
// w.f) on a PPPoE WAN: the current session's IPv4 and IPv6 become an
// untagged Ethernet frame of the same MACs for the router (moved forward
// in data, w.f parsed as it), except DHCPv6 to the client port, which
// goes to the DHCPv6 client's queue (PPPoELink.DHCPv6); discovery and
// the session's other protocols go to the PPPoE client's queue; anything
// else is dropped.
func (w *fwd) pppoeIn(data []byte) ([]byte, bool) {
	l := &w.set.wan.ppp
	switch w.f.EtherType {
	case EtherTypePPPoEDiscovery:
		w.pppoeControl(data)
		return nil, false
	case EtherTypePPPoESession:
	default:
		w.drop(DropPPPoE)
		return nil, false
	}
	const eth = frame.EthernetHeaderLen
	sid, proto, n, ok := parsePPPoESession(data[eth:])
	var et uint16
	switch {
	case !ok:
		w.drop(DropPPPoE)
		return nil, false
	case proto == pppIPv4:
		et = frame.EtherTypeIPv4
	case proto == pppIPv6:
		et = frame.EtherTypeIPv6
	default: // LCP, authentication, the NCPs: the client's, whose session it checks
		w.pppoeControl(data)
		return nil, false
	}
	if l.sid == 0 || sid != l.sid || w.f.Src != l.ac {
		w.drop(DropPPPoE)
		return nil, false
	}
	copy(data[pppoeHeaderLen:pppoeHeaderLen+12], data[:12])
	binary.BigEndian.PutUint16(data[pppoeHeaderLen+12:], et)
	data = data[pppoeHeaderLen : eth+pppoeHeaderLen+n]
	if err := frame.Parse(data, &w.f); err != nil {
		w.drop(Drop(frame.ReasonOf(err)))
		return nil, false
	}
	if f := &w.f; et == frame.EtherTypeIPv6 && f.Proto == frame.ProtoUDP && f.L4Off != 0 && !f.LaterFragment &&
		f.UDP.DstPort == dhcp6ClientPort {
		if w.ppp == nil || !w.ppp.dhcp6.put(data) {
			w.drop(DropPPPoEQueue)
		}
		return nil, false
	}
	return data, true
}

// pppoeControl queues a control frame for the PPPoE client, counting it
// when the queue is full (or the engine has none).
func (w *fwd) pppoeControl(data []byte) {
	if w.ppp == nil || !w.ppp.put(data) {
		w.drop(DropPPPoEQueue)
	}
}

// pppoeAdmit reports whether the router's untagged frame b may leave on
// the PPPoE WAN: an IPv4 or IPv6 frame while a session is up. It counts
// the others (ARP never leaves on a PPPoE link).
func (w *fwd) pppoeAdmit(b []byte) bool {
	l := &w.set.wan.ppp
	if l.sid == 0 || len(b) < frame.EthernetHeaderLen {
		w.drop(DropPPPoEDown)
		return false
	}
	switch binary.BigEndian.Uint16(b[12:]) {
	case frame.EtherTypeIPv4, frame.EtherTypeIPv6:
		return true
	}
	w.drop(DropPPPoEDown)
	return false
}

// pppoeEmit builds the router's untagged IPv4 or IPv6 frame b (admitted
// by pppoeAdmit) as a session frame to the AC in the TX ring's next slot:
// the WAN VLAN's tag, if any, the session header, b's IP packet.
func (w *fwd) pppoeEmit(tx txPort, b []byte) bool {
	l := &w.set.wan
	n := l.sessionFrame(tx.TxSlot(), b, l.tci)
	return n > 0 && tx.TxCommit(n)
}

// sessionFrame writes the untagged IPv4 or IPv6 frame b into out as a
// session frame to the AC, from b's source MAC: tagged with tci on a
// VLAN, the session header, b's IP packet. It returns the frame's length,
// 0 when out is too short.
func (l *wanLink) sessionFrame(out, b []byte, tci uint16) int {
	proto := uint16(pppIPv4)
	if binary.BigEndian.Uint16(b[12:]) == frame.EtherTypeIPv6 {
		proto = pppIPv6
	}
	hl := 12
	if l.vid != 0 {
		hl += frame.VLANTagLen
	}
	ip := b[frame.EthernetHeaderLen:]
	n := hl + 2 + pppoeHeaderLen + len(ip)
	if len(out) < n {
		return 0
	}
	copy(out[0:6], l.ppp.ac[:])
	copy(out[6:12], b[6:12])
	if l.vid != 0 {
		binary.BigEndian.PutUint16(out[12:], frame.EtherTypeVLAN)
		binary.BigEndian.PutUint16(out[14:], tci)
	}
	binary.BigEndian.PutUint16(out[hl:], EtherTypePPPoESession)
	putPPPoESession(out[hl+2:], l.ppp.sid, proto, len(ip))
	copy(out[hl+2+pppoeHeaderLen:], ip)
	return n
}
