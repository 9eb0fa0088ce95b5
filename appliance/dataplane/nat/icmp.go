package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// Frames the router generates are built whole, with full checksums, by
// package frame's writers into the worker's scratch buffer.

// answer returns the headers of a frame the router sends from port p and
// the IPv4 address src: the worker's next IP identification (reply commits
// it), TTL 64, p's MTU.
func (w *Worker) answer(p *port, src [4]byte, tos uint8) frame.Answer {
	return frame.Answer{MAC: p.mac, Src4: src, TOS: tos, ID: w.ipid + 1, TTL: 64, MTU: p.mtu}
}

// reply returns the n-byte frame in the scratch buffer, sent on p, and
// commits the IP identification answer handed out.
func (w *Worker) reply(p *port, n int) Result {
	w.ipid++
	return Result{Action: routing.Reply, Port: p.id, Frame: w.scratch[:n]}
}

// icmpError answers f, received on side, with an ICMP error from the
// box's address on that side, quoting f (RFC 792, RFC 1812 4.3.2.7: never
// about ICMP errors or later fragments, rate-limited). why is the drop
// reason counted for f.
func (w *Worker) icmpError(now int64, s *snapshot, side Side, pkt []byte, f *frame.Frame, typ, code uint8, rest uint32, why Reason) Result {
	p := &s.side[side]
	if p.addr == 0 || f.LaterFragment || frame.IsICMPError(f) || !w.r.icmpLimit.Allow(now) {
		return drop(why)
	}
	a := w.answer(p, put32(p.addr), 0xc0)
	n := frame.PutICMPError(w.scratch, pkt, f, &a, typ, code, rest)
	if n == 0 {
		return drop(why)
	}
	w.c.icmpErrors.Add(1)
	w.c.drops[why].Add(1)
	return w.reply(p, n)
}

// echoReply answers an echo request to the box's address addr.
func (w *Worker) echoReply(s *snapshot, side Side, pkt []byte, f *frame.Frame, addr uint32) Result {
	if frame.VerifyChecksums(pkt, f) != nil {
		return drop(ReasonBadChecksum)
	}
	p := &s.side[side]
	a := w.answer(p, put32(addr), f.IPv4.TOS)
	n := frame.PutEchoReply(w.scratch, pkt, f, &a)
	if n == 0 {
		return drop(ReasonTooBig)
	}
	w.c.echoReplies.Add(1)
	return w.reply(p, n)
}

// reject answers a new connection the forward chain rejected: a TCP RST
// from the destination for TCP, an ICMP port unreachable from the box
// otherwise.
func (w *Worker) reject(now int64, s *snapshot, pkt []byte, f *frame.Frame) Result {
	side := w.fwdIn
	if f.Proto != frame.ProtoTCP {
		return w.icmpError(now, s, side, pkt, f, frame.ICMPDestUnreach, 3, 0, ReasonReject)
	}
	p := &s.side[side]
	a := w.answer(p, f.IPv4.Dst, 0)
	n := frame.PutRST(w.scratch, f, &a)
	if n == 0 {
		return drop(ReasonReject) // a RST (or a segment cut before its header) is not answered
	}
	w.c.resets.Add(1)
	w.c.drops[ReasonReject].Add(1)
	return w.reply(p, n)
}

// arp handles an ARP packet: it answers requests for the box's address on
// the side, learns the requester, and learns replies (and gratuitous ARP)
// only for neighbours it already has an entry for.
func (w *Worker) arp(now int64, s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	a := &f.ARP
	p := &s.side[side]
	sip, tip := be32(a.SenderIP), be32(a.TargetIP)
	if p.addr == 0 || sip == p.addr || sip != 0 && !p.onLink(sip) || a.SenderMAC[0]&1 != 0 ||
		sip == p.bcast || sip == p.net {
		return drop(ReasonARP)
	}
	switch a.Op {
	case 1:
		if sip != 0 {
			w.learn(now, s, side, sip, a.SenderMAC, tip == p.addr)
		}
		if tip != p.addr {
			return Result{Action: routing.Consumed}
		}
		w.c.arpReplies.Add(1)
		r := frame.ARP{Op: 2, SenderMAC: p.mac, SenderIP: put32(p.addr), TargetMAC: a.SenderMAC, TargetIP: a.SenderIP}
		n := frame.PutARP(w.scratch, a.SenderMAC, p.mac, &r)
		return Result{Action: routing.Reply, Port: p.id, Frame: w.scratch[:n]}
	case 2:
		if sip != 0 {
			w.learn(now, s, side, sip, a.SenderMAC, false)
		}
		return Result{Action: routing.Consumed}
	}
	return drop(ReasonARP)
}

