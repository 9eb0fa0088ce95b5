package route6

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
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
	// incompleteLife is how long an incomplete entry is being resolved:
	// its NS are over and its frames gone after it, so it is a free way.
	incompleteLife = neighProbes + 1
	// idleForget is how long an entry must have gone unconfirmed before
	// the resolution of an unknown address may take its way. An entry in
	// use is confirmed every reachableTime (the router, or the fast path's
	// probes, solicit it), so this is one no traffic went to for minutes.
	idleForget = 300
)

type neighEntry struct {
	addr      [16]byte
	side      Side
	mac       [6]byte
	state     uint8
	counted   bool   // incomplete for an unknown destination: in neighbours.unknown
	confirmed uint32 // when last confirmed (NA, or created from an NS)
	created   uint32 // when an incomplete entry was made
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
	// unknown counts the live incomplete entries made for new connections
	// from the WAN to addresses without an entry (what a scan makes), and
	// nsLimit their NS: a scan resolves at most that many addresses at
	// once and solicits at that rate, whatever its rate and sources.
	unknown *routing.Unresolved
	nsLimit *rules.Limiter
	// announced limits the entries made from unsolicited NAs.
	announced *rules.Limiter
}

// How an entry is made for a lookup that finds none (resolve).
type lookupKind uint8

const (
	lookupTrusted lookupKind = iota // a known connection, the box's own frames, the WAN gateway
	lookupUnknown                   // a new connection from the WAN to an address without an entry
)

// What resolve found.
type resolution uint8

const (
	resUsable  resolution = iota // the MAC is usable
	resWaiting                   // incomplete: queue the frame
	resFailed                    // the neighbour did not answer: given up
	resRefused                   // no entry may be made (the cap, the NS rate, a bucket of resolved entries)
)

// The unknown-address limits, from the cache's size: a quarter of it
// may be incomplete for unknown addresses, and they are solicited at
// unknownNSRate a second.
const (
	unknownNSRate  = 200
	unknownNSBurst = 100
	announcedRate  = 100
)

func newNeighbours(max int) *neighbours {
	n := 1
	for n*bucketWays < max {
		n <<= 1
	}
	return &neighbours{b: make([]neighBucket, n), mask: uint64(n - 1),
		unknown:   routing.NewUnresolved(n*bucketWays/4, incompleteLife),
		nsLimit:   rules.NewLimiter(unknownNSRate, unknownNSBurst),
		announced: rules.NewLimiter(announcedRate, announcedRate)}
}

func (n *neighbours) bucket(side Side, a *[16]byte) *neighBucket {
	h := (binary.LittleEndian.Uint64(a[0:]) ^ binary.LittleEndian.Uint64(a[8:])*0x9e3779b97f4a7c15) + uint64(side)
	return &n.b[(h^h>>31)&n.mask]
}

// resolve looks addr up on side at now (seconds; nowNs the same in ns):
// the MAC if usable, and whether an NS should go out now (solicit: a new
// or unconfirmed entry, at most one a second). An entry probed
// neighProbes times without an answer is given up (resFailed). A missing
// entry is made incomplete in a way victim allows for kind; one for an
// unknown destination also within the cap and NS rate of unknown
// addresses, else resRefused.
func (n *neighbours) resolve(side Side, a *[16]byte, now uint32, nowNs int64, kind lookupKind) (mac [6]byte, res resolution, solicit bool) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	at, free := b.find(side, a)
	if at >= 0 {
		e := &b.e[at]
		if e.counted && kind == lookupTrusted {
			n.uncount(e) // wanted by known traffic now: no longer the scan's
		}
		fresh := now-e.confirmed < reachableTime
		if !fresh && e.probes >= neighProbes && now-e.lastNS >= 1 {
			n.uncount(e)
			e.state = nFree // gave up
			return mac, resFailed, false
		}
		if !fresh && now-e.lastNS >= 1 && (!e.counted || n.nsLimit.Allow(nowNs)) {
			e.lastNS, solicit = now, true
			e.probes++
		}
		if e.state == nReachable {
			return e.mac, resUsable, solicit
		}
		return mac, resWaiting, solicit
	}
	if free < 0 {
		if free = b.victim(now, kind, false); free < 0 {
			return mac, resRefused, false
		}
	}
	v := &b.e[free]
	if kind == lookupUnknown {
		// The scan's budget: its NS, then its share of the cache (a way
		// of its own it takes over keeps the count as it is).
		if !n.nsLimit.Allow(nowNs) || !(v.counted && n.unknown.Move(v.created, now)) && !n.unknown.Add(now) {
			return mac, resRefused, false
		}
	} else {
		n.uncount(v)
	}
	*v = neighEntry{addr: *a, side: side, state: nIncomplete, counted: kind == lookupUnknown, created: now, lastNS: now, probes: 1}
	return mac, resWaiting, true
}

