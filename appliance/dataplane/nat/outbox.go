package nat

import "e1kbox/appliance/dataplane/routing"

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

// Waiting reports whether frames wait for ARP resolution.
func (w *Worker) Waiting() bool { return len(w.pend) != 0 || w.v6 != nil && w.v6.Waiting() }

// Output returns the next frame the worker wants transmitted besides the
// Results: ARP requests, frames released from the ARP queue. The frame
// stays valid until the worker's next Process, Handle or Tick call.
func (w *Worker) Output() (port int, frame []byte, ok bool) {
	if w.outHead == len(w.out) {
		if w.v6 != nil {
			return w.v6.Output()
		}
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

// send transmits the frame pkt (Ethernet source already set) to next hop
// nh on side out: Forward when its MAC is known, else queued.
func (w *Worker) send(now int64, s *snapshot, out Side, nh uint32, pkt []byte) Result {
	port := s.side[out].id
	if out == LAN && nh == s.side[LAN].addr {
		// For the box's own stack: its MAC is the LAN MAC.
		if s.host == 0 {
			return drop(ReasonNoRoute)
		}
		copy(pkt[0:6], s.side[LAN].mac[:])
		return w.transmit(s.host, s.side[LAN].mtu, pkt)
	}
	if mac, ok := s.peer(out); ok { // point-to-point: no neighbours
		copy(pkt[0:6], mac[:])
		return w.transmit(port, s.side[out].mtu, pkt)
	}
	n, ok := w.r.neigh.get(out, nh)
	if ok && n.resolved {
		if now-n.confirmed > s.reachable {
			// Stale: keep using it, probe it by unicast, and give it up
			// when the probes go unanswered.
			if n.probes >= s.probes && now-n.probed >= 1e9 {
				w.r.neigh.forget(n.slot, out, nh)
				return w.enqueue(now, s, out, nh, pkt)
			}
			w.probe(now, s, out, nh, &n, n.mac)
		}
		markUsed(&n, now)
		copy(pkt[0:6], n.mac[:])
		return w.transmit(port, s.side[out].mtu, pkt)
	}
	return w.enqueue(now, s, out, nh, pkt)
}

// transmit forwards the addressed frame pkt on port, fragmenting a packet
// larger than mtu (the fragments after the first go to the outbox).
func (w *Worker) transmit(port, mtu int, pkt []byte) Result {
	if needsFragments(pkt, mtu) {
		first, why := w.fragment(port, pkt, mtu, 0)
		if why != ReasonNone {
			return drop(why)
		}
		pkt = first
	}
	return Result{Action: routing.Forward, Port: port, Frame: pkt}
}

// enqueue copies pkt into the pending queue until nh is resolved, making
// an incomplete entry for it (refused: neigh_limit).
func (w *Worker) enqueue(now int64, s *snapshot, out Side, nh uint32, pkt []byte) Result {
	if len(w.pend) == cap(w.pend) || len(pkt) > w.r.maxFrame || len(w.freeBuf) == 0 {
		return drop(ReasonQueueFull)
	}
	n, ok := w.r.neigh.get(out, nh)
	if !ok || !n.resolved && w.r.neigh.unknown.Expired(uint32(n.confirmed/1e9), uint32(now/1e9)) {
		// None, or one whose resolution is over: a new one (under the
		// table's lock, which a lookup that finds one does not take).
		if !w.r.neigh.incomplete(out, nh, now, s.neighPin()) {
			return drop(ReasonNeighLimit)
		}
		n, ok = w.r.neigh.get(out, nh)
	}
	b, _ := w.allocBuf()
	copy(w.bufs[b], pkt)
	w.pend = append(w.pend, pendFrame{buf: b, n: int32(len(pkt)), side: out, nh: nh, deadline: now + int64(s.probes)*1e9})
	if ok && !n.resolved {
		w.probe(now, s, out, nh, &n, broadcastMAC)
	}
	return Result{Action: routing.Queued}
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
			b := w.bufs[p.buf][:p.n]
			copy(b[0:6], n.mac[:])
			if mtu := s.side[p.side].mtu; needsFragments(b, mtu) {
				first, why := w.fragment(s.side[p.side].id, b, mtu, 1)
				if why != ReasonNone {
					w.freeBuf = append(w.freeBuf, p.buf)
					w.c.drops[why].Add(1)
					continue
				}
				p.n = int32(len(first))
			}
			if w.push(s.side[p.side].id, p.buf, int(p.n)) {
				w.c.actions[routing.Forward].Add(1)
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
			if !w.r.neigh.incomplete(p.side, p.nh, now, s.neighPin()) {
				w.freeBuf = append(w.freeBuf, p.buf)
				w.c.drops[ReasonNeighLimit].Add(1)
				continue
			}
			n, ok = w.r.neigh.get(p.side, p.nh)
		}
		if ok && n.probes < s.probes {
			w.probe(now, s, p.side, p.nh, &n, broadcastMAC)
		}
		kept = append(kept, p)
	}
	w.pend = kept
}
