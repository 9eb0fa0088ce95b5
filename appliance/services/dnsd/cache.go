package dnsd

import (
	"sync"
	"time"
)

// cacheKey names one cached answer: the question and the request flags
// that change what an upstream returns.
type cacheKey struct {
	name  string // canonical: lowercase, fully qualified
	qtype uint16
	flags uint8 // keyDO | keyCD
}

const (
	keyDO uint8 = 1 << iota // DNSSEC records wanted (EDNS DO bit)
	keyCD                   // checking disabled
)

// answer is a normalized upstream response (see normalize): packed, its
// TTLs as they were at at. ttl is how many whole seconds it may be served
// from the cache; 0 means it may not be.
type answer struct {
	wire []byte
	at   time.Time
	ttl  uint32
}

// remaining is the whole seconds an answer still has at now, and whether it
// is still fresh.
func (a answer) remaining(now time.Time) (elapsed uint32, fresh bool) {
	d := now.Sub(a.at)
	if d < 0 {
		d = 0
	}
	e := d / time.Second
	if e >= time.Duration(a.ttl) {
		return uint32(min(e, 1<<32-1)), false
	}
	return uint32(e), true
}

// entryOverhead approximates the bytes an entry costs beyond its wire
// answer and name: the map slot, the entry and the slice headers.
const entryOverhead = 160

type entry struct {
	key        cacheKey
	ans        answer
	size       int
	prev, next *entry
}

// cache is a least-recently-used map of answers bounded in entries and in
// bytes. One mutex guards it: its critical sections are a map access and
// a few pointer moves.
type cache struct {
	mu         sync.Mutex
	m          map[cacheKey]*entry
	lru        entry // sentinel: lru.next is the most recently used
	bytes      int
	maxEntries int
	maxBytes   int
	gen        uint64 // counts flushes; a put from before a flush is dropped
}

func newCache(entries, bytes int) *cache {
	c := &cache{m: make(map[cacheKey]*entry), maxEntries: entries, maxBytes: bytes}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// get returns the fresh answer for k. An expired one is removed.
func (c *cache) get(k cacheKey, now time.Time) (answer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[k]
	if e == nil {
		return answer{}, false
	}
	if _, fresh := e.ans.remaining(now); !fresh {
		c.remove(e)
		return answer{}, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.ans, true
}

// generation returns the flush count, to be handed back to put.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put stores a for k unless the cache was flushed since gen was read, the
// answer may not be cached, or it alone is larger than the byte bound.
func (c *cache) put(k cacheKey, a answer, gen uint64) {
	size := len(a.wire) + len(k.name) + entryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || a.ttl == 0 || size > c.maxBytes || c.maxEntries == 0 {
		return
	}
	if old := c.m[k]; old != nil {
		c.remove(old)
	}
	e := &entry{key: k, ans: a, size: size}
	c.m[k] = e
	c.pushFront(e)
	c.bytes += size
	c.evict()
}

// flush drops every entry and invalidates puts of answers fetched before.
func (c *cache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = make(map[cacheKey]*entry)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.bytes = 0
	c.gen++
}

// resize sets the bounds, evicting what no longer fits.
func (c *cache) resize(entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxEntries, c.maxBytes = entries, bytes
	c.evict()
}

// size returns the number of entries and their bytes.
func (c *cache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

func (c *cache) evict() {
	for len(c.m) > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.lru.prev)
	}
}

func (c *cache) remove(e *entry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.bytes -= e.size
}

func (c *cache) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *cache) pushFront(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
