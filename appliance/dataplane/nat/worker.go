package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/rules"
)

// Worker is one dataplane worker's view of the Router: its scratch and
// frame buffers, its ARP pending queue and outbox, its fragment table and
// counters. Its methods must be called from one goroutine (except Stats).
type Worker struct {
	_  [64]byte
	r  *Router
	rw *rules.Worker

	f     frame.Frame // Handle's parse
	in    frame.Inner
	key   rules.Key
	ipid  uint16
	sec   uint32 // now in seconds, per call
	fwdIn Side   // side of the frame being processed

	scratch []byte
	bufs    [][]byte
	freeBuf []int32
	pend    []pendFrame
	pendGen uint64 // neigh.resolved when the queue was last scanned
	out     []outFrame
	outHead int
	done    []int32 // buffers handed out by Output, freed on the next call

	frags []fragEntry
	pf    prefetcher
	c     counters
}

type pendFrame struct {
	buf      int32
	n        int32
	side     Side
	nh       uint32
	deadline int64
}

type outFrame struct {
	buf  int32
	n    int32
	port int
}

// xlate is what a forwarded packet becomes.
type xlate struct {
	src, dst     uint32
	sport, dport uint16
}

func be32(a [4]byte) uint32 { return binary.BigEndian.Uint32(a[:]) }

func put32(v uint32) (a [4]byte) {
	binary.BigEndian.PutUint32(a[:], v)
	return a
}

// begin frees the buffers the engine has sent since the last call.
func (w *Worker) begin(now int64) {
	w.sec = uint32(now / 1e9)
	w.freeBuf = append(w.freeBuf, w.done...)
	w.done = w.done[:0]
	if w.outHead == len(w.out) {
		w.out = w.out[:0]
		w.outHead = 0
	}
}

// Handle parses pkt (received at time now, Unix nanoseconds, on port
// inPort) and processes it; frames that do not parse are counted and
// dropped.
func (w *Worker) Handle(now int64, inPort int, pkt []byte) Result {
	if err := frame.Parse(pkt, &w.f); err != nil {
		w.begin(now)
		w.c.malformed[frame.ReasonOf(err)].Add(1)
		res := drop(ReasonMalformed)
		w.c.count(&res, len(pkt))
		return res
	}
	return w.Process(now, inPort, pkt, &w.f)
}

// Process handles one received frame: pkt is the frame (rewritten in
// place when forwarded), f its parse by frame.Parse, which must have
// succeeded (use Handle otherwise). See the package documentation for
// what the engine does with the Result and with Output.
func (w *Worker) Process(now int64, inPort int, pkt []byte, f *frame.Frame) Result {
	w.begin(now)
	s := w.r.cfg.Load()
	if len(w.pend) != 0 && w.r.neigh.resolved.Load() != w.pendGen {
		w.flushPending(now, s)
	}
	res := w.process(now, s, inPort, pkt, f)
	w.c.count(&res, len(pkt))
	return res
}

// Tick does the worker's housekeeping: frames whose next hop got resolved
// go to the outbox, ARP requests are retried, frames whose resolution
// failed are dropped, and a slice of the connection table is swept for
// expired entries. Call it after every batch and, while Waiting reports
// queued frames, at least every few milliseconds.
func (w *Worker) Tick(now int64) {
	w.begin(now)
	s := w.r.cfg.Load()
	w.flushPending(now, s)
	w.r.ct.sweep(w.sec, s.sweep)
}

// Waiting reports whether frames wait for ARP resolution.
func (w *Worker) Waiting() bool { return len(w.pend) != 0 }

// Output returns the next frame the worker wants transmitted besides the
// Results: ARP requests, frames released from the ARP queue. The frame
// stays valid until the worker's next Process, Handle or Tick call.
func (w *Worker) Output() (port int, frame []byte, ok bool) {
	if w.outHead == len(w.out) {
		return 0, nil, false
	}
	o := w.out[w.outHead]
	w.outHead++
	w.done = append(w.done, o.buf)
	return o.port, w.bufs[o.buf][:o.n], true
}

func (w *Worker) allocBuf() (int32, bool) {
	n := len(w.freeBuf)
	if n == 0 {
		return 0, false
	}
	b := w.freeBuf[n-1]
	w.freeBuf = w.freeBuf[:n-1]
	return b, true
}

