package nat

import (
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// xlate is what a forwarded packet becomes.
type xlate struct {
	src, dst     uint32
	sport, dport uint16
}

// flowKey returns the connection key of f arriving on side. class is
// what the packet is: 0 a connection packet, 1 an ICMP error, 2 an ICMP
// message the router does not track.
func flowKey(f *frame.Frame, side Side) (k key, class int) {
	src, dst := be32(f.IPv4.Src), be32(f.IPv4.Dst)
	switch f.Proto {
	case frame.ProtoTCP:
		return mkKey(src, dst, f.TCP.SrcPort, f.TCP.DstPort, f.Proto, side), 0
	case frame.ProtoUDP:
		return mkKey(src, dst, f.UDP.SrcPort, f.UDP.DstPort, f.Proto, side), 0
	case frame.ProtoICMP:
		switch f.ICMP.Type {
		case frame.ICMPEchoRequest:
			return mkKey(src, dst, f.ICMP.ID, 0, f.Proto, side), 0
		case frame.ICMPEchoReply:
			return mkKey(src, dst, 0, f.ICMP.ID, f.Proto, side), 0
		case frame.ICMPDestUnreach, frame.ICMPTimeExceeded, frame.ICMPParamProblem:
			return key{}, 1
		}
		return key{}, 2
	}
	return mkKey(src, dst, 0, 0, f.Proto, side), 0
}

// fromLAN handles a packet from a LAN host to the WAN (or, hairpin, to
// the WAN address).
func (w *Worker) fromLAN(now int64, s *snapshot, inPort int, pkt []byte, f *frame.Frame, hairpin bool) Result {
	k, class := flowKey(f, LAN)
	switch class {
	case 1:
		if res, ok := w.icmpErrorIn(now, s, LAN, pkt, f); ok {
			return res
		}
		if hairpin {
			return Result{Action: routing.ToHost, Port: inPort, Frame: pkt}
		}
		return drop(ReasonInvalid)
	case 2:
		if hairpin {
			return Result{Action: routing.ToHost, Port: inPort, Frame: pkt}
		}
		return drop(ReasonInvalid)
	}
	if res, ok := w.established(now, s, k, pkt, f); ok {
		return res
	}
	wanAddr := s.side[WAN].addr
	if hairpin {
		var to uint32
		var toPort uint16
		fw := false
		if f.Proto == frame.ProtoTCP || f.Proto == frame.ProtoUDP {
			if to, toPort, fw = s.forward(f.Proto, k.dport()); !fw {
				// Another LAN endpoint's mapping (endpoint-independent
				// filtering for hairpinned packets).
				to, toPort, fw = w.r.maps.internal(f.Proto, k.dport())
			}
		}
		if !fw {
			return w.toBox(now, s, LAN, inPort, pkt, f, wanAddr)
		}
		if r, stop := w.admit(now, s, inPort, LAN, LAN, pkt, f, to, toPort); stop {
			return r
		}
		nat, ok := w.r.maps.acquire(f.Proto, k.src(), k.sport(), s)
		if !ok {
			return drop(ReasonNoPorts)
		}
		reply := mkKey(to, wanAddr, toPort, nat, f.Proto, LAN)
		return w.create(now, s, [2]key{k, reply}, kindHairpin, pkt, f, true)
	}
	if wanAddr == 0 {
		return drop(ReasonNoRoute)
	}
	if r, stop := w.admit(now, s, inPort, LAN, WAN, pkt, f, k.dst(), k.dport()); stop {
		return r
	}
	var reply key
	if classOf(f.Proto) < 0 {
		reply = mkKey(k.dst(), wanAddr, 0, 0, f.Proto, WAN)
	} else {
		nat, ok := w.r.maps.acquire(f.Proto, k.src(), k.sport(), s)
		if !ok {
			return drop(ReasonNoPorts)
		}
		reply = mkKey(k.dst(), wanAddr, k.dport(), nat, f.Proto, WAN)
	}
	return w.create(now, s, [2]key{k, reply}, kindSNAT, pkt, f, classOf(f.Proto) >= 0)
}

// fromWAN handles a packet to the WAN address.
func (w *Worker) fromWAN(now int64, s *snapshot, inPort int, pkt []byte, f *frame.Frame) Result {
	k, class := flowKey(f, WAN)
	switch class {
	case 1:
		if res, ok := w.icmpErrorIn(now, s, WAN, pkt, f); ok {
			return res
		}
		return Result{Action: routing.ToHost, Port: inPort, Frame: pkt}
	case 2:
		return w.toBox(now, s, WAN, inPort, pkt, f, k.dst())
	}
	if res, ok := w.established(now, s, k, pkt, f); ok {
		return res
	}
	if f.Proto == frame.ProtoTCP || f.Proto == frame.ProtoUDP {
		if to, toPort, fw := s.forward(f.Proto, k.dport()); fw {
			if r, stop := w.admit(now, s, inPort, WAN, LAN, pkt, f, to, toPort); stop {
				return r
			}
			reply := mkKey(to, k.src(), toPort, k.sport(), f.Proto, LAN)
			return w.create(now, s, [2]key{k, reply}, kindDNAT, pkt, f, false)
		}
	}
	return w.toBox(now, s, WAN, inPort, pkt, f, s.side[WAN].addr)
}

// admit runs the checks of a packet that opens a connection from side in
// to side out, to dst and dport (after DNAT, before SNAT): whether it may
// open one (newAllowed), the checks before any state changes (newChecks)
// and the forward chain (filter). stop reports that r is the answer.
func (w *Worker) admit(now int64, s *snapshot, inPort int, in, out Side, pkt []byte, f *frame.Frame, dst uint32, dport uint16) (r Result, stop bool) {
	if !newAllowed(f) {
		return drop(ReasonInvalid), true
	}
	if r, stop := w.newChecks(now, s, in, out, pkt, f); stop {
		return r, true
	}
	return w.filter(now, s, inPort, out, pkt, f, dst, dport)
}

// newAllowed reports whether f may open a connection: a TCP SYN, an ICMP
// echo request, anything else of UDP and other protocols.
func newAllowed(f *frame.Frame) bool {
	switch f.Proto {
	case frame.ProtoTCP:
		return f.TCP.Flags&(frame.TCPSyn|frame.TCPAck|frame.TCPRst|frame.TCPFin) == frame.TCPSyn
	case frame.ProtoICMP:
		return f.ICMP.Type == frame.ICMPEchoRequest
	}
	return true
}

// newChecks are the checks of a forwarded packet before any state
// changes: TTL and, with DF, the egress MTU. stop reports that r is the
// answer.
func (w *Worker) newChecks(now int64, s *snapshot, in, out Side, pkt []byte, f *frame.Frame) (r Result, stop bool) {
	if f.IPv4.TTL <= 1 {
		return w.icmpError(now, s, in, pkt, f, frame.ICMPTimeExceeded, 0, 0, ReasonTTL), true
	}
	if mtu := s.side[out].mtu; f.L3End-f.L3Off > mtu && f.IPv4.DF {
		// Without DF the box fragments it when it sends it (transmit).
		return w.icmpError(now, s, in, pkt, f, frame.ICMPDestUnreach, 4, uint32(mtu), ReasonTooBig), true
	}
	return Result{}, false
}

// filter asks the forward chain about a new connection (addresses after
// DNAT, before SNAT). stop reports that r is the answer.
func (w *Worker) filter(now int64, s *snapshot, inPort int, out Side, pkt []byte, f *frame.Frame, dst uint32, dport uint16) (r Result, stop bool) {
	if w.rw == nil {
		return Result{}, false
	}
	chain := rules.Forward
	if w.fromHost {
		chain = rules.Output // the box's own connection
	}
	k := &w.key
	*k = rules.Key{
		Chain:     chain,
		CtState:   rules.CtNew,
		InPort:    uint16(inPort),
		OutPort:   uint16(s.side[out].id),
		EtherType: rules.EtherTypeIPv4,
		SrcMAC:    f.Src,
		DstMAC:    f.Dst,
		Proto:     rules.Proto(f.Proto),
	}
	copy(k.SrcIP[:4], f.IPv4.Src[:])
	d := put32(dst)
	copy(k.DstIP[:4], d[:])
	switch f.Proto {
	case frame.ProtoTCP:
		k.SrcPort, k.DstPort = f.TCP.SrcPort, dport
		k.TCPFlags = rules.TCPFlagSet(f.TCP.Flags)
	case frame.ProtoUDP:
		k.SrcPort, k.DstPort = f.UDP.SrcPort, dport
	case frame.ProtoICMP:
		k.ICMPType, k.ICMPCode = f.ICMP.Type, f.ICMP.Code
	}
	switch w.rw.Lookup(k, len(pkt), now).Action {
	case rules.Drop:
		return drop(ReasonRule), true
	case rules.Reject:
		return w.reject(now, s, pkt, f), true
	}
	return Result{}, false
}

// create inserts a new connection whose original key is keys[0] (the key
// of f) and forwards f. mapped says keys[1] holds a NAT mapping reference
// to give back if the insert fails.
func (w *Worker) create(now int64, s *snapshot, keys [2]key, kind uint8, pkt []byte, f *frame.Frame, mapped bool) Result {
	state := stNone
	tcp := f.Proto == frame.ProtoTCP
	if tcp {
		state = stSynSent | synScale(pkt, f, 0) | noScale<<(scaleShift+4)
	}
	idx, err := w.r.ct.insert(keys, kind, state, w.sec, w.sec+s.timeout(f.Proto, state), uint64(f.L3End-f.L3Off), &s.limits)
	if err != insOK {
		if mapped {
			w.r.maps.release(keys[1].proto(), keys[1].dport())
		}
		switch err {
		case insClash:
			return drop(ReasonInvalid)
		case insLimit:
			return drop(ReasonSourceLimit)
		}
		return drop(ReasonTableFull)
	}
	if tcp {
		// What the responder must acknowledge, and the SYN's window.
		e := &w.r.ct.entries[idx]
		e.ack[1].Store(f.TCP.Seq + 1)
		e.wins.Store(uint32(f.TCP.Window))
	}
	w.c.newConns.Add(1)
	other := keys[1]
	return w.emit(now, s, other.side(), pkt, f, xlate{src: other.dst(), dst: other.src(), sport: other.dport(), dport: other.sport()}, true)
}

// established handles a packet of a known connection. ok is false when
// there is none (or it expired, or a TCP SYN reopens a closed one).
func (w *Worker) established(now int64, s *snapshot, k key, pkt []byte, f *frame.Frame) (Result, bool) {
	t := w.r.ct
	h := t.hash(k)
	st := &t.stripes[t.stripeOf(h)]
	st.mu.Lock()
	idx, dir, _, ok := t.find(st, k, h)
	if !ok {
		st.mu.Unlock()
		return Result{}, false
	}
	e := &t.entries[idx]
	if expired(e.deadline.Load(), w.sec) {
		g := t.cold[idx].gen.Load()
		st.mu.Unlock()
		if t.remove(idx, g, rmExpired, w.sec) {
			t.swept.Add(1)
		}
		return Result{}, false
	}
	other := e.keys[1-dir]
	out := other.side()
	if r, stop := w.newChecks(now, s, w.fwdIn, out, pkt, f); stop {
		st.mu.Unlock()
		return r, true
	}
	tcp := f.Proto == frame.ProtoTCP
	if tcp && f.TCP.Flags&frame.TCPRst != 0 {
		switch e.rstVerdict(e.state.Load(), dir, f) {
		case rstInvalid:
			st.mu.Unlock()
			return drop(ReasonRST), true
		case rstInWindow:
			// The receiver judges it (RFC 5961: a challenge ACK); the
			// connection stays, but goes quiet if the RST was real, so
			// it expires after the TIME_WAIT timeout unless its next
			// packet comes.
			if dl := w.sec + s.timeout(f.Proto, stTimeWait); int32(e.deadline.Load()-dl) > 0 {
				e.deadline.Store(dl)
			}
			e.count(&t.cold[idx], dir, uint64(f.L3End-f.L3Off))
			st.mu.Unlock()
			return w.emit(now, s, out, pkt, f, xlate{src: other.dst(), dst: other.src(), sport: other.dport(), dport: other.sport()}, true), true
		}
	}
	var next uint32
	for {
		old := e.state.Load()
		var valid, reopen bool
		next, valid, reopen = nextState(old, dir, f, w.sec)
		if valid && tcp && dir == 1 && f.TCP.Flags&(frame.TCPSyn|frame.TCPAck) == frame.TCPSyn|frame.TCPAck {
			next = next&^(noScale<<(scaleShift+4)) | synScale(pkt, f, 1)
		}
		if !valid {
			st.mu.Unlock()
			return drop(ReasonInvalid), true
		}
		if reopen {
			g := t.cold[idx].gen.Load()
			st.mu.Unlock()
			t.remove(idx, g, rmAny, w.sec)
			return Result{}, false
		}
		if next == old || e.state.CompareAndSwap(old, next) {
			if next&flagAssured != 0 && old&flagAssured == 0 {
				t.assured(e.keys[0].src(), next&flagInbound != 0)
			}
			break
		}
	}
	if dl := w.sec + s.timeout(f.Proto, next); e.deadline.Load() != dl {
		e.deadline.Store(dl)
	}
	if tcp {
		if f.TCP.Flags&frame.TCPSyn != 0 && dir == 1 && e.ack[0].Load() == 0 {
			e.ack[0].Store(f.TCP.Seq + 1) // what the originator must acknowledge
		}
		e.tcpTrack(next, dir, f)
	}
	e.count(&t.cold[idx], dir, uint64(f.L3End-f.L3Off))
	st.mu.Unlock()
	w.offerable = s.offloadable(f.Proto, next)
	return w.emit(now, s, out, pkt, f, xlate{src: other.dst(), dst: other.src(), sport: other.dport(), dport: other.sport()}, true), true
}

// emit rewrites f into tr, decrements the TTL, clamps the MSS, fills in
// the Ethernet addresses for side out and forwards it, or queues it for
// ARP resolution. ports says whether to rewrite ports or echo identifiers.
func (w *Worker) emit(now int64, s *snapshot, out Side, pkt []byte, f *frame.Frame, tr xlate, ports bool) Result {
	op := &s.side[out]
	nh := tr.dst
	if out == WAN && !op.onLink(nh) {
		if nh = s.gateway; nh == 0 {
			return drop(ReasonNoRoute)
		}
	}
	if f.Fragment && !f.LaterFragment {
		w.fragAdd(now, s, f, tr, out)
	}
	if src := be32(f.IPv4.Src); tr.src != src {
		frame.SetIPv4Src(pkt, f, put32(tr.src))
	}
	if dst := be32(f.IPv4.Dst); tr.dst != dst {
		frame.SetIPv4Dst(pkt, f, put32(tr.dst))
	}
	if ports && f.L4Off != 0 {
		switch f.Proto {
		case frame.ProtoTCP:
			if tr.sport != f.TCP.SrcPort {
				frame.SetSrcPort(pkt, f, tr.sport)
			}
			if tr.dport != f.TCP.DstPort {
				frame.SetDstPort(pkt, f, tr.dport)
			}
			if s.mss != 0 && f.TCP.Flags&frame.TCPSyn != 0 {
				clampMSS(pkt, f, uint16(s.mss))
			}
		case frame.ProtoUDP:
			if tr.sport != f.UDP.SrcPort {
				frame.SetSrcPort(pkt, f, tr.sport)
			}
			if tr.dport != f.UDP.DstPort {
				frame.SetDstPort(pkt, f, tr.dport)
			}
		case frame.ProtoICMP:
			id := tr.sport
			if f.ICMP.Type == frame.ICMPEchoReply {
				id = tr.dport
			}
			if id != f.ICMP.ID {
				frame.SetICMPEchoID(pkt, f, id)
			}
		}
	}
	frame.DecTTL(pkt, f)
	copy(pkt[6:12], op.mac[:])
	return w.send(now, s, out, nh, pkt)
}
