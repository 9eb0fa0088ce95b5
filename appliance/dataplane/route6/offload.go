package route6

import (
	"sync/atomic"

	"e1kbox/appliance/dataplane/frame"
)

// The fast path (package fastpath, driven by the dataplane) forwards the
// packets of established connections in the kernel. These methods are
// its view of the router: which connection directions it may take over
// (Offloadable), the packets it forwarded, so that counters and
// deadlines stay what the router's own forwarding would have made them
// (Offloaded, CountOffloaded), whether a next hop is still fresh
// (NeighbourFresh), and a hook for configuration changes (OnChange).

// MinOffloadTimeout is the shortest timeout (seconds) of a connection the
// fast path may take over: the dataplane reports its packets a few times
// a second, and a connection must not expire in between.
const MinOffloadTimeout = 10

// Flow is one direction of a connection as its packets arrive on Side.
// ICMPv6 echo carries the identifier in SrcPort for requests and in
// DstPort for replies (0 in the other).
type Flow struct {
	Side             Side
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Proto            uint8
}

// Reverse is the other direction of f's connection as its packets arrive.
func (f Flow) Reverse() Flow {
	return Flow{Side: 1 - f.Side&1, Src: f.Dst, Dst: f.Src, SrcPort: f.DstPort, DstPort: f.SrcPort, Proto: f.Proto}
}

// key is f's connection key (connKeyOf for a packet of f).
func (f *Flow) key() connKey {
	sp, dp := f.SrcPort, f.DstPort
	if f.Proto == frame.ProtoICMPv6 {
		sp, dp = f.SrcPort|f.DstPort, 0 // the identifier, whichever way
	}
	if f.Side == LAN {
		return connKey{lan: f.Src, wan: f.Dst, lanPort: sp, wanPort: dp, proto: f.Proto}
	}
	if f.Proto == frame.ProtoICMPv6 {
		return connKey{lan: f.Dst, wan: f.Src, lanPort: sp, proto: f.Proto}
	}
	return connKey{lan: f.Dst, wan: f.Src, lanPort: dp, wanPort: sp, proto: f.Proto}
}

// Offload is what the fast path needs to forward one direction of an
// established connection as the router would.
type Offload struct {
	// Out is the side the packets leave on, OutPort its port id, OutMAC
	// the router's MAC there and OutMTU its MTU; InMAC is the router's
	// MAC on the side they arrive on.
	Out           Side
	OutPort       int
	OutMAC, InMAC [6]byte
	OutMTU        int
	// NextHop is where they go (the destination on the LAN, the gateway
	// on the WAN) and NextHopMAC its resolved, confirmed MAC.
	NextHop    [16]byte
	NextHopMAC [6]byte
	// Timeout is the connection's timeout in its state, in seconds.
	Timeout uint32
}

// unicastGlobal: not multicast, unspecified, loopback or link-local.
func unicastGlobal(a *[16]byte) bool {
	return a[0] != 0xff && *a != [16]byte{} && *a != loopback && !isLinkLocal(a)
}

// route is forward's routing decision for a packet from side with these
// addresses: the side it leaves on, false for anything forward does not
// forward (to the box, martian, no route).
func (s *snapshot) route(side Side, src, dst *[16]byte) (Side, bool) {
	if !unicastGlobal(src) || !unicastGlobal(dst) || s.boxAddr(side, dst) || side == LAN && s.boxAddr(WAN, dst) {
		return 0, false
	}
	if side == LAN {
		if !inAny(s.lanNets, src) || inAny(s.lanNets, dst) || inAny(s.deleg, dst) {
			return 0, false
		}
		return WAN, true
	}
	if inAny(s.lanNets, src) || inAny(s.deleg, src) || !inAny(s.lanNets, dst) {
		return 0, false
	}
	return LAN, true
}

// offloadable reports whether packets of an established connection in
// e's state leave it as it is (other than TCP SYN, FIN and RST): TCP
// established, UDP and echo replied; with a timeout the fast path's
// reports keep up with.
func (e *conn) offloadable() bool {
	switch e.state {
	case stTCPEstablished:
	case stUDP, stICMP:
		if !e.replied {
			return false
		}
	default:
		return false
	}
	return e.timeout() >= MinOffloadTimeout
}

// timeout is the deadline a packet sets, from its time (advance's).
func (e *conn) timeout() uint32 {
	switch {
	case e.state == stUDP && e.replied:
		return udpReplied
	case e.state == stOther && e.replied:
		return otherReplied
	}
	return timeouts[e.state]
}

// Offloadable returns how to forward packets of flow f (at now, Unix ns)
// in the fast path: false unless forward would route them (addresses,
// prefixes, a gateway), they belong to a live connection in a state its
// packets (other than TCP SYN, FIN and RST) do not change, and their next
// hop is resolved and was confirmed within the reachable time (30 s).
func (r *Router) Offloadable(f Flow, now int64) (Offload, bool) {
	s := r.cfg.Load()
	sec := uint32(now / 1e9)
	if s == nil || f.Side > WAN || f.Proto != frame.ProtoTCP && f.Proto != frame.ProtoUDP && f.Proto != frame.ProtoICMPv6 {
		return Offload{}, false
	}
	out, ok := s.route(f.Side, &f.Src, &f.Dst)
	if !ok {
		return Offload{}, false
	}
	k := f.key()
	b := &r.ct.b[k.hash()&r.ct.mask]
	b.mu.Lock()
	var timeout uint32
	found := false
	for i := range b.e {
		e := &b.e[i]
		if e.state != stFree && e.key == k && sec < e.deadline && e.offloadable() {
			timeout, found = e.timeout(), true
			break
		}
	}
	b.mu.Unlock()
	if !found {
		return Offload{}, false
	}
	o := Offload{Out: out, OutPort: s.side[out].ID, OutMAC: s.side[out].MAC, InMAC: s.side[f.Side].MAC, OutMTU: s.side[out].MTU,
		NextHop: f.Dst, Timeout: timeout}
	if out == WAN {
		if o.NextHop, ok = r.gateway(s, sec); !ok {
			return Offload{}, false
		}
	}
	if out == WAN && s.ptp {
		o.NextHopMAC = s.peerMAC
		return o, s.peerMAC != ([6]byte{})
	}
	if o.NextHopMAC, ok = r.neigh.fresh(out, &o.NextHop, sec); !ok {
		return Offload{}, false
	}
	return o, true
}

