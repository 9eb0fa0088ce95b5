package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
)

// Frames the router generates are built whole, with full checksums.

// maxQuote is how much of an offending packet an ICMP error carries, so
// that the error fits in 576 bytes (RFC 1812 4.3.2.3).
const maxQuote = 576 - frame.IPv4HeaderLen - frame.ICMPHeaderLen

// putEth writes an Ethernet header.
func putEth(b []byte, dst, src [6]byte, etype uint16) {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], etype)
}

// putIPv4 writes a 20-byte IPv4 header with its checksum.
func (w *Worker) putIPv4(b []byte, tos uint8, total int, proto uint8, src, dst uint32) {
	w.ipid++
	b[0], b[1] = 0x45, tos
	binary.BigEndian.PutUint16(b[2:], uint16(total))
	binary.BigEndian.PutUint16(b[4:], w.ipid)
	binary.BigEndian.PutUint16(b[6:], 0)
	b[8], b[9] = 64, proto
	binary.BigEndian.PutUint16(b[10:], 0)
	binary.BigEndian.PutUint32(b[12:], src)
	binary.BigEndian.PutUint32(b[16:], dst)
	binary.BigEndian.PutUint16(b[10:], frame.IPv4HeaderChecksum(b[:20]))
}

// padded pads a frame of n bytes in b to the 60-byte Ethernet minimum.
func padded(b []byte, n int) []byte {
	for n < 60 {
		b[n] = 0
		n++
	}
	return b[:n]
}

// isICMPError reports whether f is an ICMP error message.
func isICMPError(f *frame.Frame) bool {
	if f.Proto != frame.ProtoICMP || f.L4Off == 0 {
		return false
	}
	switch f.ICMP.Type {
	case frame.ICMPDestUnreach, frame.ICMPSourceQuench, frame.ICMPRedirect, frame.ICMPTimeExceeded, frame.ICMPParamProblem:
		return true
	}
	return false
}

// icmpError answers f, received on side, with an ICMP error from the
// box's address on that side, quoting f (RFC 792, RFC 1812 4.3.2.7: never
// about ICMP errors or later fragments, rate-limited). why is the drop
// reason counted for f.
func (w *Worker) icmpError(now int64, s *snapshot, side Side, pkt []byte, f *frame.Frame, typ, code uint8, rest uint32, why Reason) Result {
	p := &s.side[side]
	if p.addr == 0 || f.LaterFragment || isICMPError(f) || !w.r.icmpLimit.Allow(now) {
		return drop(why)
	}
	quote := pkt[f.L3Off:f.L3End]
	if len(quote) > maxQuote {
		quote = quote[:maxQuote]
	}
	b := w.scratch
	putEth(b, f.Src, p.mac, frame.EtherTypeIPv4)
	l3 := b[frame.EthernetHeaderLen:]
	total := frame.IPv4HeaderLen + frame.ICMPHeaderLen + len(quote)
	w.putIPv4(l3, 0xc0, total, frame.ProtoICMP, p.addr, be32(f.IPv4.Src))
	ic := l3[frame.IPv4HeaderLen:total]
	ic[0], ic[1] = typ, code
	binary.BigEndian.PutUint16(ic[2:], 0)
	binary.BigEndian.PutUint32(ic[4:], rest)
	copy(ic[8:], quote)
	binary.BigEndian.PutUint16(ic[2:], frame.Checksum(ic, 0))
	w.c.icmpErrors.Add(1)
	w.c.drops[why].Add(1)
	return Result{Action: Reply, Port: p.id, Frame: padded(b, frame.EthernetHeaderLen+total)}
}

// echoReply answers an echo request to the box's address addr.
func (w *Worker) echoReply(s *snapshot, side Side, pkt []byte, f *frame.Frame, addr uint32) Result {
	if frame.VerifyChecksums(pkt, f) != nil {
		return drop(ReasonBadChecksum)
	}
	p := &s.side[side]
	msg := pkt[f.L4Off:f.L3End]
	total := frame.IPv4HeaderLen + len(msg)
	b := w.scratch
	if frame.EthernetHeaderLen+total > len(b) {
		return drop(ReasonTooBig)
	}
	putEth(b, f.Src, p.mac, frame.EtherTypeIPv4)
	l3 := b[frame.EthernetHeaderLen:]
	w.putIPv4(l3, f.IPv4.TOS, total, frame.ProtoICMP, addr, be32(f.IPv4.Src))
	ic := l3[frame.IPv4HeaderLen:total]
	copy(ic, msg)
	ic[0] = frame.ICMPEchoReply
	binary.BigEndian.PutUint16(ic[2:], 0)
	binary.BigEndian.PutUint16(ic[2:], frame.Checksum(ic, 0))
	w.c.echoReplies.Add(1)
	return Result{Action: Reply, Port: p.id, Frame: padded(b, frame.EthernetHeaderLen+total)}
}