// learn records an ARP packet's sender. A claim that moves a resolved
// neighbour to another MAC is not taken while the MAC it has answers: it
// is counted (nat_arp_conflict) and that MAC is probed by unicast at once,
// so the real neighbour confirms itself and a spoofer never takes over;
// one that stopped answering is replaced once the probes go unanswered.
func (w *Worker) learn(now int64, s *snapshot, side Side, ip uint32, mac [6]byte, create bool) {
	if create && !w.r.neighLimit.Allow(now) {
		create = false // a spray of new senders: bounded creations
	}
	switch res, n := w.r.neigh.learn(side, ip, mac, now, create, s.probes, s.neighPin()); res {
	case learnResolved:
		if len(w.pend) != 0 {
			w.flushPending(now, s)
		}
	case learnConflict:
		w.c.drops[ReasonARPConflict].Add(1)
		w.probe(now, s, side, ip, &n, n.mac)
	}
}

// broadcastMAC is where an ARP request for an unresolved address goes.
var broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// probe sends an ARP request for the entry n of ip on side to dst when
// claimProbe allows one.
func (w *Worker) probe(now int64, s *snapshot, side Side, ip uint32, n *neigh, dst [6]byte) {
	if claimProbe(n, now) && !w.arpRequest(now, s, side, ip, dst) {
		unclaimProbe(n)
	}
}

// arpRequest puts an ARP request for ip on side into the outbox, sent to
// dst: broadcast, within ARPRate (what resolving many unknown addresses
// costs), or the known MAC of a neighbour being probed, which claimProbe
// alone limits so that no resolution starves the neighbours in use. ok
// says it went out.
func (w *Worker) arpRequest(now int64, s *snapshot, side Side, ip uint32, dst [6]byte) (ok bool) {
	p := &s.side[side]
	if p.addr == 0 || dst == broadcastMAC && !w.r.arpLimit.Allow(now) {
		return false
	}
	b, ok := w.allocBuf()
	if !ok {
		w.c.drops[ReasonQueueFull].Add(1)
		return false
	}
	r := frame.ARP{Op: 1, SenderMAC: p.mac, SenderIP: put32(p.addr), TargetIP: put32(ip)}
	if !w.push(p.id, b, frame.PutARP(w.bufs[b], dst, p.mac, &r)) {
		return false
	}
	w.c.arpRequests.Add(1)
	return true
}

// icmpErrorIn translates an ICMP error about a tracked connection: the
// outer destination (and the outer source when the error comes from the
// connection's peer itself) and the quoted packet's addresses and ports
// are rewritten to what the other side knows, with the quoted IP and
// transport checksums and the ICMP checksum adjusted incrementally. ok is
// false when the quote names no tracked connection.
func (w *Worker) icmpErrorIn(now int64, s *snapshot, side Side, pkt []byte, f *frame.Frame) (Result, bool) {
	in := &w.in
	if res, bad := parseICMPError(pkt, f, in); bad {
		return res, true
	}
	other, ok := w.quotedConn(side, in)
	if !ok {
		return Result{}, false
	}
	out := other.side()
	switch {
	case be32(f.IPv4.Dst) != be32(in.IPv4.Src):
		return drop(ReasonInvalid), true
	case f.IPv4.TTL <= 1:
		return drop(ReasonTTL), true
	case f.L3End-f.L3Off > s.side[out].mtu:
		return drop(ReasonTooBig), true
	}
	// The quoted packet (t,tp → s,sp) becomes (t',tp' → s',sp'), t' and
	// s' being where the error goes and the peer as the other side knows it.
	newT, newS := other.src(), other.dst()
	fromPeer := be32(f.IPv4.Src) == be32(in.IPv4.Dst)
	rewriteQuote(pkt, f, in, newT, other.sport(), newS, other.dport())
	if fromPeer {
		frame.SetIPv4Src(pkt, f, put32(newS))
	}
	frame.SetIPv4Dst(pkt, f, put32(newT))
	frame.DecTTL(pkt, f)
	op := &s.side[out]
	nh := newT
	if out == WAN && !op.onLink(nh) {
		if nh = s.gateway; nh == 0 {
			return drop(ReasonNoRoute), true
		}
	}
	copy(pkt[6:12], op.mac[:])
	w.c.icmpTranslated.Add(1)
	return w.send(now, s, out, nh, pkt), true
}

// parseICMPError parses the packet the ICMP error f quotes into in. bad is
// true, with the drop, for an error the router does not translate: a
// fragment, a quote that does not parse or lacks the transport header
// its connection is keyed on, or a bad checksum.
func parseICMPError(pkt []byte, f *frame.Frame, in *frame.Inner) (res Result, bad bool) {
	if f.Fragment {
		return drop(ReasonFragment), true
	}
	if err := frame.ParseEmbedded(pkt, f, in); err != nil || in.L4Off == 0 && classOf(in.Proto) >= 0 {
		return drop(ReasonMalformed), true
	}
	if frame.VerifyChecksums(pkt, f) != nil {
		return drop(ReasonBadChecksum), true
	}
	return Result{}, false
}

