package dataplane

import (
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"time"

	"e1kbox/appliance/dataplane/frame"
)

// Loop protection. Every bridged port's first worker broadcasts a probe
// (frame.PutLoopProbe; on a trunk without a native VLAN tagged with its
// lowest allowed VLAN) out of its port every probeInterval, and at once
// when the monitor sees MACs flap. A probe of this engine that comes back
// in on a port proves a path outside the box between the sending port and
// the receiving one: a loop, which floods every broadcast forever. The
// receiving worker blocks the higher-numbered of the two ports (the same
// choice whichever way the probes go) for loopHold, and probes that keep
// coming back keep it blocked: a blocked port forwards nothing either way
// but keeps sending and receiving probes. loopHold after the last one came
// back the monitor opens it again, after it made the FDB forget what it
// learned while the loop stood. The WAN and host ports never take part.
// See docs/dataplane.md (Loop protection).
const (
	probeInterval = 500 * time.Millisecond
	loopHold      = 2 * time.Second
	// flapMoves is the count of FDB moves on a port within one link
	// poll that sends probes at once: a broadcast storm moves the
	// sources it carries between the looped ports at every turn.
	flapMoves = 64
)

// loopGuard is the engine's loop protection: the identity of its probes
// and the probe generation the monitor advances (a worker sends one probe
// per generation).
type loopGuard struct {
	nonce [8]byte
	mac   [6]byte
	gen   atomic.Uint64
	off   atomic.Bool // the configuration turned it off
}

func newLoopGuard() (*loopGuard, error) {
	g := &loopGuard{}
	if _, err := rand.Read(g.nonce[:]); err != nil {
		return nil, fmt.Errorf("dataplane: loop probe nonce: %w", err)
	}
	// A locally administered unicast address of the nonce's bytes.
	copy(g.mac[:], g.nonce[:6])
	g.mac[0] = g.mac[0]&^3 | 2
	return g, nil
}

// portLoop is a port's loop state, on its portInfo.
type portLoop struct {
	// blockedUntil is the engine time (ns) until which the port's block
	// holds; 0: not blocked. Workers that receive a probe set or extend
	// it, and all read it once per batch; only the monitor sets it back
	// to 0, once the hold is over and the FDB has forgotten the loop's
	// paths (open), so that no frame is forwarded on an entry learned on
	// the detour.
	blockedUntil atomic.Int64
	peer         atomic.Uint32 // the other end of the last loop found
	moves        atomic.Uint64 // FDB moves to this port (the monitor watches for flaps)
	blocks       atomic.Uint64 // the times the port was blocked
	// the monitor's own
	wasBlocked bool
	lastMoves  uint64
}

// blocked reports whether the port is blocked: from a probe's return
// until the monitor opens it again.
func (l *portLoop) blocked() bool { return l.blockedUntil.Load() != 0 }

// expired returns the block's hold time if it is over at mono (0 if the
// port is not blocked or the hold goes on).
func (l *portLoop) expired(mono int64) int64 {
	until := l.blockedUntil.Load()
	if until == 0 || mono < until {
		return 0
	}
	return until
}

// open ends the block whose hold ran until until, unless a probe came
// back meanwhile and extended it; it reports whether the port is open.
func (l *portLoop) open(until int64) bool {
	return l.blockedUntil.CompareAndSwap(until, 0)
}

// bridged reports whether port id takes part in bridging (and so in loop
// protection): not the WAN, not the host port.
func (w *fwd) bridged(id uint16) bool {
	return id != w.wanID && int(id) < len(w.ports) && w.ports[id] != nil && !w.ports[id].host
}

// probe sends this port's probe of the current generation, once, if this
// worker is its port's prober, the port is bridged and its link is up
// (blocked or not).
func (w *fwd) probe() {
	g := w.loop.gen.Load()
	if !w.prober || g == w.probeGen {
		return
	}
	w.probeGen = g
	in := w.in.id
	if w.loop.off.Load() || !w.bridged(in) || !w.in.up.Load() {
		return
	}
	tx := w.tx[in]
	if tx == nil {
		return
	}
	slot := tx.TxSlot()
	if slot == nil {
		return
	}
	var vid uint16
	if v := w.set.ports[in].vlan; v != nil {
		vid = v.probe
	}
	n := frame.PutLoopProbe(slot, w.loop.mac, vid, frame.LoopProbe{Nonce: w.loop.nonce, Port: in})
	if n == 0 || !tx.TxCommit(n) {
		return
	}
	w.dirty |= 1 << in
}

// probeIn handles a loop probe of this engine received on the ingress
// port, sent from port from: it blocks the higher-numbered of the two.
func (w *fwd) probeIn(from uint16) {
	in := w.in.id
	if w.loop.off.Load() || !w.bridged(in) || !w.bridged(from) {
		return
	}
	victim, peer := max(in, from), min(in, from)
	l := &w.ports[victim].loop
	if !l.blocked() {
		l.blocks.Add(1)
	}
	l.peer.Store(uint32(peer))
	l.blockedUntil.Store(w.mono + int64(loopHold))
	if victim == in {
		w.inBlocked = true
	}
	w.up[victim] = false
	w.blocked |= 1 << victim
}

// pollLoops runs with the link poll: it sends probes at once when a port's
// MACs flap, and settles the ports' loop states (settleLoops), logging
// the changes.
func (e *Engine) pollLoops(tick uint64) {
	g := e.deps.loop
	flap := false
	ports := e.topo.Load().ports[1:]
	for _, p := range ports {
		l := &p.loop
		m := l.moves.Load()
		if m-l.lastMoves >= flapMoves {
			flap = true
		}
		l.lastMoves = m
	}
	for _, p := range settleLoops(ports, e.Now(), g.off.Load(), func() {
		e.fdb.Flush(0, false)
		e.fp.FDBFlushed()
	}) {
		if p.loop.wasBlocked {
			e.log.Warn("dataplane loop: port blocked", "port", p.name, "loop_with", e.portName(uint16(p.loop.peer.Load())))
		} else {
			e.log.Info("dataplane loop gone: port forwards again", "port", p.name)
		}
	}
	if flap || tick%uint64(probeInterval/linkPoll) == 0 {
		g.gen.Add(1)
		if !g.off.Load() {
			e.wakeProbers()
		}
	}
}

// settleLoops is the monitor's turn on the ports' loop states at engine
// time now (off: loop protection is off, every block ends). When a port
// became blocked or its hold is over, flush makes the FDB forget its
// dynamic entries (in a storm they point to wrong ports; after it, to
// the detour) and only then does an expired port open again. It returns
// the ports whose state changed (their wasBlocked is the new state).
func settleLoops(ports []*portInfo, now int64, off bool, flush func()) []*portInfo {
	var changed []*portInfo
	for _, p := range ports {
		if p == nil {
			continue
		}
		l := &p.loop
		until := l.expired(now)
		if off {
			until = l.blockedUntil.Load()
		}
		b := l.blocked()
		if b == l.wasBlocked && until == 0 {
			continue
		}
		flush()
		if until != 0 && l.open(until) {
			b = false
		}
		if b != l.wasBlocked {
			l.wasBlocked = b
			changed = append(changed, p)
		}
	}
	return changed
}

// portName names port id of the running topology ("" if none).
func (e *Engine) portName(id uint16) string {
	ps := e.topo.Load().ports
	if int(id) < len(ps) && ps[id] != nil {
		return ps[id].name
	}
	return ""
}
