package route6

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// NDP sizes: an NS or NA with one link-layer address option, a DAD probe
// (an NS without), an RS with one; option types.
const (
	ndpMsgLen   = 24 + 8
	nsFrameLen  = frame.EthernetHeaderLen + frame.IPv6HeaderLen + ndpMsgLen
	dadFrameLen = nsFrameLen - 8
	rsMsgLen    = 8 + 8
	rsFrameLen  = frame.EthernetHeaderLen + frame.IPv6HeaderLen + rsMsgLen
	ndpHops     = 255
	optSLLA     = 1
	optTLLA     = 2
	optPrefix   = 3
)

var allNodesMAC = [6]byte{0x33, 0x33, 0, 0, 0, 1}

// multicast handles a frame to a multicast group: neighbour solicitations
// for the box's addresses are answered, the WAN's router advertisements
// give the default router; everything else (RS, MLD, DHCPv6) is for the
// host.
func (w *Worker) multicast(s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	if f.Proto == frame.ProtoICMPv6 && f.L4Off != 0 {
		if res, ok := w.discovery(s, side, pkt, f); ok {
			return res
		}
	}
	if f.IPv6.Src == ([16]byte{}) && !(f.Proto == frame.ProtoICMPv6 && f.L4Off != 0) {
		return drop(ReasonMartian)
	}
	return Result{Action: routing.ToHost, Port: s.side[side].ID, Frame: pkt}
}

// discovery handles the neighbour discovery of an ICMPv6 frame, to a
// group or to the box: it answers a solicitation and learns from an
// advertisement (ok: that is the frame's Result), and learns the default
// router from a router advertisement on the WAN, which it leaves to the
// caller.
func (w *Worker) discovery(s *snapshot, side Side, pkt []byte, f *frame.Frame) (res Result, ok bool) {
	switch f.ICMP.Type {
	case icmpNS:
		return w.solicitation(s, side, pkt, f), true
	case icmpNA:
		return w.advertisement(s, side, pkt, f), true
	case icmpRA:
		if side == WAN {
			w.routerAdvert(s, pkt, f)
		}
	}
	return Result{}, false
}

// fromHost sends a frame of the box's own stack to the LAN: multicast (its
// RAs, NS, MLD) as it is, unicast to a LAN address through the neighbour
// cache; the box's stack does not reach the WAN over IPv6.
func (w *Worker) fromHost(s *snapshot, pkt []byte, f *frame.Frame) Result {
	if !f.IsIPv6() || f.L3End > len(pkt) || f.L3Off+frame.IPv6HeaderLen > f.L3End || f.NTags != 0 {
		return drop(ReasonMalformed)
	}
	dst := &f.IPv6.Dst
	switch {
	case f.Dst[0]&1 != 0:
		return Result{Action: routing.Forward, Port: s.side[LAN].ID, Frame: pkt[:f.L3End]}
	case isLinkLocal(dst) || inAny(s.lanNets, dst):
		return w.toNeighbour(s, LAN, *dst, pkt[:f.L3End], lookupTrusted)
	}
	return drop(ReasonNoRoute)
}

// toBox handles a packet to one of the box's addresses: NDP, echo
// requests, and from the LAN everything else for the box's stack; from
// the WAN only DHCPv6 to the client port reaches the host.
func (w *Worker) toBox(s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	if f.Proto == frame.ProtoICMPv6 && f.L4Off != 0 && !f.Fragment {
		if res, ok := w.discovery(s, side, pkt, f); ok {
			return res
		}
		switch f.ICMP.Type {
		case icmpRA:
			if side == WAN { // a unicast answer to the box's solicitation, learnt
				return Result{Action: routing.Consumed}
			}
		case frame.ICMPv6EchoRequest:
			if frame.VerifyChecksums(pkt, f) != nil {
				return drop(ReasonMalformed)
			}
			a := frame.Answer{MAC: s.side[side].MAC, Src6: f.IPv6.Dst, TTL: 64}
			if n := frame.PutEchoReply(w.scratch, pkt, f, &a); n > 0 {
				return Result{Action: routing.Reply, Port: s.side[side].ID, Frame: w.scratch[:n]}
			}
			return drop(ReasonMalformed)
		}
	}
	if side == LAN && s.host != 0 {
		return Result{Action: routing.Deliver, Port: s.host, Frame: pkt}
	}
	if side == LAN || f.Proto == frame.ProtoUDP && f.L4Off != 0 && f.UDP.DstPort == 546 {
		return Result{Action: routing.ToHost, Port: s.side[side].ID, Frame: pkt}
	}
	return drop(ReasonNotForUs)
}

