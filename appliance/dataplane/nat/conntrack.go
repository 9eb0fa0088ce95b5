package nat

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// key is a connection tuple as it appears on the wire when it enters the
// router on a side: a = src<<32 | dst, b = sport<<48 | dport<<32 |
// proto<<8 | side. ICMP echo uses the identifier as the port of the
// host that pings (sport of requests, dport of replies) and 0 for the
// other; other protocols without ports use 0 for both.
type key struct{ a, b uint64 }

func mkKey(src, dst uint32, sport, dport uint16, proto uint8, side Side) key {
	return key{uint64(src)<<32 | uint64(dst), uint64(sport)<<48 | uint64(dport)<<32 | uint64(proto)<<8 | uint64(side)}
}

func (k key) src() uint32   { return uint32(k.a >> 32) }
func (k key) dst() uint32   { return uint32(k.a) }
func (k key) sport() uint16 { return uint16(k.b >> 48) }
func (k key) dport() uint16 { return uint16(k.b >> 32) }
func (k key) proto() uint8  { return uint8(k.b >> 8) }
func (k key) side() Side    { return Side(k.b & 0xff) }

// Connection states, in the low 4 bits of entry.state.
const (
	stNone uint32 = iota // non-TCP
	stSynSent
	stSynRecv
	stEstablished
	stFinWait   // FIN seen from the originator only
	stCloseWait // FIN seen from the responder only
	stLastAck   // FIN seen from both
	stTimeWait
	stClose
	stateMask   = 0xf
	flagReplied = 1 << 4 // a packet was seen in the reply direction
)

// Connection kinds.
const (
	kindSNAT    uint8 = iota + 1 // LAN host to the WAN, masqueraded
	kindDNAT                     // WAN to a LAN host through a port forward
	kindHairpin                  // LAN host to a port forward on the WAN address
)

// entry is the hot part of one connection, what forwarding a packet of
// an established connection reads and writes: one cache line (entries are
// 64-byte aligned, so a lookup waits for one line). keys are written only
// while the entry is free and its stripes are locked. The counters of
// direction d change only under the stripe lock of keys[d] (the one a
// lookup of that direction holds) and are read under both; pkts holds the
// low 32 bits of the packet counts, entryCold.pktsHi the carries. state
// and deadline are atomic.
type entry struct {
	keys     [2]key // [0] original direction, [1] reply direction
	state    atomic.Uint32
	deadline atomic.Uint32 // seconds; expired when now >= deadline
	pkts     [2]uint32
	bytes    [2]uint64
}

// entryCold is the rest of a connection, what only creating, deleting,
// scanning and listing it use. kind, created and pktsHi follow the rules
// of entry's keys and counters; gen and stripes are atomic.
type entryCold struct {
	gen     atomic.Uint32 // incarnation: odd while live
	stripes atomic.Uint32 // stripe of keys[0]<<16 | stripe of keys[1]
	created uint32        // seconds
	pktsHi  [2]uint32     // carries of entry.pkts
	kind    uint8
}

// count adds a packet of n bytes to direction d of e (cold is e's).
func (e *entry) count(cold *entryCold, d int, n uint64) {
	e.bytes[d] += n
	if e.pkts[d]++; e.pkts[d] == 0 {
		cold.pktsHi[d]++
	}
}

// packets returns e's packet counts (cold is e's).
func (e *entry) packets(cold *entryCold) [2]uint64 {
	return [2]uint64{uint64(cold.pktsHi[0])<<32 | uint64(e.pkts[0]), uint64(cold.pktsHi[1])<<32 | uint64(e.pkts[1])}
}

func expired(deadline, sec uint32) bool { return int32(sec-deadline) >= 0 }

// stripe is one lock and the hash index of the keys that hash to it. A
// slot is tag<<32 | dir<<31 | (entry index + 1), 0 when empty; the home
// slot of a key follows from its tag, so linear probing can delete by
// shifting back (no tombstones). Slots change only under mu but are
// atomics: entryFor reads them without it.
type stripe struct {
	mu    sync.Mutex
	slots []atomic.Uint64 // fixed in newTable
	used  int
	_     [24]byte // one stripe per cache line
}

// table is the connection table: a fixed slab of entries (hot parts and,
// in a parallel slab, cold parts) and a striped index in which every
// entry has its two keys. A lookup locks the one
// stripe of its key; creating and deleting lock both stripes of the entry
// (in index order). Whoever holds either stripe of a live entry may read
// its keys: it cannot be deleted meanwhile. Scans (expiry, eviction,
// listing) read the atomic fields first, lock the stripes named in
// entryCold.stripes and check gen again before touching the rest.
type table struct {
	entries      []entry     // 64-byte aligned
	cold         []entryCold // parallel to entries
	stripes      []stripe
	slots        []atomic.Uint64 // the stripes' slots, per each
	per          int
	smask        uint64
	seed0, seed1 uint64
	maps         *mappings

	allocMu sync.Mutex
	free    []uint32

	count                    atomic.Int64
	sweepAt, evictAt         atomic.Uint64
	inserted, evicted, swept atomic.Uint64
	failed                   atomic.Uint64
}