// push queues buffer b (n bytes) for Output on port.
func (w *Worker) push(port int, b int32, n int) bool {
	if len(w.out) == cap(w.out) {
		w.freeBuf = append(w.freeBuf, b)
		w.c.drops[ReasonQueueFull].Add(1)
		return false
	}
	w.out = append(w.out, outFrame{buf: b, n: int32(n), port: port})
	return true
}

// sideOf is the side whose port id is inPort; ok is false for any other port.
func (s *snapshot) sideOf(inPort int) (side Side, ok bool) {
	switch inPort {
	case s.side[LAN].id:
		return LAN, true
	case s.side[WAN].id:
		return WAN, true
	}
	return 0, false
}

func (w *Worker) process(now int64, s *snapshot, inPort int, pkt []byte, f *frame.Frame) Result {
	side, ok := s.sideOf(inPort)
	if !ok {
		return drop(ReasonUnknownPort)
	}
	w.fwdIn = side
	if f.NTags != 0 {
		return drop(ReasonVLAN)
	}
	p := &s.side[side]
	group := f.Dst[0]&1 != 0
	if !group && f.Dst != p.mac {
		return drop(ReasonNotForUs)
	}
	if f.L3End > len(pkt) || f.L3Off >= f.L3End && f.EtherType != frame.EtherTypeARP {
		return drop(ReasonMalformed)
	}
	switch f.EtherType {
	case frame.EtherTypeARP:
		return w.arp(now, s, side, pkt, f)
	case frame.EtherTypeIPv4:
		return w.ipv4(now, s, side, inPort, pkt, f, group)
	case frame.EtherTypeIPv6:
		return drop(ReasonIPv6)
	}
	return drop(ReasonEtherType)
}