// ndpValid checks an NDP message's common rules (RFC 4861 7.1.1, 7.1.2):
// hop limit 255, code 0, length, checksum, and that its options have
// non-zero lengths within the message; it returns the link-layer address
// option of type opt, if any.
func ndpValid(pkt []byte, f *frame.Frame, minLen int, opt byte) (lla [6]byte, has, ok bool) {
	msg := pkt[f.L4Off:f.L3End]
	if f.IPv6.HopLimit != ndpHops || f.ICMP.Code != 0 || len(msg) < minLen || f.Fragment ||
		frame.VerifyChecksums(pkt, f) != nil {
		return lla, false, false
	}
	for o := msg[minLen:]; len(o) > 0; {
		if len(o) < 8 || o[1] == 0 || int(o[1])*8 > len(o) {
			return lla, false, false
		}
		if o[0] == opt && o[1] == 1 {
			lla, has = [6]byte(o[2:8]), true
		}
		o = o[int(o[1])*8:]
	}
	return lla, has, true
}

// solicitation answers an NS for one of the box's addresses on side with
// an NA, learning the sender's link-layer address.
func (w *Worker) solicitation(s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	lla, has, ok := ndpValid(pkt, f, 24, optSLLA)
	target := [16]byte(pkt[f.L4Off+8 : f.L4Off+24])
	unspec := f.IPv6.Src == ([16]byte{})
	if !ok || target[0] == 0xff || unspec && (has || f.IPv6.Dst[0] != 0xff) {
		return drop(ReasonNDP)
	}
	if unspec && side == WAN && len(s.tent) != 0 && s.tentative(&target) {
		// Another node's DAD probe for an address the box probes too:
		// neither may have it (RFC 4862 5.4.3).
		w.r.wan.conflict(&target)
		return Result{Action: routing.Consumed}
	}
	if !s.boxAddr(side, &target) { // tentative ones are not answered for
		return Result{Action: routing.Consumed}
	}
	if has && !unspec {
		w.r.neigh.learn(side, &f.IPv6.Src, lla, learnCreate, w.sec, w.now)
	}
	dstMAC, dst, flags := f.Src, f.IPv6.Src, uint32(0x60000000) // solicited, override
	if unspec {
		dstMAC, dst, flags = allNodesMAC, [16]byte{0: 0xff, 1: 0x02, 15: 1}, 0x20000000
	}
	if side == LAN {
		flags |= 0x80000000 // router
	}
	b := w.scratch[:nsFrameLen]
	putNDP(b, dstMAC, s.side[side].MAC, target, dst, icmpNA, flags, target, optTLLA)
	w.c.na.Add(1)
	return Result{Action: routing.Reply, Port: s.side[side].ID, Frame: b}
}