func newTable(max int, seed uint64, maps *mappings) *table {
	s := 1
	for s < 4096 && s*2*256 <= max {
		s *= 2
	}
	per := 2*max/s*8/5 + 64
	t := &table{
		entries: alignedEntries(max),
		cold:    make([]entryCold, max),
		stripes: make([]stripe, s),
		smask:   uint64(s - 1),
		seed0:   seed,
		seed1:   bits.RotateLeft64(seed*0x9e3779b97f4a7c15, 29) | 1,
		maps:    maps,
		free:    make([]uint32, max),
	}
	backing := make([]atomic.Uint64, per*s)
	t.slots, t.per = backing, per
	for i := range t.stripes {
		t.stripes[i].slots = backing[i*per : (i+1)*per : (i+1)*per]
	}
	for i := range t.free {
		t.free[i] = uint32(max - 1 - i)
	}
	adviseHuge(t)
	// Touch every page now: the first write to fresh memory faults, which
	// would otherwise land on the forwarding path of the first connections.
	for i := 0; i < len(t.entries); i += 64 {
		t.entries[i].pkts[0] = 0
	}
	for i := 0; i < len(t.cold); i += 128 {
		t.cold[i].created = 0
	}
	for i := 0; i < len(backing); i += 256 {
		backing[i].Store(0)
	}
	return t
}

// alignedEntries returns n zero entries starting at a 64-byte boundary.
// (Big allocations are page-aligned anyway; small ones need not be.)
func alignedEntries(n int) []entry {
	const line = 64
	raw := make([]entry, n+1)
	p := unsafe.Pointer(unsafe.SliceData(raw))
	return unsafe.Slice((*entry)(unsafe.Add(p, (line-uintptr(p)%line)%line)), n)
}

func (t *table) hash(k key) uint64 {
	h1, l1 := bits.Mul64(k.a^t.seed0, 0xa0761d6478bd642f)
	h2, l2 := bits.Mul64(k.b^t.seed1, 0xe7037ed1a0b428db)
	hi, lo := bits.Mul64(h1^l1, h2^l2^0x8ebc6af09c88c6e3)
	return hi ^ lo
}

func (t *table) stripeOf(h uint64) uint32 { return uint32(h & t.smask) }

const (
	slotIdx = 1<<31 - 1
	slotDir = 1 << 31
)

func homeOf(tag uint64, n int) int { return int(tag * uint64(n) >> 32) }

// find returns the index and direction of the live entry with key k
// (hash h) in stripe s, which the caller holds, and the slot position.
func (t *table) find(s *stripe, k key, h uint64) (idx uint32, dir int, pos int, ok bool) {
	tag := h >> 32
	n := len(s.slots)
	pos = homeOf(tag, n)
	for {
		v := s.slots[pos].Load()
		if v == 0 {
			return 0, 0, 0, false
		}
		if v>>32 == tag {
			idx = uint32(v&slotIdx) - 1
			dir = int(v>>31) & 1
			if t.entries[idx].keys[dir] == k {
				return idx, dir, pos, true
			}
		}
		if pos++; pos == n {
			pos = 0
		}
	}
}

// A lookup waits for two dependent memory reads when the table is large:
// the key's slot, then the entry it points to. The prefetch pipeline of a
// worker (see prefetcher) hides them for frames it will process later in
// two stages, each issuing prefetch instructions that return at once:
// the key's stripe and slots when the frame is queued, its entry
// prefetchLag frames later, once the slots have arrived. Plain loads
// would not do: a load that misses holds the core's reorder window until
// it is served, so the lookups in between would wait for it.

// prefetchProbe is how many slots from its home entryFor examines
// for a key (the key lies further in a few percent of lookups, at the
// stripes' full load of 5/8).
const prefetchProbe = 4