// reject answers a new connection the forward chain rejected: a TCP RST
// from the destination for TCP, an ICMP port unreachable from the box
// otherwise.
func (w *Worker) reject(now int64, s *snapshot, pkt []byte, f *frame.Frame) Result {
	side := w.fwdIn
	if f.Proto != frame.ProtoTCP {
		return w.icmpError(now, s, side, pkt, f, frame.ICMPDestUnreach, 3, 0, ReasonReject)
	}
	t := &f.TCP
	if t.Flags&frame.TCPRst != 0 {
		return drop(ReasonReject)
	}
	p := &s.side[side]
	b := w.scratch
	putEth(b, f.Src, p.mac, frame.EtherTypeIPv4)
	l3 := b[frame.EthernetHeaderLen:]
	total := frame.IPv4HeaderLen + frame.TCPHeaderLen
	w.putIPv4(l3, 0, total, frame.ProtoTCP, be32(f.IPv4.Dst), be32(f.IPv4.Src))
	th := l3[frame.IPv4HeaderLen:total]
	binary.BigEndian.PutUint16(th[0:], t.DstPort)
	binary.BigEndian.PutUint16(th[2:], t.SrcPort)
	var seq, ack uint32
	flags := uint8(frame.TCPRst)
	if t.Flags&frame.TCPAck != 0 {
		seq = t.Ack
	} else {
		n := uint32(f.L3End - f.PayloadOff)
		if t.Flags&frame.TCPSyn != 0 {
			n++
		}
		if t.Flags&frame.TCPFin != 0 {
			n++
		}
		ack = t.Seq + n
		flags |= frame.TCPAck
	}
	binary.BigEndian.PutUint32(th[4:], seq)
	binary.BigEndian.PutUint32(th[8:], ack)
	th[12], th[13] = 5<<4, flags
	binary.BigEndian.PutUint32(th[14:], 0) // window, checksum
	binary.BigEndian.PutUint16(th[18:], 0)
	ps := frame.PseudoSumIPv4(f.IPv4.Dst, f.IPv4.Src, frame.ProtoTCP, frame.TCPHeaderLen)
	binary.BigEndian.PutUint16(th[16:], frame.Checksum(th, ps))
	w.c.resets.Add(1)
	w.c.drops[ReasonReject].Add(1)
	return Result{Action: Reply, Port: p.id, Frame: padded(b, frame.EthernetHeaderLen+total)}
}

// putARP writes an Ethernet/IPv4 ARP packet and returns the padded frame.
func putARP(b []byte, ethDst, ethSrc [6]byte, op uint16, sha [6]byte, spa uint32, tha [6]byte, tpa uint32) []byte {
	putEth(b, ethDst, ethSrc, frame.EtherTypeARP)
	a := b[frame.EthernetHeaderLen:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], frame.EtherTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], sha[:])
	binary.BigEndian.PutUint32(a[14:], spa)
	copy(a[18:24], tha[:])
	binary.BigEndian.PutUint32(a[24:], tpa)
	return padded(b, frame.EthernetHeaderLen+frame.ARPLen)
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
			return Result{Action: Consumed}
		}
		w.c.arpReplies.Add(1)
		b := putARP(w.scratch, a.SenderMAC, p.mac, 2, p.mac, p.addr, a.SenderMAC, sip)
		return Result{Action: Reply, Port: p.id, Frame: b}
	case 2:
		if sip != 0 {
			w.learn(now, s, side, sip, a.SenderMAC, false)
		}
		return Result{Action: Consumed}
	}
	return drop(ReasonARP)
}

func (w *Worker) learn(now int64, s *snapshot, side Side, ip uint32, mac [6]byte, create bool) {
	if _, resolved := w.r.neigh.learn(side, ip, mac, now, create); resolved && len(w.pend) != 0 {
		w.flushPending(now, s)
	}
}

// arpRequest puts an ARP request for ip on side into the outbox, sent to
// dst (broadcast, or the known MAC for a unicast probe).
func (w *Worker) arpRequest(now int64, s *snapshot, side Side, ip uint32, dst [6]byte) {
	p := &s.side[side]
	if p.addr == 0 || !w.r.arpLimit.Allow(now) {
		return
	}
	b, ok := w.allocBuf()
	if !ok {
		w.c.drops[ReasonQueueFull].Add(1)
		return
	}
	fr := putARP(w.bufs[b], dst, p.mac, 1, p.mac, p.addr, [6]byte{}, ip)
	if w.push(p.id, b, len(fr)) {
		w.c.arpRequests.Add(1)
	}
}

