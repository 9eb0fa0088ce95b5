package route6

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/routing"
)

// Neighbour states.
const (
	nFree uint8 = iota
	nIncomplete
	nReachable
)

// Neighbour timers in seconds.
const (
	reachableTime = 30 // a confirmed entry is used without probing
	neighProbes   = 3  // NS (one a second) before an entry is given up
	pendingMax    = 3  // seconds a frame waits for its next hop
)

type neighEntry struct {
	addr      [16]byte
	side      Side
	mac       [6]byte
	state     uint8
	confirmed uint32 // when last confirmed (NA, or created from an NS)
	lastNS    uint32 // when the last NS went out
	probes    uint8  // NS since the last confirmation
}

type neighBucket struct {
	mu sync.Mutex
	e  [bucketWays]neighEntry
}

// neighbours is the shared, bounded neighbour cache of both sides.
type neighbours struct {
	b        []neighBucket
	mask     uint64
	resolved atomic.Uint64 // bumped when an entry becomes usable: queues rescan
	// refresh holds the probes the fast path asked for until a worker's
	// Tick sends them.
	refresh routing.Probes[probeReq]
}

func newNeighbours(max int) *neighbours {
	n := 1
	for n*bucketWays < max {
		n <<= 1
	}
	return &neighbours{b: make([]neighBucket, n), mask: uint64(n - 1)}
}

func (n *neighbours) bucket(side Side, a *[16]byte) *neighBucket {
	h := (binary.LittleEndian.Uint64(a[0:]) ^ binary.LittleEndian.Uint64(a[8:])*0x9e3779b97f4a7c15) + uint64(side)
	return &n.b[(h^h>>31)&n.mask]
}

// resolve looks addr up on side at now: the MAC if usable (ok), and
// whether an NS should go out now (solicit: a new or unconfirmed entry,
// at most one a second). An entry probed neighProbes times without an
// answer is given up (failed).
func (n *neighbours) resolve(side Side, a *[16]byte, now uint32) (mac [6]byte, ok, solicit, failed bool) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	at, free := b.find(side, a)
	if at >= 0 {
		e := &b.e[at]
		fresh := now-e.confirmed < reachableTime
		if !fresh && e.probes >= neighProbes && now-e.lastNS >= 1 {
			e.state = nFree // gave up
			return mac, false, false, true
		}
		if !fresh && now-e.lastNS >= 1 {
			e.lastNS, solicit = now, true
			e.probes++
		}
		return e.mac, e.state == nReachable, solicit, false
	}
	if free < 0 {
		free = n.victim(b, now)
	}
	b.e[free] = neighEntry{addr: *a, side: side, state: nIncomplete, lastNS: now, probes: 1}
	return mac, false, true, false
}

// find returns the way of the entry of addr on side (-1: none) and the
// bucket's first free way (-1: none, and only meaningful without an
// entry). An address has one entry at most: one is made only when find
// finds none.
func (b *neighBucket) find(side Side, a *[16]byte) (at, free int) {
	free = -1
	for i := range b.e {
		e := &b.e[i]
		switch {
		case e.state == nFree:
			if free < 0 {
				free = i
			}
		case e.addr == *a && e.side == side:
			return i, free
		}
	}
	return -1, free
}

// reachable is the entry of addr on side if it is reachable, or nil.
func (b *neighBucket) reachable(side Side, a *[16]byte) *neighEntry {
	if at, _ := b.find(side, a); at >= 0 && b.e[at].state == nReachable {
		return &b.e[at]
	}
	return nil
}

// victim is the way to reuse in a full bucket: an incomplete entry, else
// the one confirmed longest ago.
func (n *neighbours) victim(b *neighBucket, now uint32) int {
	v := 0
	for i := range b.e {
		if b.e[i].state == nIncomplete {
			return i
		}
		if now-b.e[i].confirmed > now-b.e[v].confirmed {
			v = i
		}
	}
	return v
}

// learn records mac for addr on side. confirm (a solicited NA) makes the
// entry reachable; otherwise (an NS's source link-layer address, an
// unsolicited NA with override) only an existing entry is updated, or,
// with create, a new one made.
func (n *neighbours) learn(side Side, a *[16]byte, mac [6]byte, confirm, create bool, now uint32) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	at, free := b.find(side, a)
	if at < 0 {
		if !create && !confirm {
			return
		}
		if free < 0 {
			free = n.victim(b, now)
		}
		b.e[free] = neighEntry{addr: *a, side: side, mac: mac, state: nReachable, confirmed: now}
		n.resolved.Add(1)
		return
	}
	e := &b.e[at]
	if e.state != nReachable {
		n.resolved.Add(1)
	}
	if confirm || e.mac != mac || e.state == nIncomplete {
		e.mac, e.state = mac, nReachable
		e.confirmed, e.probes = now, 0
	}
}

// confirm makes the resolved entry of addr on side at mac reachable again
// (a solicited NA without a link-layer address option); it changes
// nothing else and creates nothing.
func (n *neighbours) confirm(side Side, a *[16]byte, mac [6]byte, now uint32) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.reachable(side, a); e != nil && e.mac == mac {
		e.confirmed, e.probes = now, 0
	}
}

// Neighbour is a cache entry as Neighbours lists it.
type Neighbour struct {
	Side      Side
	Addr      [16]byte
	MAC       [6]byte // zero while incomplete
	Reachable bool    // State is NeighReachable
	State     string  // NeighIncomplete, NeighReachable or NeighStale
	Confirmed uint32  // Unix seconds; 0 while incomplete
}

// Neighbour states as Neighbours lists them: incomplete (solicited, no
// answer yet), reachable (confirmed less than 30 s ago), stale (confirmed
// before: still used while it is solicited again, given up after 3
// unanswered NS).
const (
	NeighIncomplete = "incomplete"
	NeighReachable  = "reachable"
	NeighStale      = "stale"
)

func (n *neighbours) list(out []Neighbour, now uint32) []Neighbour {
	for i := range n.b {
		b := &n.b[i]
		b.mu.Lock()
		for _, e := range b.e {
			if e.state == nFree {
				continue
			}
			st := NeighIncomplete
			switch {
			case e.state == nReachable && now-e.confirmed < reachableTime:
				st = NeighReachable
			case e.state == nReachable:
				st = NeighStale
			}
			out = append(out, Neighbour{Side: e.side, Addr: e.addr, MAC: e.mac, Reachable: st == NeighReachable,
				State: st, Confirmed: e.confirmed})
		}
		b.mu.Unlock()
	}
	return out
}