// fresh returns the MAC of neighbour a on side if it is reachable and was
// confirmed within reachableTime, changing nothing.
func (n *neighbours) fresh(side Side, a *[16]byte, now uint32) ([6]byte, bool) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.reachable(side, a); e != nil {
		return e.mac, now-e.confirmed < reachableTime
	}
	return [6]byte{}, false
}

// NeighbourFresh reports whether neighbour addr on side is reachable at
// mac and was confirmed within the reachable time (at now, Unix ns): the
// router forwards to it without soliciting it. The fast path asks it of
// the next hops it sends to: one confirmed more than half the reachable
// time ago is probed (a unicast NS from a worker's Tick, one a second,
// up to neighProbes), as the router would probe it before forwarding to
// it once stale, so that its answer keeps it fresh and its flows in the
// kernel.
func (r *Router) NeighbourFresh(side Side, addr [16]byte, mac [6]byte, now int64) bool {
	if s := r.cfg.Load(); side == WAN && s != nil && s.ptp { // no neighbours: the link's peer
		return s.peerMAC != ([6]byte{}) && mac == s.peerMAC
	}
	m, ok, probe := r.neigh.freshProbe(side, &addr, uint32(now/1e9))
	if !ok || m != mac {
		return false
	}
	if probe {
		r.neigh.refresh.Want(probeReq{side: side, addr: addr, mac: mac})
	}
	return true
}

// freshProbe is fresh that also claims a probe of the neighbour (probe)
// when it was confirmed more than half the reachable time ago, its last
// NS went out a second ago or more and fewer than neighProbes went
// unanswered.
func (n *neighbours) freshProbe(side Side, a *[16]byte, now uint32) (mac [6]byte, ok, probe bool) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.reachable(side, a)
	switch {
	case e == nil:
		return mac, false, false
	case now-e.confirmed >= reachableTime:
		return e.mac, false, false
	}
	if now-e.confirmed > reachableTime/2 && now-e.lastNS >= 1 && e.probes < neighProbes {
		e.lastNS, probe = now, true
		e.probes++
	}
	return e.mac, true, probe
}

// probeReq is a neighbour the fast path wants probed.
type probeReq struct {
	side Side
	addr [16]byte
	mac  [6]byte
}

// OffloadUse is what the fast path forwarded of one connection direction
// since its last report.
type OffloadUse struct {
	Packets uint64
	Last    int64 // Unix ns of the last packet
}

// Offloaded adds what the fast path forwarded of flow f to its
// connection: the packet count of f's side and the deadline (the last
// packet's time plus the timeout, as the router's forwarding sets it). It
// reports whether f is still one the fast path may forward (false: the
// connection is gone, expired or changed state, e.g. after a FIN the
// router saw).
func (r *Router) Offloaded(f Flow, u OffloadUse) bool {
	if f.Side > WAN {
		return false
	}
	k := f.key()
	b := &r.ct.b[k.hash()&r.ct.mask]
	b.mu.Lock()
	defer b.mu.Unlock()
	last := uint32(u.Last / 1e9)
	for i := range b.e {
		e := &b.e[i]
		if e.state == stFree || e.key != k {
			continue
		}
		if u.Packets > 0 && last < e.deadline { // later, the router would have found it expired
			e.packets[f.Side] += u.Packets
			opener := f.Side == LAN
			if e.inbound {
				opener = f.Side == WAN
			}
			if !opener {
				e.replied = true
			}
			if dl := last + e.timeout(); int32(dl-e.deadline) > 0 {
				e.deadline = dl
			}
		}
		return last < e.deadline && e.offloadable()
	}
	return false
}

// offloadState is the Router's part for the fast path.
type offloadState struct {
	forwarded atomic.Uint64
	gen       atomic.Uint64
	onChange  atomic.Pointer[func()]
}

// CountOffloaded adds frames the fast path forwarded to the router's
// Forward count (Stats).
func (r *Router) CountOffloaded(frames uint64) { r.off.forwarded.Add(frames) }

// Generation counts the configuration changes (SetConfig, SetPrefixes).
func (r *Router) Generation() uint64 { return r.off.gen.Load() }

// OnChange sets fn (nil for none) to be called after every configuration
// change, on the changing goroutine: the fast path then takes out the
// flows the new prefixes or ports no longer route as they were.
func (r *Router) OnChange(fn func()) {
	if fn == nil {
		r.off.onChange.Store(nil)
		return
	}
	r.off.onChange.Store(&fn)
}

// changed follows a configuration change.
func (r *Router) changed() {
	r.off.gen.Add(1)
	if fn := r.off.onChange.Load(); fn != nil {
		(*fn)()
	}
}
