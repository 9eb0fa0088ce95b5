package rules

// Cache is an exact-match flow cache in front of a Table: a two-way
// set-associative array of (key, table generation, verdict). Each worker
// owns one, so there are no shared writes; it is not safe for concurrent
// use. Entries of another table (another generation) never hit, so
// swapping tables needs no flush.
type Cache struct {
	slots        []cacheSlot // pairs: slots[2i] is the newer of set i
	setMask      uint64
	hits, misses uint64
}

type cacheSlot struct {
	key  packed
	gen  uint64
	meta uint64
}

// DefaultCacheSize is the number of cache entries NewCache(0) makes.
const DefaultCacheSize = 4096

// NewCache returns a cache of size entries (rounded up to a power of two,
// at least 2; 0 means DefaultCacheSize). An entry is 80 bytes.
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	n := 2
	for n < size {
		n <<= 1
	}
	return &Cache{slots: make([]cacheSlot, n), setMask: uint64(n/2 - 1)}
}

// Lookup returns t.Lookup(k), from the cache when it can. A table without
// rules has only its policies to give: that needs no cache, and counts as
// neither hit nor miss.
func (c *Cache) Lookup(t *Table, k *Key) Verdict {
	if len(t.subs) == 0 {
		return t.verdict(0, k.Chain)
	}
	var p packed
	k.pack(&p)
	h := hashWords((*[8]uint64)(&p), len(p))
	set := c.slots[(h&c.setMask)*2:][:2]
	for i := range set {
		if s := &set[i]; s.gen == t.gen && sameKey(&s.key, &p) {
			c.hits++
			return t.verdict(s.meta, k.Chain)
		}
	}
	c.misses++
	m := t.lookupPacked(&p)
	// The new entry goes first; the older one moves to the second way.
	set[1] = set[0]
	set[0] = cacheSlot{key: p, gen: t.gen, meta: m}
	return t.verdict(m, k.Chain)
}

func sameKey(a, b *packed) bool {
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] &&
		a[4] == b[4] && a[5] == b[5] && a[6] == b[6] && a[7] == b[7]
}

// Stats returns the number of hits and misses so far. Only the owner may
// call it.
func (c *Cache) Stats() (hits, misses uint64) { return c.hits, c.misses }