// advertisement learns from an NA with a target link-layer address.
func (w *Worker) advertisement(s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	lla, has, ok := ndpValid(pkt, f, 24, optTLLA)
	if !ok || pkt[f.L4Off+8] == 0xff || f.IPv6.Dst[0] == 0xff && pkt[f.L4Off+4]&0x40 != 0 {
		return drop(ReasonNDP) // multicast target; solicited to a group
	}
	target := [16]byte(pkt[f.L4Off+8 : f.L4Off+24])
	if side == WAN && len(s.tent) != 0 && s.tentative(&target) {
		// Another node has the address the box probes (RFC 4862 5.4.4).
		w.r.wan.conflict(&target)
		return Result{Action: routing.Consumed}
	}
	solicited := pkt[f.L4Off+4]&0x40 != 0
	switch {
	case has && solicited:
		w.r.neigh.learn(side, &target, lla, learnConfirm, w.sec, w.now)
	case has && side == LAN && inAny(s.lanNets, &target):
		// A host announcing an address of its own (RFC 9131): it is
		// reachable from the WAN at once, without waiting for a
		// solicitation (which a scan's may be holding up).
		w.r.neigh.learn(side, &target, lla, learnAnnounce, w.sec, w.now)
	case has:
		w.r.neigh.learn(side, &target, lla, learnUpdate, w.sec, w.now)
	case solicited:
		// The answer to a unicast NS may leave the link-layer address
		// out (Linux does): it confirms the entry as it is (RFC 4861
		// 7.2.5), when it comes from the MAC the entry has.
		w.r.neigh.confirm(side, &target, f.Src, w.sec)
	}
	if side == LAN && s.host != 0 && f.Dst[0]&1 == 0 {
		// The box's stack resolves too (it shares the router's MAC and
		// addresses): a unicast NA reached only the router, so it is
		// delivered (a multicast one was bridged to the host port).
		return Result{Action: routing.Deliver, Port: s.host, Frame: pkt}
	}
	if side == LAN && s.host != 0 {
		return Result{Action: routing.ToHost, Port: s.side[side].ID, Frame: pkt}
	}
	return Result{Action: routing.Consumed}
}

// routerAdvert takes the WAN's default router from an RA (RFC 4861
// 6.1.2: link-local source, hop limit 255): its lifetime, its source
// link-layer address as a neighbour; and its prefixes for SLAAC.
func (w *Worker) routerAdvert(s *snapshot, pkt []byte, f *frame.Frame) {
	lla, has, ok := ndpValid(pkt, f, 16, optSLLA)
	if !ok || !isLinkLocal(&f.IPv6.Src) {
		return
	}
	w.r.wan.raSeen.Store(true)
	if has && !s.ptp {
		w.r.neigh.learn(WAN, &f.IPv6.Src, lla, learnCreate, w.sec, w.now)
	}
	for o := pkt[f.L4Off+16 : f.L3End]; len(o) >= 8; o = o[int(o[1])*8:] { // ndpValid checked the lengths
		if o[0] == optPrefix && o[1] == 4 {
			w.prefixOption(o)
		}
	}
	if s.ptp { // the default route is the link's
		return
	}
	life := uint32(binary.BigEndian.Uint16(pkt[f.L4Off+6:]))
	cur := w.r.gw.Load()
	switch {
	case life > 0 && (cur == nil || cur.addr != f.IPv6.Src || cur.until < w.sec+life/2):
		w.r.gw.Store(&gateway{addr: f.IPv6.Src, until: w.sec + life})
	case life == 0 && cur != nil && cur.addr == f.IPv6.Src:
		w.r.gw.Store(nil)
	}
}

// prefixOption takes a prefix information option (RFC 4861 4.6.2) for
// SLAAC as RFC 4862 5.5.3 says: with the A flag, a /64 (the interface
// identifiers are 64 bits), not link-local (nor multicast or
// unspecified), preferred lifetime not above valid.
func (w *Worker) prefixOption(o []byte) {
	bits, flags := o[2], o[3]
	valid, pref := binary.BigEndian.Uint32(o[4:8]), binary.BigEndian.Uint32(o[8:12])
	p := [16]byte(o[16:32])
	if flags&0x40 == 0 || bits != 64 || pref > valid || isLinkLocal(&p) || p[0] == 0xff || p == [16]byte{} {
		return
	}
	w.r.wan.prefixInfo([8]byte(p[:8]), pref, valid, w.sec)
}

// putNDP writes an NS or NA with one link-layer address option into b
// (nsFrameLen bytes).
func putNDP(b []byte, dstMAC, srcMAC [6]byte, src, dst [16]byte, typ uint8, flags uint32, target [16]byte, opt byte) {
	off := frame.PutEthernet(b, dstMAC, srcMAC, nil, frame.EtherTypeIPv6)
	h := frame.IPv6{PayloadLen: ndpMsgLen, NextHeader: frame.ProtoICMPv6, HopLimit: ndpHops, Src: src, Dst: dst}
	off += frame.PutIPv6Header(b[off:], &h)
	m := b[off : off+ndpMsgLen]
	m[0], m[1], m[2], m[3] = typ, 0, 0, 0
	binary.BigEndian.PutUint32(m[4:], flags)
	copy(m[8:24], target[:])
	m[24], m[25] = opt, 1
	copy(m[26:32], srcMAC[:])
	c := frame.Checksum(m, frame.PseudoSumIPv6(src, dst, frame.ProtoICMPv6, ndpMsgLen))
	binary.BigEndian.PutUint16(m[2:], c)
}

