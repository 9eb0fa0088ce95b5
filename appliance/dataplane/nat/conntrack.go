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
	// flagAssured: a connection worth keeping under a flood, as Linux
	// judges it (IPS_ASSURED): TCP that reached ESTABLISHED, other
	// protocols with traffic at least streamAfter after the first reply.
	flagAssured = 1 << 5
	// flagInbound: opened from the WAN (through a port forward).
	flagInbound = 1 << 6
	// The second (mod 2^16) of the first reply, for the stream check.
	replyShift = 16
	// TCP window scales, from each direction's SYN (RFC 7323), in the
	// state word so that they change with it: bits 8-11 the original
	// direction's, 12-15 the reply's; noScale when not in use.
	scaleShift = 8
	noScale    = 0xf
	scaleBits  = noScale<<scaleShift | noScale<<(scaleShift+4)
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
// while the entry is free and its stripes are locked. The per-direction
// fields of direction d change only under the stripe lock of keys[d] (the
// one a lookup of that direction holds) and are read under both: the
// counters (pkts and bytes hold the low 16 and 32 bits, entryCold the
// carries) and, for TCP, the highest acknowledgment direction d sent and
// its last window (what a RST towards d must match, RFC 5961). state and
// deadline are atomic.
type entry struct {
	keys     [2]key // [0] original direction, [1] reply direction
	state    atomic.Uint32
	deadline atomic.Uint32 // seconds; expired when now >= deadline
	pkts     [2]uint16
	bytes    [2]uint32
	// TCP: ack[d] is the highest acknowledgment direction d sent (its
	// RCV.NXT; before d sent one, what it must acknowledge: the other's
	// SYN + 1), wins the last window each advertised, unscaled (d's in
	// bits 16*d..16*d+15). Atomic: a RST checks the other direction's.
	ack  [2]atomic.Uint32
	wins atomic.Uint32
}

// entryCold is the rest of a connection, what only creating, deleting,
// scanning and listing it use (and a counter's carry, once in 64k packets
// or 4 GB). kind, created and the carries follow the rules of entry's
// keys and per-direction fields; gen and stripes are atomic.
type entryCold struct {
	gen     atomic.Uint32 // incarnation: odd while live
	stripes atomic.Uint32 // stripe of keys[0]<<16 | stripe of keys[1]
	created uint32        // seconds
	pktsHi  [2]uint32     // carries of entry.pkts
	bytesHi [2]uint32     // carries of entry.bytes
	kind    uint8
}

// count adds a packet of n bytes (an IP packet: less than 64 KiB) to
// direction d of e (cold is e's).
func (e *entry) count(cold *entryCold, d int, n uint64) {
	b := e.bytes[d] + uint32(n)
	if b < e.bytes[d] {
		cold.bytesHi[d]++
	}
	e.bytes[d] = b
	if e.pkts[d]++; e.pkts[d] == 0 {
		cold.pktsHi[d]++
	}
}

// packets returns e's packet counts (cold is e's).
func (e *entry) packets(cold *entryCold) [2]uint64 {
	return [2]uint64{uint64(cold.pktsHi[0])<<16 | uint64(e.pkts[0]), uint64(cold.pktsHi[1])<<16 | uint64(e.pkts[1])}
}

// byteCounts returns e's byte counts (cold is e's).
func (e *entry) byteCounts(cold *entryCold) [2]uint64 {
	return [2]uint64{uint64(cold.bytesHi[0])<<32 | uint64(e.bytes[0]), uint64(cold.bytesHi[1])<<32 | uint64(e.bytes[1])}
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
	// pick is the state of the generator that picks a free slot at
	// random (under allocMu): live entries spread evenly over the slab,
	// so that every window an eviction scans holds its share of them.
	pick uint64
	// next is the free slot the next alloc takes, picked (and its
	// lines prefetched) by the alloc before, when hasNext.
	next    uint32
	hasNext bool

	count                    atomic.Int64
	sweepAt, evictAt         atomic.Uint64
	inserted, evicted, swept atomic.Uint64
	failed, limited          atomic.Uint64

	// The connections not assured yet — what a flood makes — in all,
	// opened from the WAN, and per originator address (by hash bucket;
	// LAN hosts and WAN addresses apart): the caps of limits are checked
	// against them.
	unassured, inbound atomic.Int64
	perSource          [2][sourceBuckets]atomic.Int32 // [0] LAN hosts, [1] WAN addresses
}

// sourceBuckets is how many buckets count the unassured connections per
// originator address of a side; addresses that share a bucket share its
// cap, so the count errs on the safe side. The bucket is a keyed hash of
// the address (the table's seed): which addresses share one cannot be
// computed from outside, so spoofed sources cannot be picked to fill a
// chosen remote's bucket and lock it out.
const sourceBuckets = 4096

func (t *table) sourceBucket(a uint32) uint32 {
	return uint32(t.hash(key{a: uint64(a), b: 0x5eed}) >> (64 - 12))
}

