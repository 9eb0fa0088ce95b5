package nat

import "sync/atomic"

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

// lookup finds the connection of key k: when ok, its stripe st is locked
// and the caller unlocks it.
func (t *table) lookup(k key) (st *stripe, idx uint32, dir int, ok bool) {
	h := t.hash(k)
	st = &t.stripes[t.stripeOf(h)]
	st.mu.Lock()
	if idx, dir, _, ok = t.find(st, k, h); !ok {
		st.mu.Unlock()
	}
	return st, idx, dir, ok
}