// icmpErrorIn translates an ICMP error about a tracked connection: the
// outer destination (and the outer source when the error comes from the
// connection's peer itself) and the quoted packet's addresses and ports
// are rewritten to what the other side knows, with the quoted IP and
// transport checksums and the ICMP checksum adjusted incrementally. ok is
// false when the quote names no tracked connection.
func (w *Worker) icmpErrorIn(now int64, s *snapshot, side Side, pkt []byte, f *frame.Frame) (Result, bool) {
	if f.Fragment {
		return drop(ReasonFragment), true
	}
	in := &w.in
	if err := frame.ParseEmbedded(pkt, f, in); err != nil || in.L4Off == 0 && classOf(in.Proto) >= 0 {
		return drop(ReasonMalformed), true
	}
	if frame.VerifyChecksums(pkt, f) != nil {
		return drop(ReasonBadChecksum), true
	}
	esrc, edst := be32(in.IPv4.Src), be32(in.IPv4.Dst)
	var k key
	switch in.Proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		k = mkKey(edst, esrc, in.DstPort, in.SrcPort, in.Proto, side)
	case frame.ProtoICMP:
		if in.ICMPType != frame.ICMPEchoRequest {
			return Result{}, false
		}
		k = mkKey(edst, esrc, 0, in.ICMPID, in.Proto, side)
	default:
		k = mkKey(edst, esrc, 0, 0, in.Proto, side)
	}
	t := w.r.ct
	h := t.hash(k)
	st := &t.stripes[t.stripeOf(h)]
	st.mu.Lock()
	idx, dir, _, ok := t.find(st, k, h)
	if !ok || expired(t.entries[idx].deadline.Load(), w.sec) {
		st.mu.Unlock()
		return Result{}, false
	}
	other := t.entries[idx].keys[1-dir]
	st.mu.Unlock()
	if be32(f.IPv4.Dst) != esrc {
		return drop(ReasonInvalid), true
	}
	out := other.side()
	if f.IPv4.TTL <= 1 {
		return drop(ReasonTTL), true
	}
	if f.L3End-f.L3Off > s.side[out].mtu {
		return drop(ReasonTooBig), true
	}
	// The quoted packet (t,tp → s,sp) becomes (t',tp' → s',sp'), t' and
	// s' being where the error goes and the peer as the other side knows it.
	newT, newTP, newS, newSP := other.src(), other.sport(), other.dst(), other.dport()

	// Snapshot the quoted headers to fold every change into the ICMP
	// checksum at the end.
	eip := in.L3Off
	end := min(f.L3End, eip+int(in.IPv4.IHL)*4+frame.TCPHeaderLen)
	var before [60 + frame.TCPHeaderLen]byte
	nb := copy(before[:], pkt[eip:end])

	ipcs := eip + 10
	l4cs, udp := -1, false
	switch in.Proto {
	case frame.ProtoTCP:
		if in.L4Off+18 <= f.L3End {
			l4cs = in.L4Off + 16
		}
	case frame.ProtoUDP:
		if binary.BigEndian.Uint16(pkt[in.L4Off+6:]) != 0 {
			l4cs, udp = in.L4Off+6, true
		}
	case frame.ProtoICMP:
		l4cs = in.L4Off + 2
	}
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
	set32(eip+12, newT, pseudo)
	set32(eip+16, newS, pseudo)
	switch in.Proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		set16(in.L4Off, newTP)
		set16(in.L4Off+2, newSP)
	case frame.ProtoICMP:
		set16(in.L4Off+4, newTP)
	}
	icmpcs := f.L4Off + 2
	c := binary.BigEndian.Uint16(pkt[icmpcs:])
	c = frame.UpdateBytes(c, before[:nb], pkt[eip:eip+nb])
	binary.BigEndian.PutUint16(pkt[icmpcs:], c)
	f.ICMP.Checksum = c

	if be32(f.IPv4.Src) == edst {
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

// fix16 folds a 16-bit change into the checksum at b[off:]; udp keeps a
// zero (absent) UDP checksum zero and never produces one.
func fix16(b []byte, off int, from, to uint16, udp bool) {
	c := binary.BigEndian.Uint16(b[off:])
	if udp {
		c = frame.UpdateUDP16(c, from, to)
	} else {
		c = frame.Update16(c, from, to)
	}
	binary.BigEndian.PutUint16(b[off:], c)
}

// fix32 is fix16 for a 32-bit change.
func fix32(b []byte, off int, from, to uint32, udp bool) {
	c := binary.BigEndian.Uint16(b[off:])
	if udp {
		c = frame.UpdateUDP32(c, from, to)
	} else {
		c = frame.Update32(c, from, to)
	}
	binary.BigEndian.PutUint16(b[off:], c)
}