// sourceCount is the count of unassured connections opened by src: a
// WAN address when inbound, else a LAN host.
func (t *table) sourceCount(src uint32, inbound bool) *atomic.Int32 {
	side := 0
	if inbound {
		side = 1
	}
	return &t.perSource[side][t.sourceBucket(src)]
}

// unassure counts a new unassured connection of originator src; assured
// undoes it (the connection became assured, or went while unassured).
func (t *table) unassure(src uint32, inbound bool) {
	t.unassured.Add(1)
	if inbound {
		t.inbound.Add(1)
	}
	t.sourceCount(src, inbound).Add(1)
}

func (t *table) assured(src uint32, inbound bool) {
	t.unassured.Add(-1)
	if inbound {
		t.inbound.Add(-1)
	}
	t.sourceCount(src, inbound).Add(-1)
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
		pick:    seed,
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
	insLimit
)

// insert adds a connection with the given keys, kind, state and deadline,
// within the caps of lim. The first packet (of bytes IP bytes) is counted
// in the original direction.
func (t *table) insert(keys [2]key, kind uint8, state, sec, deadline uint32, bytes uint64, lim *limits) (uint32, insertErr) {
	src, inbound := keys[0].src(), kind == kindDNAT
	cap := lim.perHost
	if inbound {
		cap = lim.perRemote
		state |= flagInbound
	}
	// Past its cap, a source's new connection takes the place of one of
	// its own unassured ones: a busy host recycles its own, it does not
	// crowd out the others'.
	for n := 0; int64(t.sourceCount(src, inbound).Load()) >= cap; n++ {
		if n == 4 || !t.evict(sec, evictableTiers, src, evictWindow, 0) {
			t.limited.Add(1)
			return 0, insLimit
		}
	}
	// Past the inbound cap, a new connection from the WAN takes the place
	// of an unassured one from the WAN (or of an expired one).
	for n := 0; inbound && t.inbound.Load() >= lim.inbound; n++ {
		if n == 4 || !t.evict(sec, 1, 0, inboundChunk, int(min(inboundSample, lim.inbound))) {
			t.limited.Add(1)
			return 0, insLimit
		}
	}
	h := [2]uint64{t.hash(keys[0]), t.hash(keys[1])}
	t.prefetchKeys(h) // while a full table evicts
	for range 4 {
		if t.count.Load() >= int64(len(t.entries)) && !t.evictFull(sec) {
			break
		}
		idx, err := t.tryInsert(keys, h, kind, state, sec, deadline, bytes)
		switch err {
		case insOK:
			t.inserted.Add(1)
			t.unassure(src, inbound)
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
	e.pkts, c.pktsHi = [2]uint16{1, 0}, [2]uint32{}
	e.bytes, c.bytesHi = [2]uint32{uint32(bytes), 0}, [2]uint32{}
	e.ack[0].Store(0)
	e.ack[1].Store(0)
	e.wins.Store(0)
	c.stripes.Store(s0<<16 | s1)
	c.gen.Add(1)
	st0.add(h[0], idx, 0)
	st1.add(h[1], idx, 1)
	t.unlock2(s0, s1)
	return idx, insOK
}

// alloc takes a free slot, one picked at random: handing out the slots
// freed last (or the lowest) would pack the live entries into a corner of
// the slab, and evict, which scans a window from a cursor going round
// the slab, would mostly find free slots where it looks.
func (t *table) alloc() (uint32, bool) {
	t.allocMu.Lock()
	if !t.hasNext && !t.pickNext() {
		t.allocMu.Unlock()
		return 0, false
	}
	idx := t.next
	// The next insert's slot is picked now, and its entry's lines asked
	// for, so that they are in the cache when that insert writes them:
	// fresh slots are random, so each was two cache misses
	// (docs/dataplane.md, Measured).
	t.hasNext = t.pickNext()
	t.allocMu.Unlock()
	t.count.Add(1)
	return idx, true
}

// pickNext takes a random slot off the free list into t.next and
// prefetches its entry and cold part; false when the list is empty. The
// caller holds allocMu.
func (t *table) pickNext() bool {
	n := len(t.free)
	if n == 0 {
		return false
	}
	// The draw is one pick ahead too: free[hi] is a random line of a
	// large list. The list is a little shorter now than when it was
	// drawn, so the draw is scaled to it.
	hi, _ := bits.Mul64(t.pick, uint64(n))
	t.next = t.free[hi]
	t.free[hi] = t.free[n-1]
	t.free = t.free[:n-1]
	prefetchConn(&t.entries[t.next], &t.cold[t.next])
	t.pick = t.pick*6364136223846793005 + 1442695040888963407 // Knuth's MMIX LCG
	if n > 1 {
		ahead, _ := bits.Mul64(t.pick, uint64(n-1))
		prefetchSlot(&t.free[ahead])
	}
	return true
}

func (t *table) release(idx uint32) {
	t.allocMu.Lock()
	t.free = append(t.free, idx)
	t.allocMu.Unlock()
	t.count.Add(-1)
}
