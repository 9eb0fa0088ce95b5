package nat

import (
	"sync/atomic"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// The fast path (package fastpath, driven by the dataplane) forwards the
// packets of established connections in the kernel. These methods are
// its view of the table: which connection directions it may take over
// (Offloadable), and the packets it forwarded, so that counters,
// deadlines and TCP tracking stay what the router's own forwarding would
// have made them (Offloaded).

// MinOffloadTimeout is the shortest timeout (seconds) of a connection the
// fast path may take over: the dataplane reports its packets a few times
// a second, and a connection must not expire in between.
const MinOffloadTimeout = 10

// Tuple is a packet's connection key as it arrives on a side: what the
// router looks connections up by (ICMP echo: the identifier as SrcPort
// of a request, DstPort of a reply, 0 in the other).
type Tuple struct {
	Side             Side
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	Proto            uint8
}

func (t *Tuple) key() key {
	return mkKey(be32(t.Src), be32(t.Dst), t.SrcPort, t.DstPort, t.Proto, t.Side)
}

// Offload is what the fast path needs to forward one direction of an
// established connection as the router would: the translated header, the
// next hop and the router's ports.
type Offload struct {
	ID  ConnID
	Dir int // 0 the original direction, 1 the reply
	// Src, Dst, SrcPort and DstPort are the header the router writes
	// (ICMP echo: the new identifier in SrcPort for a request, DstPort
	// for a reply).
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	// Out is the side the packets leave on, OutPort its port id, OutMAC
	// the router's MAC there and OutMTU its MTU; InMAC is the router's
	// MAC on the side they arrive on.
	Out           Side
	OutPort       int
	OutMAC, InMAC [6]byte
	OutMTU        int
	// NextHop is where they go (the destination or the WAN gateway) and
	// NextHopMAC its resolved, fresh MAC.
	NextHop    [4]byte
	NextHopMAC [6]byte
	// Timeout is the connection's timeout in its state, in seconds.
	Timeout uint32
	// Reverse is the other direction's tuple as its packets arrive.
	Reverse Tuple
	// Ack is, for TCP, the highest acknowledgment the router has seen in
	// direction Dir (0: none yet), Win that direction's last window
	// (unscaled) and WinScale its scale shift: the fast path's tracking
	// goes on from them, by the router's own rule (AckAdvance).
	Ack      uint32
	Win      uint16
	WinScale uint8
}

// offloadable reports whether packets of direction dir can take a
// connection in state st no further: TCP established, UDP assured, ICMP
// echo replied; and a timeout the fast path's reports keep up with.
func (s *snapshot) offloadable(proto uint8, st uint32) bool {
	switch proto {
	case frame.ProtoTCP:
		if st&stateMask != stEstablished || st&flagAssured == 0 {
			return false
		}
	case frame.ProtoUDP:
		if st&flagAssured == 0 {
			return false
		}
	case frame.ProtoICMP:
		if st&flagReplied == 0 {
			return false
		}
	default:
		return false
	}
	return s.timeout(proto, st) >= MinOffloadTimeout
}

// Offloadable returns how to forward packets of tuple t (at now, Unix
// ns) in the fast path: false unless t is a live connection in a state
// its packets (other than TCP SYN, FIN and RST) do not change, whose next
// hop is resolved and was confirmed within NeighReachable.
func (r *Router) Offloadable(t Tuple, now int64) (Offload, bool) {
	s := r.cfg.Load()
	ct := r.ct
	sec := uint32(now / 1e9)
	st, idx, dir, ok := ct.lookup(t.key())
	if !ok {
		return Offload{}, false
	}
	e := &ct.entries[idx]
	state := e.state.Load()
	other := e.keys[1-dir]
	gen := ct.cold[idx].gen.Load()
	ack := e.ack[dir].Load()
	wins := e.wins.Load()
	st.mu.Unlock()
	if expired(e.deadline.Load(), sec) || !s.offloadable(t.Proto, state) {
		return Offload{}, false
	}
	o := Offload{ID: ConnID(uint64(idx)<<32 | uint64(gen)), Dir: dir, Out: other.side(),
		Src: put32(other.dst()), Dst: put32(other.src()), SrcPort: other.dport(), DstPort: other.sport(),
		Timeout: s.timeout(t.Proto, state),
		Reverse: Tuple{Side: other.side(), Src: put32(other.src()), Dst: put32(other.dst()), SrcPort: other.sport(),
			DstPort: other.dport(), Proto: t.Proto}}
	if t.Proto == frame.ProtoTCP {
		o.Ack, o.Win, o.WinScale = ack, uint16(wins>>(16*dir)), uint8(winScale(state, dir))
	}
	op := &s.side[o.Out]
	o.OutPort, o.OutMAC, o.OutMTU, o.InMAC = op.id, op.mac, op.mtu, s.side[t.Side].mac
	nh := other.src()
	if o.Out == WAN && !op.onLink(nh) {
		if nh = s.gateway; nh == 0 {
			return Offload{}, false
		}
	}
	o.NextHop = put32(nh)
	mac, fresh := r.neighFresh(s, o.Out, nh, now)
	if !fresh {
		return Offload{}, false
	}
	o.NextHopMAC = mac
	return o, true
}

// neighFresh returns the MAC of neighbour ip on side if it is resolved
// and was confirmed within the reachable time.
func (r *Router) neighFresh(s *snapshot, side Side, ip uint32, now int64) ([6]byte, bool) {
	if mac, ok := s.peer(side); ok {
		return mac, true
	}
	n, ok := r.neigh.get(side, ip)
	if !ok || !n.resolved || now-n.confirmed > s.reachable {
		return [6]byte{}, false
	}
	return n.mac, true
}

// NeighbourFresh reports whether neighbour ip on side is resolved to mac
// and confirmed within the reachable time (at now, Unix ns); used marks
// it as in use, as the router's own forwarding to it does.
func (r *Router) NeighbourFresh(side Side, ip [4]byte, mac [6]byte, now int64, used bool) bool {
	s := r.cfg.Load()
	if peer, ok := s.peer(side); ok {
		return mac == peer
	}
	n, ok := r.neigh.get(side, be32(ip))
	if !ok || !n.resolved || n.mac != mac || now-n.confirmed > s.reachable {
		return false
	}
	if used {
		markUsed(&n, now)
		// The slow path, which no longer sees this traffic, would probe
		// a stale neighbour it sends to: probe it before it goes stale,
		// so that its answer keeps it fresh and its flows in the kernel.
		if now-n.confirmed > s.reachable/2 && now-n.probed >= 1e9 && n.probes < s.probes {
			r.neigh.refresh.Want(neighKey(side, be32(ip)))
		}
	}
	return true
}

// OffloadUse is what the fast path forwarded of one connection direction
// since its last report.
type OffloadUse struct {
	Packets, Bytes uint64 // IP bytes
	Last           int64  // Unix ns of the last packet, 0 for none
	// TCP tracking: the highest acknowledgment and the last window it
	// forwarded, when TCP.
	TCP      bool
	Ack, Win uint32
}

// PrefetchOffloaded asks for the cache lines Offloaded reads of
// connection id first (its entry and the cold part with its incarnation
// and stripes) without waiting for them. The fast path's harvest calls
// it a few connections ahead of their Offloaded calls, so that their
// cache misses overlap: they were most of the harvest's time
// (docs/dataplane.md, Measured).
func (r *Router) PrefetchOffloaded(id ConnID) {
	ct := r.ct
	if idx := uint32(id >> 32); int(idx) < len(ct.entries) {
		prefetchConn(&ct.entries[idx], &ct.cold[idx])
	}
}

// Offloaded adds what the fast path forwarded of direction dir of
// connection id to it: the counters, the deadline (last packet plus the
// timeout, as the router's forwarding sets it) and the TCP tracking RSTs
// are judged by. It reports whether the direction is still one the fast
// path may forward (false: the connection is gone or changed state, e.g.
// after a FIN the router saw).
func (r *Router) Offloaded(id ConnID, dir int, u OffloadUse) bool {
	ct := r.ct
	idx, gen := uint32(id>>32), uint32(id)
	if int(idx) >= len(ct.entries) || dir&^1 != 0 {
		return false
	}
	e, c := &ct.entries[idx], &ct.cold[idx]
	sw := c.stripes.Load()
	if c.gen.Load() != gen || gen&1 == 0 {
		return false
	}
	si := sw >> 16
	if dir == 1 {
		si = sw & 0xffff
	}
	st := &ct.stripes[si]
	st.mu.Lock()
	defer st.mu.Unlock()
	if c.gen.Load() != gen || c.stripes.Load() != sw {
		return false
	}
	s := r.cfg.Load()
	state := e.state.Load()
	proto := e.keys[0].proto()
	if u.Packets > 0 {
		e.countN(c, dir, u.Packets, u.Bytes)
		if dl := uint32(u.Last/1e9) + s.timeout(proto, state); int32(dl-e.deadline.Load()) > 0 {
			e.deadline.Store(dl)
		}
	}
	if u.TCP {
		// The fast path tracked on from the router's acknowledgment by
		// the same rule, so its own is the later one, however far it
		// went (gigabytes past the router's, after a long transfer) —
		// unless frames the fast path left to the router (exceptions)
		// took the router's a little further meanwhile.
		if a := e.ack[dir].Load(); a != u.Ack && (a == 0 || !ackAhead(a, u.Ack, e.window(state, dir))) {
			e.ack[dir].Store(u.Ack)
		}
		shift := 16 * uint32(dir)
		for {
			old := e.wins.Load()
			next := old&^(0xffff<<shift) | (u.Win&0xffff)<<shift
			if old == next || e.wins.CompareAndSwap(old, next) {
				break
			}
		}
	}
	return s.offloadable(proto, state)
}

// countN adds n packets of bytes IP bytes in all to direction d (the
// caller holds d's stripe lock).
func (e *entry) countN(cold *entryCold, d int, n, bytes uint64) {
	p := e.packets(cold)[d] + n
	b := e.byteCounts(cold)[d] + bytes
	e.pkts[d], cold.pktsHi[d] = uint16(p), uint32(p>>16)
	e.bytes[d], cold.bytesHi[d] = uint32(b), uint32(b>>32)
}

// fastCounters count the frames the fast path forwarded, as a worker
// counts its own (Stats includes them).
type fastCounters struct {
	forwarded, bytes atomic.Uint64
}

// CountOffloaded adds frames (and their bytes, Ethernet frames) the fast
// path forwarded to the router's Forward counts.
func (r *Router) CountOffloaded(frames, bytes uint64) {
	r.fast.forwarded.Add(frames)
	r.fast.bytes.Add(bytes)
}

func (f *fastCounters) addTo(s *Stats) {
	s.Actions[routing.Forward] += f.forwarded.Load()
	s.ForwardedBytes += f.bytes.Load()
}
