package rules

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
)

// Set holds the current Table behind an atomic pointer for the workers,
// and everything that outlives one table: per-rule counters, the log
// rings, the reject and log rate limiters.
//
// Counters are per worker: each worker adds to its own shard with atomic
// adds that are never contended (one writer), and Counters sums the shards.
// Shared atomic counters would bounce a cache line between the cores of
// workers that hit the same rule (see BenchmarkCount). A rule keeps its
// counter slot across Swap when a rule with the same chain, match and
// verdict is in the new table, wherever it moved; slots of removed rules
// are reused only once every worker has moved to a newer table.
type Set struct {
	cur     atomic.Pointer[binding]
	workers []*Worker

	logLimit, rejectLimit *Limiter

	mu         sync.Mutex // serializes Swap and counter reads
	seq        uint64
	ids        map[string]uint32 // rule identity → counter slot
	nslots     uint32
	free       []uint32
	quarantine []retiredSlot
	chunks     [][]*counterChunk // per worker

	logMu sync.Mutex // one log reader at a time
	next  int        // worker to read logs from first
}

type retiredSlot struct {
	slot uint32
	seq  uint64 // first binding without it
}

// binding is a table with its counter slots, as the workers see it.
type binding struct {
	seq   uint64
	t     *Table
	slots []uint32          // per rule: counter slot + 1, 0 without counter
	dirs  [][]*counterChunk // per worker: chunks of counter slots
}

const chunkSize = 256

type counterChunk [chunkSize]counterEntry

type counterEntry struct {
	packets, bytes atomic.Uint64
	last           atomic.Int64
}

func (e *counterEntry) add(bytes int, now int64) {
	e.packets.Add(1)
	e.bytes.Add(uint64(bytes))
	if e.last.Load() < now {
		e.last.Store(now)
	}
}

func (e *counterEntry) reset() {
	e.packets.Store(0)
	e.bytes.Store(0)
	e.last.Store(0)
}

// SetOptions configure a Set. Zero values mean the defaults.
type SetOptions struct {
	// Workers is the number of Worker handles (one per dataplane worker).
	Workers int
	// CacheSize is the number of flow cache entries per worker (default
	// DefaultCacheSize); negative disables the cache.
	CacheSize int
	// LogRing is the number of log records buffered per worker (default 256).
	LogRing int
	// LogRate and LogBurst limit log records, over all workers (default
	// 10 per second, bursts of 20).
	LogRate  float64
	LogBurst int
	// RejectRate and RejectBurst limit reject answers, over all workers
	// (default 1000 per second, bursts of 100); rejects over the limit
	// become drops.
	RejectRate  float64
	RejectBurst int
}

// NewSet returns a Set whose table is empty (every chain accepts).
func NewSet(opts SetOptions) *Set {
	n := max(opts.Workers, 1)
	logRing := opts.LogRing
	if logRing <= 0 {
		logRing = 256
	}
	s := &Set{
		logLimit:    NewLimiter(cmp.Or(opts.LogRate, 10), cmp.Or(opts.LogBurst, 20)),
		rejectLimit: NewLimiter(cmp.Or(opts.RejectRate, 1000), cmp.Or(opts.RejectBurst, 100)),
		ids:         map[string]uint32{},
		chunks:      make([][]*counterChunk, n),
	}
	for i := range n {
		w := &Worker{set: s, id: i, logs: newLogRing(logRing)}
		if opts.CacheSize >= 0 {
			w.cache = NewCache(opts.CacheSize)
		}
		s.workers = append(s.workers, w)
	}
	empty, err := Compile(&Ruleset{}, Options{})
	if err != nil {
		panic(fmt.Sprintf("rules: compiling the empty rule set: %v", err))
	}
	s.Swap(empty)
	return s
}

// Table returns the current table.
func (s *Set) Table() *Table { return s.cur.Load().t }

// Worker returns the handle of worker i (0 <= i < SetOptions.Workers).
func (s *Set) Worker(i int) *Worker { return s.workers[i] }

// Swap makes t the current table. Workers pick it up on their next lookup;
// forwarding never stops. Counters of rules that t keeps carry over.
func (s *Set) Swap(t *Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.reclaim()

	rules := t.Rules()
	slots := make([]uint32, len(rules))
	ids := make(map[string]uint32, len(s.ids))
	var buf []byte
	for i := range rules {
		if !rules[i].Counter {
			continue
		}
		buf = appendIdentity(buf[:0], &rules[i], true)
		id := string(buf)
		slot, ok := s.ids[id]
		if ok {
			delete(s.ids, id)
		} else {
			slot = s.alloc()
		}
		ids[id] = slot
		slots[i] = slot + 1
	}
	for _, slot := range s.ids {
		s.quarantine = append(s.quarantine, retiredSlot{slot, s.seq})
	}
	s.ids = ids

	dirs := make([][]*counterChunk, len(s.workers))
	for w := range dirs {
		dirs[w] = s.chunks[w][:len(s.chunks[w]):len(s.chunks[w])]
	}
	s.cur.Store(&binding{seq: s.seq, t: t, slots: slots, dirs: dirs})
}

