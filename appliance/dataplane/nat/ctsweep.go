package nat

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