// putDAD writes a DAD probe for target into b (dadFrameLen bytes): an NS
// from the unspecified address to target's solicited-node group, without
// a source link-layer address option (RFC 4862 5.4.2).
func putDAD(b []byte, srcMAC [6]byte, target [16]byte) {
	dst, mac := solicitedNode(&target)
	off := frame.PutEthernet(b, mac, srcMAC, nil, frame.EtherTypeIPv6)
	h := frame.IPv6{PayloadLen: 24, NextHeader: frame.ProtoICMPv6, HopLimit: ndpHops, Dst: dst}
	off += frame.PutIPv6Header(b[off:], &h)
	m := b[off : off+24]
	m[0], m[1], m[2], m[3] = icmpNS, 0, 0, 0
	binary.BigEndian.PutUint32(m[4:], 0)
	copy(m[8:24], target[:])
	binary.BigEndian.PutUint16(m[2:], frame.Checksum(m, frame.PseudoSumIPv6(h.Src, dst, frame.ProtoICMPv6, 24)))
}

// putRS writes a router solicitation from src with the source link-layer
// address option to all routers into b (rsFrameLen bytes).
func putRS(b []byte, srcMAC [6]byte, src [16]byte) {
	dst := [16]byte{0: 0xff, 1: 0x02, 15: 2}
	off := frame.PutEthernet(b, [6]byte{0x33, 0x33, 0, 0, 0, 2}, srcMAC, nil, frame.EtherTypeIPv6)
	h := frame.IPv6{PayloadLen: rsMsgLen, NextHeader: frame.ProtoICMPv6, HopLimit: ndpHops, Src: src, Dst: dst}
	off += frame.PutIPv6Header(b[off:], &h)
	m := b[off : off+rsMsgLen]
	clear(m)
	m[0] = icmpRS
	m[8], m[9] = optSLLA, 1
	copy(m[10:16], srcMAC[:])
	binary.BigEndian.PutUint16(m[2:], frame.Checksum(m, frame.PseudoSumIPv6(src, dst, frame.ProtoICMPv6, rsMsgLen)))
}

// solicitedNode is the solicited-node multicast group of a and its
// Ethernet address.
func solicitedNode(a *[16]byte) ([16]byte, [6]byte) {
	return [16]byte{0: 0xff, 1: 0x02, 11: 1, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]},
		[6]byte{0x33, 0x33, 0xff, a[13], a[14], a[15]}
}

// solicit queues an NS for target on side, to its solicited-node group.
func (w *Worker) solicit(s *snapshot, side Side, target [16]byte) {
	if w.nsUsed == len(w.nsBufs) {
		return
	}
	b := w.nsBufs[w.nsUsed]
	w.nsUsed++
	dst, mac := solicitedNode(&target)
	src := s.side[side].Addrs[0].As16()
	putNDP(b, mac, s.side[side].MAC, src, dst, icmpNS, 0, target, optSLLA)
	w.out = append(w.out, outFrame{port: s.side[side].ID, b: b})
	w.c.ns.Add(1)
}

// refreshProbes sends the probes the fast path asked for
// (NeighbourFresh): a unicast NS to each neighbour's cached MAC (RFC 4861
// 7.3.3's PROBE), which a solicited NA answers.
func (w *Worker) refreshProbes(s *snapshot) {
	w.probes = w.r.neigh.refresh.Take(w.probes[:0])
	for _, p := range w.probes {
		if w.nsUsed == len(w.nsBufs) {
			return
		}
		b := w.nsBufs[w.nsUsed]
		w.nsUsed++
		src := s.side[p.side].Addrs[0].As16()
		putNDP(b, p.mac, s.side[p.side].MAC, src, p.addr, icmpNS, 0, p.addr, optSLLA)
		w.out = append(w.out, outFrame{port: s.side[p.side].ID, b: b})
		w.c.ns.Add(1)
	}
}