// reclaim moves quarantined slots that no worker can still reach to the
// free list, zeroed. A worker publishes the binding it uses before it
// counts with it, so a worker that published seq >= q.seq no longer
// touches slots retired at q.seq.
func (s *Set) reclaim() {
	oldest := s.seq
	for _, w := range s.workers {
		oldest = min(oldest, w.seen.Load())
	}
	kept := s.quarantine[:0]
	for _, q := range s.quarantine {
		if q.seq > oldest {
			kept = append(kept, q)
			continue
		}
		for w := range s.workers {
			s.entry(w, q.slot).reset()
		}
		s.free = append(s.free, q.slot)
	}
	s.quarantine = kept
}

func (s *Set) entry(w int, slot uint32) *counterEntry {
	return &s.chunks[w][slot/chunkSize][slot%chunkSize]
}

func (s *Set) alloc() uint32 {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	slot := s.nslots
	s.nslots++
	if int(slot/chunkSize) == len(s.chunks[0]) {
		for w := range s.chunks {
			s.chunks[w] = append(s.chunks[w], new(counterChunk))
		}
	}
	return slot
}

// RuleCounter is the counter of one rule of the current table, summed over
// the workers.
type RuleCounter struct {
	Rule           int // index in Table.Rules
	Packets, Bytes uint64
	LastHit        int64 // the now of the last counted lookup, 0 if none
}

// Counters returns the current table and the counters of its rules that
// have the counter flag, in rule order.
func (s *Set) Counters() (*Table, []RuleCounter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.cur.Load()
	var out []RuleCounter
	for i, slot := range b.slots {
		if slot == 0 {
			continue
		}
		c := RuleCounter{Rule: i}
		for w := range s.workers {
			e := s.entry(w, slot-1)
			c.Packets += e.packets.Load()
			c.Bytes += e.bytes.Load()
			c.LastHit = max(c.LastHit, e.last.Load())
		}
		out = append(out, c)
	}
	return b.t, out
}

// PolicyCounter returns how many frames (and bytes) chain c's policy
// decided, summed over the workers, since the Set was made.
func (s *Set) PolicyCounter(c Chain) (packets, bytes uint64) {
	if c >= numChains {
		return 0, 0
	}
	for _, w := range s.workers {
		packets += w.policy[c].packets.Load()
		bytes += w.policy[c].bytes.Load()
	}
	return packets, bytes
}

// RejectsLimited returns how many rejects the rate limit turned into drops.
func (s *Set) RejectsLimited() uint64 {
	var n uint64
	for _, w := range s.workers {
		n += w.rejectsLimited.Load()
	}
	return n
}

// Worker is one dataplane worker's handle: its flow cache, counter shard
// and log ring. Its methods must be called from that worker only.
type Worker struct {
	_       [64]byte // keep other allocations off this worker's lines
	set     *Set
	id      int
	cache   *Cache
	lastSeq uint64
	seen    atomic.Uint64 // published lastSeq

	policy         [numChains]counterEntry
	rejectsLimited atomic.Uint64
	logs           *logRing
	_              [64]byte
}

// Lookup returns the verdict for k (a frame of bytes bytes at time now, in
// Unix nanoseconds, typically read once per batch), counts it and logs it
// when the rule says so. A reject over the Set's reject limit is returned
// as Drop. It does not allocate.
func (w *Worker) Lookup(k *Key, bytes int, now int64) Verdict {
	b := w.sync()
	var v Verdict
	if w.cache != nil {
		v = w.cache.Lookup(b.t, k)
	} else {
		v = b.t.Lookup(k)
	}
	if v.Rule < 0 {
		if k.Chain < numChains {
			w.policy[k.Chain].add(bytes, now)
		}
	} else {
		if v.Counter {
			slot := b.slots[v.Rule] - 1
			b.dirs[w.id][slot/chunkSize][slot%chunkSize].add(bytes, now)
		}
		if v.Log && w.set.logLimit.Allow(now) {
			w.logs.push(now, k, b.t.gen, v, bytes, w.id)
		}
	}
	if v.Action == Reject && !w.set.rejectLimit.Allow(now) {
		v.Action = Drop
		w.rejectsLimited.Add(1)
	}
	return v
}

// Sync makes the worker pick up the current table. Lookup does this
// itself; an idle worker should call Sync now and then (e.g. on a poll
// timeout) so that counter slots of removed rules can be reused.
func (w *Worker) Sync() { w.sync() }

func (w *Worker) sync() *binding {
	b := w.set.cur.Load()
	if b.seq != w.lastSeq {
		w.lastSeq = b.seq
		w.seen.Store(b.seq)
	}
	return b
}

// CacheStats returns the worker's flow cache hits and misses. Only the
// worker may call it.
func (w *Worker) CacheStats() (hits, misses uint64) {
	if w.cache == nil {
		return 0, 0
	}
	return w.cache.Stats()
}