// entryFor returns the entry a slot among the prefetchProbe slots from
// the home of h whose tag matches points to, 0 when none does (at the end
// of a stripe it looks at the stripe's last prefetchProbe slots instead of
// wrapping around). It takes no lock: it loads the slots atomically, and
// a slot that changes meanwhile only makes the prefetch fetch the wrong
// entry. It has no branch on what it loads (a mispredicted one resolved
// only when a slot arrives would throw away the work after it), and the
// slots' matches are independent of each other: two matching tags among
// four slots (a 32-bit tag collision) merge their indexes, which the
// bound keeps inside the table; the prefetch is then only useless.
func (t *table) entryFor(h uint64) uint64 {
	tag := h >> 32
	home := min(homeOf(tag, t.per), t.per-prefetchProbe)
	base := int(h&t.smask)*t.per + home
	w := (*[prefetchProbe]atomic.Uint64)(t.slots[base : base+prefetchProbe])
	var sel uint64
	for j := range w {
		v := w[j].Load()
		d := v>>32 ^ tag    // 0 when the tag matches
		m := (d|-d)>>63 - 1 // all ones when it does
		sel |= v & m
	}
	i := sel & slotIdx
	i -= (i | -i) >> 63 // the index is the slot's minus 1
	if i >= uint64(len(t.entries)) {
		i = 0
	}
	return i
}

func (s *stripe) add(h uint64, idx uint32, dir int) {
	tag := h >> 32
	n := len(s.slots)
	pos := homeOf(tag, n)
	for s.slots[pos].Load() != 0 {
		if pos++; pos == n {
			pos = 0
		}
	}
	s.slots[pos].Store(tag<<32 | uint64(dir)<<31 | uint64(idx+1))
	s.used++
}

// removeAt empties slot i and shifts later members of its cluster back.
func (s *stripe) removeAt(i int) {
	n := len(s.slots)
	s.used--
	for {
		s.slots[i].Store(0)
		j := i
		for {
			if j++; j == n {
				j = 0
			}
			v := s.slots[j].Load()
			if v == 0 {
				return
			}
			k := homeOf(v>>32, n)
			// v stays when its home lies cyclically in (i, j].
			if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
				continue
			}
			s.slots[i].Store(v)
			i = j
			break
		}
	}
}

func (t *table) lock2(a, b uint32) {
	if a > b {
		a, b = b, a
	}
	t.stripes[a].mu.Lock()
	if b != a {
		t.stripes[b].mu.Lock()
	}
}

func (t *table) unlock2(a, b uint32) {
	t.stripes[a].mu.Unlock()
	if b != a {
		t.stripes[b].mu.Unlock()
	}
}

// insertErr says why an insert failed.
type insertErr uint8

const (
	insOK insertErr = iota
	insFull
	insClash
	insRetry
)

// insert adds a connection with the given keys, kind, state and deadline.
// The first packet (of bytes IP bytes) is counted in the original direction.
func (t *table) insert(keys [2]key, kind uint8, state, sec, deadline uint32, bytes uint64) (uint32, insertErr) {
	h := [2]uint64{t.hash(keys[0]), t.hash(keys[1])}
	for range 4 {
		if t.count.Load() >= int64(len(t.entries)) && !t.evict(sec) {
			break
		}
		idx, err := t.tryInsert(keys, h, kind, state, sec, deadline, bytes)
		switch err {
		case insOK:
			t.inserted.Add(1)
			return idx, insOK
		case insClash:
			t.failed.Add(1)
			return 0, insClash
		case insFull:
			t.failed.Add(1)
			return 0, insFull
		}
	}
	t.failed.Add(1)
	return 0, insFull
}

func (t *table) tryInsert(keys [2]key, h [2]uint64, kind uint8, state, sec, deadline uint32, bytes uint64) (uint32, insertErr) {
	s0, s1 := t.stripeOf(h[0]), t.stripeOf(h[1])
	t.lock2(s0, s1)
	for d, k := range keys {
		idx, _, _, ok := t.find(&t.stripes[t.stripeOf(h[d])], k, h[d])
		if !ok {
			continue
		}
		if !expired(t.entries[idx].deadline.Load(), sec) {
			t.unlock2(s0, s1)
			return 0, insClash
		}
		g := t.cold[idx].gen.Load()
		t.unlock2(s0, s1)
		if t.remove(idx, g, rmExpired, sec) {
			t.swept.Add(1)
		}
		return 0, insRetry
	}
	st0, st1 := &t.stripes[s0], &t.stripes[s1]
	if st0.used+2 >= len(st0.slots) || st1.used+2 >= len(st1.slots) {
		t.unlock2(s0, s1)
		return 0, insFull
	}
	idx, ok := t.alloc()
	if !ok {
		t.unlock2(s0, s1)
		return 0, insRetry
	}
	e, c := &t.entries[idx], &t.cold[idx]
	e.keys = keys
	c.kind = kind
	c.created = sec
	e.state.Store(state)
	e.deadline.Store(deadline)
	e.pkts, c.pktsHi = [2]uint32{1, 0}, [2]uint32{}
	e.bytes = [2]uint64{bytes, 0}
	c.stripes.Store(s0<<16 | s1)
	c.gen.Add(1)
	st0.add(h[0], idx, 0)
	st1.add(h[1], idx, 1)
	t.unlock2(s0, s1)
	return idx, insOK
}