// quotedConn finds the live connection of the packet in quotes, an answer
// to which arrived on side, and returns the key of the connection's other
// direction. ok is false when there is none.
func (w *Worker) quotedConn(side Side, in *frame.Inner) (other key, ok bool) {
	esrc, edst := be32(in.IPv4.Src), be32(in.IPv4.Dst)
	var k key
	switch in.Proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		k = mkKey(edst, esrc, in.DstPort, in.SrcPort, in.Proto, side)
	case frame.ProtoICMP:
		if in.ICMPType != frame.ICMPEchoRequest {
			return key{}, false
		}
		k = mkKey(edst, esrc, 0, in.ICMPID, in.Proto, side)
	default:
		k = mkKey(edst, esrc, 0, 0, in.Proto, side)
	}
	t := w.r.ct
	st, idx, dir, ok := t.lookup(k)
	if !ok {
		return key{}, false
	}
	e := &t.entries[idx]
	if expired(e.deadline.Load(), w.sec) {
		st.mu.Unlock()
		return key{}, false
	}
	other = e.keys[1-dir]
	st.mu.Unlock()
	return other, true
}

// rewriteQuote rewrites the packet that the ICMP error f quotes (parsed
// into in) to (t,tp → s,sp): its addresses and its ports (the identifier
// of a quoted echo request), with the quoted IP and transport checksums
// adjusted, and the ICMP checksum adjusted for all of it.
func rewriteQuote(pkt []byte, f *frame.Frame, in *frame.Inner, t uint32, tp uint16, s uint32, sp uint16) {
	// Snapshot the quoted headers to fold every change into the ICMP
	// checksum at the end.
	eip := in.L3Off
	end := min(f.L3End, eip+int(in.IPv4.IHL)*4+frame.TCPHeaderLen)
	var before [60 + frame.TCPHeaderLen]byte
	nb := copy(before[:], pkt[eip:end])

	ipcs := eip + 10
	l4cs, udp := quotedL4Checksum(pkt, f, in)
	pseudo := in.Proto == frame.ProtoTCP || in.Proto == frame.ProtoUDP
	set32 := func(off int, v uint32, l4 bool) {
		old := binary.BigEndian.Uint32(pkt[off:])
		if old == v {
			return
		}
		fix32(pkt, ipcs, old, v, false)
		if l4 && l4cs >= 0 {
			fix32(pkt, l4cs, old, v, udp)
		}
		binary.BigEndian.PutUint32(pkt[off:], v)
	}
	set16 := func(off int, v uint16) {
		old := binary.BigEndian.Uint16(pkt[off:])
		if old == v {
			return
		}
		if l4cs >= 0 {
			fix16(pkt, l4cs, old, v, udp)
		}
		binary.BigEndian.PutUint16(pkt[off:], v)
	}
	set32(eip+12, t, pseudo)
	set32(eip+16, s, pseudo)
	switch in.Proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		set16(in.L4Off, tp)
		set16(in.L4Off+2, sp)
	case frame.ProtoICMP:
		set16(in.L4Off+4, tp)
	}
	icmpcs := f.L4Off + 2
	c := binary.BigEndian.Uint16(pkt[icmpcs:])
	c = frame.UpdateBytes(c, before[:nb], pkt[eip:eip+nb])
	binary.BigEndian.PutUint16(pkt[icmpcs:], c)
	f.ICMP.Checksum = c
}

// quotedL4Checksum returns the offset in pkt of the quoted transport
// checksum that a rewrite of the quote must keep right, -1 when the quote
// holds none to keep (a TCP header cut before it, a UDP checksum of 0, a
// protocol without one); udp marks a UDP checksum.
func quotedL4Checksum(pkt []byte, f *frame.Frame, in *frame.Inner) (off int, udp bool) {
	switch in.Proto {
	case frame.ProtoTCP:
		if in.L4Off+18 <= f.L3End {
			return in.L4Off + 16, false
		}
	case frame.ProtoUDP:
		if binary.BigEndian.Uint16(pkt[in.L4Off+6:]) != 0 {
			return in.L4Off + 6, true
		}
	case frame.ProtoICMP:
		return in.L4Off + 2, false
	}
	return -1, false
}

// fix16 folds a 16-bit change into the checksum at b[off:]; udp keeps a
// zero (absent) UDP checksum zero and never produces one.
func fix16(b []byte, off int, from, to uint16, udp bool) {
	c := binary.BigEndian.Uint16(b[off:])
	putFixed(b, off, c, frame.Update16(c, from, to), udp)
}

// fix32 is fix16 for a 32-bit change.
func fix32(b []byte, off int, from, to uint32, udp bool) {
	c := binary.BigEndian.Uint16(b[off:])
	putFixed(b, off, c, frame.Update32(c, from, to), udp)
}

// putFixed stores checksum c, updated from old, at b[off:]; a UDP checksum
// (udp) follows RFC 768 as frame.UpdateUDP16 does: none (0) stays none
// and a computed 0 is sent as 0xffff.
func putFixed(b []byte, off int, old, c uint16, udp bool) {
	switch {
	case udp && old == 0:
		c = 0
	case udp && c == 0:
		c = 0xffff
	}
	binary.BigEndian.PutUint16(b[off:], c)
}
