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
// but keeps sending and receiving probes, and opens again loopHold after
// the last one came back. The WAN and host ports never take part. See
// docs/dataplane.md (Loop protection).
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
	// blockedUntil is the engine time (ns) before which the port is
	// blocked; 0: never blocked. Written by the workers that receive a
	// probe, read by all once per batch.
	blockedUntil atomic.Int64
	peer         atomic.Uint32 // the other end of the last loop found
	moves        atomic.Uint64 // FDB moves to this port (the monitor watches for flaps)
	blocks       atomic.Uint64 // the times the port was blocked
	// the monitor's own
	wasBlocked bool
	lastMoves  uint64
}

func (l *portLoop) blocked(mono int64) bool {
	until := l.blockedUntil.Load()
	return until != 0 && mono < until
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
	if !l.blocked(w.mono) {
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
// MACs flap, and acts on ports that became blocked or open again: the FDB
// forgets its dynamic entries, and the change is logged.
func (e *Engine) pollLoops(tick uint64) {
	g := e.deps.loop
	flap := false
	now := e.Now()
	for _, p := range e.topo.Load().ports[1:] {
		l := &p.loop
		m := l.moves.Load()
		if m-l.lastMoves >= flapMoves {
			flap = true
		}
		l.lastMoves = m
		if g.off.Load() {
			l.blockedUntil.Store(0)
		}
		b := l.blocked(now)
		if b == l.wasBlocked {
			continue
		}
		l.wasBlocked = b
		// Either way the paths changed: the FDB forgets what it learned
		// (in a storm, wrong ports; after it, MACs learned on the detour).
		e.fdb.Flush(0, false)
		e.fp.fdbFlushed()
		if b {
			e.log.Warn("dataplane loop: port blocked", "port", p.name, "loop_with", e.portName(uint16(l.peer.Load())))
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

// portName names port id of the running topology ("" if none).
func (e *Engine) portName(id uint16) string {
	ps := e.topo.Load().ports
	if int(id) < len(ps) && ps[id] != nil {
		return ps[id].name
	}
	return ""
}