func (t *table) alloc() (uint32, bool) {
	t.allocMu.Lock()
	n := len(t.free)
	if n == 0 {
		t.allocMu.Unlock()
		return 0, false
	}
	idx := t.free[n-1]
	t.free = t.free[:n-1]
	t.allocMu.Unlock()
	t.count.Add(1)
	return idx, true
}

func (t *table) release(idx uint32) {
	t.allocMu.Lock()
	t.free = append(t.free, idx)
	t.allocMu.Unlock()
	t.count.Add(-1)
}

// Removal conditions, checked under the entry's locks.
type rmWhy uint8

const (
	rmAny     rmWhy = iota // delete unconditionally
	rmExpired              // only if expired
	rmEvict1               // expired or unreplied
	rmEvict2               // ... or a TCP connection in TIME_WAIT/CLOSE
)

// evictTier ranks a live entry for eviction: 0 expired, 1 unreplied, 2
// closed TCP, 3 never evicted.
func evictTier(state, deadline, sec uint32) int {
	switch {
	case expired(deadline, sec):
		return 0
	case state&flagReplied == 0:
		return 1
	case state&stateMask == stTimeWait || state&stateMask == stClose:
		return 2
	}
	return 3
}

// remove deletes entry idx if it is still incarnation gen and why allows.
func (t *table) remove(idx uint32, gen uint32, why rmWhy, sec uint32) bool {
	e, c := &t.entries[idx], &t.cold[idx]
	sw := c.stripes.Load()
	if gen&1 == 0 || c.gen.Load() != gen {
		return false
	}
	s0, s1 := sw>>16, sw&0xffff
	t.lock2(s0, s1)
	if c.gen.Load() != gen || c.stripes.Load() != sw {
		t.unlock2(s0, s1)
		return false
	}
	if why != rmAny && evictTier(e.state.Load(), e.deadline.Load(), sec) > int(why)-int(rmExpired) {
		t.unlock2(s0, s1)
		return false
	}
	keys, kind := e.keys, c.kind
	for d, s := range [2]uint32{s0, s1} {
		st := &t.stripes[s]
		_, _, pos, ok := t.find(st, keys[d], t.hash(keys[d]))
		if ok {
			st.removeAt(pos)
		}
	}
	e.state.Store(0)
	c.gen.Add(1)
	t.unlock2(s0, s1)
	t.maps.releaseConn(kind, keys)
	t.release(idx)
	return true
}

// evictWindow is how many slots an insert into a full table examines.
const evictWindow = 1024

// evict frees one entry of a full table: within the next evictWindow
// slots from a rotating cursor, the first expired entry, else the
// unreplied one closest to expiry, else the TCP connection in TIME_WAIT
// or CLOSE closest to expiry.
// Entries that have seen a reply and are not closed are never evicted.
func (t *table) evict(sec uint32) bool {
	n := uint64(len(t.entries))
	w := min(n, evictWindow)
	start := t.evictAt.Add(w) - w
	best, bestTier, bestGen, bestDL := uint32(0), 3, uint32(0), uint32(0)
	for i := range w {
		idx := uint32((start + i) % n)
		e := &t.entries[idx]
		g := t.cold[idx].gen.Load()
		if g&1 == 0 {
			return true // a free slot appeared
		}
		dl := e.deadline.Load()
		if tier := evictTier(e.state.Load(), dl, sec); tier < bestTier || tier == bestTier && int32(dl-bestDL) < 0 {
			best, bestTier, bestGen, bestDL = idx, tier, g, dl
			if tier == 0 {
				break
			}
		}
	}
	if bestTier == 3 {
		return false
	}
	if !t.remove(best, bestGen, rmExpired+rmWhy(bestTier), sec) {
		return true // changed under us; let the caller look again
	}
	if bestTier == 0 {
		t.swept.Add(1)
	} else {
		t.evicted.Add(1)
	}
	return true
}

// sweep removes expired entries among the next n slots of the sweep
// cursor and returns how many it removed.
func (t *table) sweep(sec uint32, n int) int {
	total := uint64(len(t.entries))
	w := min(uint64(n), total)
	start := t.sweepAt.Add(w) - w
	removed := 0
	for i := range w {
		idx := uint32((start + i) % total)
		g := t.cold[idx].gen.Load()
		if g&1 == 1 && expired(t.entries[idx].deadline.Load(), sec) && t.remove(idx, g, rmExpired, sec) {
			removed++
		}
	}
	t.swept.Add(uint64(removed))
	return removed
}
