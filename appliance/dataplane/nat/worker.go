package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// Worker is one dataplane worker's view of the Router: its scratch and
// frame buffers, its ARP pending queue and outbox, its fragment table and
// counters. Its methods must be called from one goroutine (except Stats).
type Worker struct {
	_  [64]byte
	r  *Router
	rw *rules.Worker

	f        frame.Frame // Handle's parse
	in       frame.Inner
	key      rules.Key
	ipid     uint16
	sec      uint32 // now in seconds, per call
	fwdIn    Side   // side of the frame being processed
	fromHost bool   // it came from the box's own stack (Config.Host)
	// offerable says whether the last Process forwarded a packet of a
	// connection in a state the fast path takes (Offerable).
	offerable bool

	scratch []byte
	bufs    [][]byte
	freeBuf []int32
	pend    []pendFrame
	pendGen uint64 // neigh.resolved when the queue was last scanned
	out     []outFrame
	outHead int
	done    []int32 // buffers handed out by Output, freed on the next call

	frags  []fragEntry
	probes []uint64 // scratch for the probes the fast path asked for
	pf     prefetcher
	c      counters
	v6     *route6.Worker // nil without Config.IPv6
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
	w.offerable = false
	s := w.r.cfg.Load()
	if len(w.pend) != 0 && w.r.neigh.resolved.Load() != w.pendGen {
		w.flushPending(now, s)
	}
	res := w.process(now, s, inPort, pkt, f)
	w.c.count(&res, len(pkt))
	return res
}

// Offerable reports whether the frame of the last Process call was
// forwarded as a packet of a known connection in a state the fast path
// takes (TCP established and assured, UDP assured, ICMP echo replied,
// with a timeout of at least MinOffloadTimeout): only then is offering it
// to Offloadable worth its lock. A new connection's first packet never
// is, so a flood of new connections costs the fast path's manager
// nothing.
func (w *Worker) Offerable() bool { return w.offerable }

// Tick does the worker's housekeeping: frames whose next hop got resolved
// go to the outbox, ARP requests are retried, frames whose resolution
// failed are dropped, and a slice of the connection table is swept for
// expired entries. Call it after every batch and, while Waiting reports
// queued frames, at least every few milliseconds.
func (w *Worker) Tick(now int64) {
	w.begin(now)
	s := w.r.cfg.Load()
	w.flushPending(now, s)
	w.refreshProbes(now, s)
	w.r.ct.sweep(w.sec, s.sweep)
	if w.v6 != nil {
		w.v6.Tick(now)
	}
}

// refreshProbes sends the unicast ARP probes the fast path asked for
// (NeighbourFresh): a neighbour it sends to that was confirmed more than
// half its reachable time ago.
func (w *Worker) refreshProbes(now int64, s *snapshot) {
	w.probes = w.r.neigh.refresh.Take(w.probes[:0])
	for _, k := range w.probes {
		side, ip := Side(k>>32-1), uint32(k)
		if n, ok := w.r.neigh.get(side, ip); ok && n.resolved {
			w.probe(now, s, side, ip, &n, n.mac)
		}
	}
}

// sideOf is the side whose port id is inPort; ok is false for any other port.
func (s *snapshot) sideOf(inPort int) (side Side, ok bool) {
	switch inPort {
	case s.side[LAN].id, s.host:
		if inPort == 0 {
			break
		}
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
	w.fromHost = s.host != 0 && inPort == s.host
	if f.NTags != 0 {
		return drop(ReasonVLAN)
	}
	if f.EtherType == frame.EtherTypeIPv6 {
		return w.ipv6(now, inPort, pkt, f) // before the MAC check: the host port's frames carry LAN hosts' MACs
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
		return Result{Action: routing.ToHost, Port: inPort, Frame: pkt}
	}
	if !unicast(src) || src == lan.addr && !w.fromHost || src == wan.addr || src == p.bcast && p.addr != 0 ||
		side == LAN && !lan.onLink(src) || side == WAN && lan.onLink(src) {
		return drop(ReasonMartian)
	}
	if side == WAN && (p.addr == 0 || dst != p.addr) {
		if f.Proto == frame.ProtoUDP && f.L4Off != 0 && f.UDP.DstPort == 68 {
			return Result{Action: routing.ToHost, Port: inPort, Frame: pkt} // DHCP client hook
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
		case lan.onLink(dst) && s.boxAddr(dst):
			return w.toBox(now, s, side, inPort, pkt, f, dst)
		case lan.onLink(dst):
			return drop(ReasonNoRoute)
		}
		return w.fromLAN(now, s, inPort, pkt, f, false)
	}
	return w.fromWAN(now, s, inPort, pkt, f)
}

// toBox handles an IPv4 packet to one of the box's addresses (addr): it
// answers echo requests, delivers TCP and UDP (and fragments) for the LAN
// address to the box's own stack when there is one (Config.Host), and
// hands the rest to the host. The input chain decides first.
func (w *Worker) toBox(now int64, s *snapshot, side Side, inPort int, pkt []byte, f *frame.Frame, addr uint32) Result {
	echo := f.Proto == frame.ProtoICMP && f.L4Off != 0 && !f.Fragment && f.ICMP.Type == frame.ICMPEchoRequest
	deliver := s.host != 0 && side == LAN && !w.fromHost &&
		(addr == s.side[LAN].addr && (f.Proto == frame.ProtoTCP || f.Proto == frame.ProtoUDP || f.Fragment) || s.boxAddr(addr))
	if deliver {
		echo = false // the box's stack answers its own addresses
	}
	if !echo && !deliver {
		return Result{Action: routing.ToHost, Port: inPort, Frame: pkt}
	}
	if w.rw != nil {
		k := &w.key
		*k = rules.Key{
			Chain: rules.Input, CtState: rules.CtNew, InPort: uint16(inPort), EtherType: rules.EtherTypeIPv4,
			SrcMAC: f.Src, DstMAC: f.Dst, Proto: rules.Proto(f.Proto),
		}
		switch {
		case echo:
			k.ICMPType, k.ICMPCode = f.ICMP.Type, f.ICMP.Code
		case f.L4Off == 0:
		case f.Proto == frame.ProtoTCP:
			k.SrcPort, k.DstPort, k.TCPFlags = f.TCP.SrcPort, f.TCP.DstPort, rules.TCPFlagSet(f.TCP.Flags)
		case f.Proto == frame.ProtoUDP:
			k.SrcPort, k.DstPort = f.UDP.SrcPort, f.UDP.DstPort
		}
		if deliver {
			// The box's own connections are the kernel's: not tracked.
			k.CtState = rules.CtUntracked
		}
		copy(k.SrcIP[:4], f.IPv4.Src[:])
		a := put32(addr)
		copy(k.DstIP[:4], a[:])
		if w.rw.Lookup(k, len(pkt), now).Action != rules.Accept {
			return drop(ReasonRule)
		}
	}
	if deliver {
		return Result{Action: routing.Deliver, Port: s.host, Frame: pkt}
	}
	return w.echoReply(s, side, pkt, f, addr)
}