func (w *Worker) ipv4(now int64, s *snapshot, side Side, inPort int, pkt []byte, f *frame.Frame, group bool) Result {
	ip := &f.IPv4
	hlen := int(ip.IHL) * 4
	if f.L3Off+hlen > f.L3End {
		return drop(ReasonMalformed)
	}
	if !frame.VerifyIPv4Header(pkt[f.L3Off : f.L3Off+hlen]) {
		return drop(ReasonBadChecksum)
	}
	src, dst := be32(ip.Src), be32(ip.Dst)
	p, lan, wan := &s.side[side], &s.side[LAN], &s.side[WAN]
	if group || !unicast(dst) || p.addr != 0 && dst == p.bcast {
		// Broadcasts and multicasts (DHCP from 0.0.0.0 included) are the
		// host's business.
		if src == lan.addr || wan.addr != 0 && src == wan.addr {
			return drop(ReasonMartian)
		}
		return Result{Action: ToHost, Port: inPort, Frame: pkt}
	}
	if !unicast(src) || src == lan.addr || src == wan.addr || src == p.bcast && p.addr != 0 ||
		side == LAN && !lan.onLink(src) || side == WAN && lan.onLink(src) {
		return drop(ReasonMartian)
	}
	if side == WAN && (p.addr == 0 || dst != p.addr) {
		if f.Proto == frame.ProtoUDP && f.L4Off != 0 && f.UDP.DstPort == 68 {
			return Result{Action: ToHost, Port: inPort, Frame: pkt} // DHCP client hook
		}
		return drop(ReasonNotForUs)
	}
	if f.LaterFragment {
		return w.laterFragment(now, s, side, inPort, pkt, f, dst)
	}
	if f.Fragment && w.fragFind(now, f, side) != nil {
		return drop(ReasonFragment) // a second first fragment overlaps the first
	}
	if side == LAN {
		switch {
		case dst == lan.addr:
			return w.toBox(now, s, side, inPort, pkt, f, dst)
		case wan.addr != 0 && dst == wan.addr:
			return w.fromLAN(now, s, inPort, pkt, f, true)
		case lan.onLink(dst):
			return drop(ReasonNoRoute)
		}
		return w.fromLAN(now, s, inPort, pkt, f, false)
	}
	return w.fromWAN(now, s, inPort, pkt, f)
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
			return Result{Action: ToHost, Port: inPort, Frame: pkt}
		}
		return drop(ReasonInvalid)
	case 2:
		if hairpin {
			return Result{Action: ToHost, Port: inPort, Frame: pkt}
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
			to, toPort, fw = s.forward(f.Proto, k.dport())
		}
		if !fw {
			return w.toBox(now, s, LAN, inPort, pkt, f, wanAddr)
		}
		if !newAllowed(f) {
			return drop(ReasonInvalid)
		}
		if r, stop := w.newChecks(now, s, LAN, LAN, pkt, f); stop {
			return r
		}
		if r, stop := w.filter(now, s, inPort, LAN, pkt, f, to, toPort); stop {
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
	if !newAllowed(f) {
		return drop(ReasonInvalid)
	}
	if r, stop := w.newChecks(now, s, LAN, WAN, pkt, f); stop {
		return r
	}
	if r, stop := w.filter(now, s, inPort, WAN, pkt, f, k.dst(), k.dport()); stop {
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
		return Result{Action: ToHost, Port: inPort, Frame: pkt}
	case 2:
		return w.toBox(now, s, WAN, inPort, pkt, f, k.dst())
	}
	if res, ok := w.established(now, s, k, pkt, f); ok {
		return res
	}
	if f.Proto == frame.ProtoTCP || f.Proto == frame.ProtoUDP {
		if to, toPort, fw := s.forward(f.Proto, k.dport()); fw {
			if !newAllowed(f) {
				return drop(ReasonInvalid)
			}
			if r, stop := w.newChecks(now, s, WAN, LAN, pkt, f); stop {
				return r
			}
			if r, stop := w.filter(now, s, inPort, LAN, pkt, f, to, toPort); stop {
				return r
			}
			reply := mkKey(to, k.src(), toPort, k.sport(), f.Proto, LAN)
			return w.create(now, s, [2]key{k, reply}, kindDNAT, pkt, f, false)
		}
	}
	return w.toBox(now, s, WAN, inPort, pkt, f, s.side[WAN].addr)
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
// changes: TTL and egress MTU. stop reports that r is the answer.
func (w *Worker) newChecks(now int64, s *snapshot, in, out Side, pkt []byte, f *frame.Frame) (r Result, stop bool) {
	if f.IPv4.TTL <= 1 {
		return w.icmpError(now, s, in, pkt, f, frame.ICMPTimeExceeded, 0, 0, ReasonTTL), true
	}
	if mtu := s.side[out].mtu; f.L3End-f.L3Off > mtu {
		if f.IPv4.DF {
			return w.icmpError(now, s, in, pkt, f, frame.ICMPDestUnreach, 4, uint32(mtu), ReasonTooBig), true
		}
		return drop(ReasonTooBig), true
	}
	return Result{}, false
}

// filter asks the forward chain about a new connection (addresses after
// DNAT, before SNAT). stop reports that r is the answer.
func (w *Worker) filter(now int64, s *snapshot, inPort int, out Side, pkt []byte, f *frame.Frame, dst uint32, dport uint16) (r Result, stop bool) {
	if w.rw == nil {
		return Result{}, false
	}
	k := &w.key
	*k = rules.Key{
		Chain:     rules.Forward,
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
	if f.Proto == frame.ProtoTCP {
		state = stSynSent
	}
	_, err := w.r.ct.insert(keys, kind, state, w.sec, w.sec+s.timeout(f.Proto, state), uint64(f.L3End-f.L3Off))
	if err != insOK {
		if mapped {
			w.r.maps.release(keys[1].proto(), keys[1].dport())
		}
		if err == insClash {
			return drop(ReasonInvalid)
		}
		return drop(ReasonTableFull)
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
	var next uint32
	for {
		old := e.state.Load()
		var valid, reopen bool
		next, valid, reopen = nextState(old, dir, f)
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
			break
		}
	}
	if dl := w.sec + s.timeout(f.Proto, next); e.deadline.Load() != dl {
		e.deadline.Store(dl)
	}
	e.count(&t.cold[idx], dir, uint64(f.L3End-f.L3Off))
	st.mu.Unlock()
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

// send transmits the frame pkt (Ethernet source already set) to next hop
// nh on side out: Forward when its MAC is known, else queued.
func (w *Worker) send(now int64, s *snapshot, out Side, nh uint32, pkt []byte) Result {
	port := s.side[out].id
	n, ok := w.r.neigh.get(out, nh)
	if ok && n.resolved {
		if now-n.confirmed > s.reachable {
			// Stale: keep using it, probe it by unicast, and give it up
			// when the probes go unanswered.
			if n.probes >= s.probes && now-n.probed >= 1e9 {
				w.r.neigh.forget(n.slot, out, nh)
				return w.enqueue(now, s, out, nh, pkt)
			}
			if claimProbe(&n, now) {
				w.arpRequest(now, s, out, nh, n.mac)
			}
		}
		copy(pkt[0:6], n.mac[:])
		return Result{Action: Forward, Port: port, Frame: pkt}
	}
	return w.enqueue(now, s, out, nh, pkt)
}

// enqueue copies pkt into the pending queue until nh is resolved.
func (w *Worker) enqueue(now int64, s *snapshot, out Side, nh uint32, pkt []byte) Result {
	if len(w.pend) == cap(w.pend) || len(pkt) > w.r.maxFrame {
		return drop(ReasonQueueFull)
	}
	b, ok := w.allocBuf()
	if !ok {
		return drop(ReasonQueueFull)
	}
	copy(w.bufs[b], pkt)
	w.pend = append(w.pend, pendFrame{buf: b, n: int32(len(pkt)), side: out, nh: nh, deadline: now + int64(s.probes)*1e9})
	n, ok := w.r.neigh.get(out, nh)
	if !ok {
		w.r.neigh.incomplete(out, nh, now)
		n, ok = w.r.neigh.get(out, nh)
	}
	if ok && claimProbe(&n, now) {
		w.arpRequest(now, s, out, nh, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	}
	return Result{Action: Queued}
}

// flushPending sends queued frames whose next hop is resolved, drops those
// whose resolution failed and retries ARP requests.
func (w *Worker) flushPending(now int64, s *snapshot) {
	w.pendGen = w.r.neigh.resolved.Load()
	kept := w.pend[:0]
	for _, p := range w.pend {
		n, ok := w.r.neigh.get(p.side, p.nh)
		switch {
		case ok && n.resolved:
			b := w.bufs[p.buf]
			copy(b[0:6], n.mac[:])
			if w.push(s.side[p.side].id, p.buf, int(p.n)) {
				w.c.actions[Forward].Add(1)
				w.c.flushed.Add(1)
			}
			continue
		case now >= p.deadline:
			w.freeBuf = append(w.freeBuf, p.buf)
			w.c.drops[ReasonNeighFailed].Add(1)
			if ok && n.probes >= s.probes && now-n.probed >= 1e9 {
				w.r.neigh.forget(n.slot, p.side, p.nh)
			}
			continue
		case !ok:
			w.r.neigh.incomplete(p.side, p.nh, now)
			n, ok = w.r.neigh.get(p.side, p.nh)
		}
		if ok && n.probes < s.probes && claimProbe(&n, now) {
			w.arpRequest(now, s, p.side, p.nh, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		}
		kept = append(kept, p)
	}
	w.pend = kept
}

// toBox handles an IPv4 packet to one of the box's addresses (addr): it
// answers echo requests and hands the rest to the host.
func (w *Worker) toBox(now int64, s *snapshot, side Side, inPort int, pkt []byte, f *frame.Frame, addr uint32) Result {
	if f.Proto != frame.ProtoICMP || f.L4Off == 0 || f.Fragment || f.ICMP.Type != frame.ICMPEchoRequest {
		return Result{Action: ToHost, Port: inPort, Frame: pkt}
	}
	if w.rw != nil {
		k := &w.key
		*k = rules.Key{
			Chain: rules.Input, CtState: rules.CtNew, InPort: uint16(inPort), EtherType: rules.EtherTypeIPv4,
			SrcMAC: f.Src, DstMAC: f.Dst, Proto: rules.ProtoICMP, ICMPType: f.ICMP.Type, ICMPCode: f.ICMP.Code,
		}
		copy(k.SrcIP[:4], f.IPv4.Src[:])
		a := put32(addr)
		copy(k.DstIP[:4], a[:])
		if w.rw.Lookup(k, len(pkt), now).Action != rules.Accept {
			return drop(ReasonRule)
		}
	}
	return w.echoReply(s, side, pkt, f, addr)
}