// uncount takes e out of the unknown addresses' count, if it is in it.
func (n *neighbours) uncount(e *neighEntry) {
	if e.counted {
		n.unknown.Done(e.created)
		e.counted = false
	}
}

// known says whether addr on side has a resolved entry (reachable or
// stale): traffic to it is not a scan's.
func (n *neighbours) known(side Side, a *[16]byte) bool {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reachable(side, a) != nil
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

// The victims victim may pick, in its order of preference.
const (
	vicDead     = iota // an incomplete entry past incompleteLife
	vicLive            // an incomplete entry being resolved
	vicResolved        // a resolved entry, confirmed long enough ago
	vicNone
)

// victim is the way of a full bucket to reuse for a new entry (-1: none)
// made for kind, or (learnt) for what a neighbour's own NDP message
// told: an incomplete entry given up, else the incomplete entry created
// first (one of a known destination only for a known one), else the
// resolved entry confirmed longest ago. A resolved entry goes only for
// an entry learnt from the neighbour, or for a known destination when it
// is stale (confirmed reachableTime ago), or for an unknown one when no
// traffic confirmed it for idleForget: a scan never evicts a neighbour
// in use, and the cache forgets idle ones.
func (b *neighBucket) victim(now uint32, kind lookupKind, learnt bool) int {
	v, vClass, vAge := -1, vicNone, uint32(0)
	for i := range b.e {
		e := &b.e[i]
		class, age := vicNone, uint32(0)
		switch {
		case e.state == nFree:
			return i
		case e.state == nIncomplete && now-e.created >= incompleteLife:
			class, age = vicDead, now-e.created
		case e.state == nIncomplete && (learnt || kind == lookupTrusted || e.counted):
			class, age = vicLive, now-e.created
		case e.state == nReachable:
			age = now - e.confirmed
			if learnt || kind == lookupTrusted && age >= reachableTime || age >= idleForget {
				class = vicResolved
			}
		}
		if class < vClass || class == vClass && class != vicNone && age > vAge {
			v, vClass, vAge = i, class, age
		}
	}
	return v
}

// How learn takes what an NDP message says of a neighbour.
type learnKind uint8

const (
	learnConfirm  learnKind = iota // a solicited NA: make or confirm the entry
	learnCreate                    // an NS's or RA's source address: make or update the entry
	learnUpdate                    // an unsolicited NA (override): update an existing entry only
	learnAnnounce                  // an unsolicited NA for an address on the LAN (RFC 9131): update, or make it stale
)

// learn records mac for addr on side, as kind says. A new entry takes a
// free or incomplete way, else the resolved entry confirmed longest ago;
// an announced one (made stale, so that its first use solicits it, at
// most announcedRate a second) never takes a reachable entry's way.
func (n *neighbours) learn(side Side, a *[16]byte, mac [6]byte, kind learnKind, now uint32, nowNs int64) {
	b := n.bucket(side, a)
	b.mu.Lock()
	defer b.mu.Unlock()
	at, free := b.find(side, a)
	if at < 0 {
		confirmed := now
		switch kind {
		case learnUpdate:
			return
		case learnAnnounce:
			confirmed = now - reachableTime
		}
		if free < 0 {
			free = b.victim(now, lookupTrusted, kind != learnAnnounce)
		}
		if free < 0 || kind == learnAnnounce && !n.announced.Allow(nowNs) {
			return
		}
		n.uncount(&b.e[free])
		b.e[free] = neighEntry{addr: *a, side: side, mac: mac, state: nReachable, confirmed: confirmed}
		n.resolved.Add(1)
		return
	}
	e := &b.e[at]
	if e.state != nReachable {
		n.resolved.Add(1)
		n.uncount(e)
	}
	if kind == learnConfirm || e.mac != mac || e.state == nIncomplete {
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