// toNeighbour sends the IP packet in pkt (an Ethernet frame) to hop on
// side: at once when its MAC is known, else queued behind an NS. kind
// says whether hop is an unknown destination of a new connection from the
// WAN, whose resolution is bounded (neighbours.resolve) and whose frames
// take at most half the queue, so that a scan leaves room to known ones;
// when that half is full the oldest of them makes room, so that a scan
// does not crowd out another source's frame while its NS is answered.
func (w *Worker) toNeighbour(s *snapshot, side Side, hop [16]byte, pkt []byte, kind lookupKind) Result {
	if side == WAN && s.ptp { // no neighbours there: the link's peer
		copy(pkt[0:6], s.peerMAC[:])
		copy(pkt[6:12], s.side[side].MAC[:])
		return Result{Action: routing.Forward, Port: s.side[side].ID, Frame: pkt}
	}
	mac, res, sol := w.r.neigh.resolve(side, &hop, w.sec, w.now, kind)
	if sol {
		w.solicit(s, side, hop)
	}
	switch res {
	case resUsable:
		copy(pkt[0:6], mac[:])
		copy(pkt[6:12], s.side[side].MAC[:])
		return Result{Action: routing.Forward, Port: s.side[side].ID, Frame: pkt}
	case resFailed:
		return drop(ReasonNeighFailed)
	case resRefused:
		return drop(ReasonNeighLimit)
	}
	if kind == lookupUnknown && 2*w.unknownWaiting >= len(w.pend) {
		w.dropOldestUnknown()
	}
	for i := range w.pend {
		p := &w.pend[i]
		if p.state != 0 || len(pkt) > len(p.buf) {
			continue
		}
		w.pendSeq++
		p.n = copy(p.buf, pkt)
		p.side, p.hop, p.since, p.state, p.kind, p.seq = side, hop, w.sec, 1, kind, w.pendSeq
		w.wait(p, 1)
		w.pendGen = w.r.neigh.resolved.Load()
		return Result{Action: routing.Queued}
	}
	return drop(ReasonQueueFull)
}

// dropOldestUnknown drops the frame to an unknown destination queued
// first (queue_full).
func (w *Worker) dropOldestUnknown() {
	var old *pendFrame
	for i := range w.pend {
		if p := &w.pend[i]; p.state == 1 && p.kind == lookupUnknown && (old == nil || p.seq < old.seq) {
			old = p
		}
	}
	if old != nil {
		old.state = 0
		w.wait(old, -1)
		w.c.drops[ReasonQueueFull].Add(1)
	}
}

// wait counts the queued frame p in (d = 1) or out (d = -1).
func (w *Worker) wait(p *pendFrame, d int) {
	w.waiting += d
	if p.kind == lookupUnknown {
		w.unknownWaiting += d
	}
}

// flush releases the queued frames whose next hop is known now and drops
// those that waited longer than pendingMax.
func (w *Worker) flush(s *snapshot) {
	w.pendGen = w.r.neigh.resolved.Load()
	for i := range w.pend {
		p := &w.pend[i]
		if p.state != 1 {
			continue
		}
		mac, res, sol := w.r.neigh.resolve(p.side, &p.hop, w.sec, w.now, p.kind)
		if sol {
			w.solicit(s, p.side, p.hop)
		}
		switch {
		case res == resUsable:
			copy(p.buf[0:6], mac[:])
			copy(p.buf[6:12], s.side[p.side].MAC[:])
			w.out = append(w.out, outFrame{port: s.side[p.side].ID, b: p.buf[:p.n]})
			p.state = 2
			w.wait(p, -1)
		case res == resRefused:
			p.state = 0
			w.wait(p, -1)
			w.c.drops[ReasonNeighLimit].Add(1)
		case w.sec-p.since >= pendingMax || res == resFailed:
			p.state = 0
			w.wait(p, -1)
			w.c.drops[ReasonNeighFailed].Add(1)
		}
	}
}
