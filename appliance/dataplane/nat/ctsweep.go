package nat

// Removal conditions, checked under the entry's locks.
type rmWhy uint8

const (
	rmAny     rmWhy = iota // delete unconditionally
	rmExpired              // only if expired
	// rmExpired+n: only if its evictTier is at most n.
)

// evictTier ranks a live entry for eviction, the first to go first: 0
// expired; 1 opened from the WAN and not assured (a SYN or UDP flood
// through a port forward); 2 opened from the LAN and unreplied, or TCP in
// TIME_WAIT or CLOSE; 3 opened from the LAN, replied, not assured (a DNS
// exchange); never (neverEvicted) an assured connection that is not
// closed, as Linux early-drops only what is not assured.
func evictTier(state, deadline, sec uint32) int {
	st := state & stateMask
	closed := st == stTimeWait || st == stClose
	switch {
	case expired(deadline, sec):
		return 0
	case state&flagInbound != 0 && state&flagAssured == 0:
		return 1
	case state&flagReplied == 0 || closed:
		return 2
	case state&flagAssured == 0:
		return 3
	}
	return neverEvicted
}

// The tiers of evictTier.
const (
	evictableTiers = 3
	neverEvicted   = 4
)

// remove deletes entry idx if it is still incarnation gen and why allows.
func (t *table) remove(idx uint32, gen uint32, why rmWhy, sec uint32) bool {
	e, c := &t.entries[idx], &t.cold[idx]
	s0, s1, ok := t.lockEntry(idx, gen)
	if !ok {
		return false
	}
	state := e.state.Load()
	if why != rmAny && evictTier(state, e.deadline.Load(), sec) > int(why)-int(rmExpired) {
		t.unlock2(s0, s1)
		return false
	}
	keys, kind := e.keys, c.kind
	h := [2]uint64{t.hash(keys[0]), t.hash(keys[1])}
	t.prefetchKeys(h) // both finds' misses at once
	if state&flagAssured == 0 {
		t.assured(keys[0].src(), state&flagInbound != 0) // it goes unassured
	}
	for d, s := range [2]uint32{s0, s1} {
		st := &t.stripes[s]
		_, _, pos, ok := t.find(st, keys[d], h[d])
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

// lockEntry locks both stripes of entry idx (s0 its original direction's,
// s1 its reply's; unlock2 unlocks them) if it is still incarnation gen, a
// live one. ok is false, and nothing locked, when it is not.
func (t *table) lockEntry(idx, gen uint32) (s0, s1 uint32, ok bool) {
	c := &t.cold[idx]
	sw := c.stripes.Load()
	if gen&1 == 0 || c.gen.Load() != gen {
		return 0, 0, false
	}
	s0, s1 = sw>>16, sw&0xffff
	t.lock2(s0, s1)
	if c.gen.Load() != gen || c.stripes.Load() != sw {
		t.unlock2(s0, s1)
		return 0, 0, false
	}
	return s0, s1, true
}

// evictWindow is how many slots an insert past a source's cap examines,
// and an insert into a full table at most.
const evictWindow = 1024

// fullSample is how many slots an insert into a full table examines
// first. The live entries are spread over the slab at random (alloc), so
// a small window holds a fair sample of them: when a burst of new flows
// filled the table, nearly every slot is evictable and the insert costs
// fullSample cache misses, not evictWindow (BenchmarkNewConnsFullTable
// in docs/dataplane.md). Only when the sample holds nothing evictable is
// the rest of evictWindow scanned.
const fullSample = 16

// evictFull frees an entry for an insert into a full table: the best of
// a small sample, else of the whole evictWindow.
func (t *table) evictFull(sec uint32) bool {
	return t.evict(sec, evictableTiers, 0, fullSample, 0) || t.evict(sec, evictableTiers, 0, evictWindow-fullSample, 0)
}

// An insert past the inbound cap compares inboundSample unassured inbound
// entries (fewer if the cap is lower) and replaces the oldest, scanning
// inboundChunk slots at a time from the cursor until it has met them.
// Counting what it met, rather than scanning a fixed window, makes every
// entry as likely to be compared wherever it sits, so the live entries
// stay spread over the slab: a fixed window that loses one entry per
// pass whatever it holds drifts towards empty windows.
const (
	inboundSample = 16
	inboundChunk  = 64
)

// evict frees one entry of tier maxTier or lower (evictTier), opened by
// src (0: anyone): among the entries from a rotating cursor — the next
// window slots or, with sample > 0, as many windows as it takes to meet
// sample such entries (at most the whole table) — the first expired one,
// else one of the lowest tier, the closest to expiry (the oldest of its
// kind). It reports false when it found none.
func (t *table) evict(sec uint32, maxTier int, src uint32, window uint64, sample int) bool {
	n := uint64(len(t.entries))
	w := min(n, window)
	best, bestTier, bestGen, bestDL, bestMix := uint32(0), maxTier+1, uint32(0), uint32(0), uint64(0)
	met := 0
scan:
	for scanned := uint64(0); scanned < n && (scanned == 0 || met < sample); scanned += w {
		start := t.evictAt.Add(w) - w
		for i := range w {
			idx := uint32((start + i) % n)
			e := &t.entries[idx]
			g := t.cold[idx].gen.Load()
			if g&1 == 0 {
				if maxTier == evictableTiers && src == 0 {
					return true // a free slot appeared
				}
				continue
			}
			dl := e.deadline.Load()
			tier := evictTier(e.state.Load(), dl, sec)
			if tier > maxTier || src != 0 && !t.openedBy(idx, g, src) {
				continue
			}
			met++
			// Deadlines are in seconds: a flood makes thousands alike.
			// Among equals a hash of the slot and the call's cursor
			// picks, so that no position is preferred.
			mix := (uint64(idx) ^ start) * 0x9e3779b97f4a7c15
			if tier < bestTier || tier == bestTier && (int32(dl-bestDL) < 0 || dl == bestDL && mix < bestMix) {
				best, bestTier, bestGen, bestDL, bestMix = idx, tier, g, dl, mix
				if tier == 0 {
					break scan
				}
			}
		}
	}
	if bestTier > maxTier {
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

// openedBy reports whether entry idx, still incarnation gen, was opened
// by address src (its keys are read under its stripe locks).
func (t *table) openedBy(idx, gen, src uint32) bool {
	c := &t.cold[idx]
	sw := c.stripes.Load()
	if c.gen.Load() != gen {
		return false
	}
	s0, s1 := sw>>16, sw&0xffff
	t.lock2(s0, s1)
	ok := c.gen.Load() == gen && c.stripes.Load() == sw && t.entries[idx].keys[0].src() == src
	t.unlock2(s0, s1)
	return ok
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
