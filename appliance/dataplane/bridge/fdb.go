// Package bridge is the learning bridge's forwarding database: MAC (and VLAN) to port, with aging, static entries and a fixed capacity.
package bridge

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// Port identifies a bridge port. 0 is "no port".
type Port = uint16

// DefaultAgingTime is how long a learned entry lives without being seen
// (IEEE 802.1D's and Linux's default).
const DefaultAgingTime = 300 * time.Second

// DefaultCapacity is the default number of entries.
const DefaultCapacity = 8192

// MaxCapacity bounds Options.Capacity (4 Mi entries, 256 MiB of buckets).
const MaxCapacity = 1 << 22

// FullPolicy says what learning does when the table (or the bucket a MAC
// hashes to) is full.
type FullPolicy uint8

const (
	// EvictOldest replaces the least recently seen dynamic entry of the
	// MAC's bucket that was never seen again after it was learned. The
	// table stays current (a station that moved in after the table
	// filled is learned), and a flood of forged source MACs, each seen
	// once, churns only its own entries: stations that talk keep theirs.
	// When the MAC's bucket holds no such entry, the MAC is refused as
	// under Refuse.
	EvictOldest FullPolicy = iota
	// Refuse keeps the existing entries and does not learn the new MAC:
	// its frames are still forwarded and frames to it are flooded
	// (counted in Stats.Refused). This protects learned stations from a
	// MAC flood.
	Refuse
)

// Options configure an FDB. Zero values mean the defaults.
type Options struct {
	// Capacity is the most entries the table holds, static ones
	// included (default DefaultCapacity). The buckets are sized for at
	// most 50% load at capacity so that a full bucket is rare.
	Capacity int
	// AgingTime is the lifetime of a learned entry that is not seen
	// again (default DefaultAgingTime). Negative disables aging.
	AgingTime time.Duration
	// Full is the policy when there is no room for a new MAC.
	Full FullPolicy
	// SharedVLAN keys entries by MAC alone (shared VLAN learning); by
	// default each VLAN has its own table (independent VLAN learning), so
	// one MAC may sit on different ports in different VLANs.
	SharedVLAN bool
}

// FDB is the forwarding database. Lookups and refreshes of known entries
// take no lock and write nothing shared; learning a new MAC (or a move)
// locks only the MAC's bucket. Nothing allocates after New. All methods
// are safe for concurrent use.
//
// Times are nanoseconds of a monotonic clock chosen by the caller (the
// dataplane passes the time since it started), read once per batch.
type FDB struct {
	buckets []bucket
	mask    uint64
	seed    uint64
	limit   int64
	shared  bool

	full      atomic.Uint32 // a FullPolicy
	agingMs   atomic.Int64  // <= 0: no aging
	refreshMs atomic.Int64  // a fresh entry is rewritten at most this often

	_       [64]byte
	n       atomic.Int64  // valid entries
	evictAt atomic.Uint64 // evictElsewhere's cursor
	// counters touched only on the slow (locked) path
	static, learned, moves, expired, evicted, refused, conflicts atomic.Int64
}

// New returns an empty FDB.
func New(opts Options) (*FDB, error) {
	c := opts.Capacity
	switch {
	case c == 0:
		c = DefaultCapacity
	case c < 0 || c > MaxCapacity:
		return nil, fmt.Errorf("bridge: capacity %d outside 1..%d", c, MaxCapacity)
	}
	if opts.Full != EvictOldest && opts.Full != Refuse {
		return nil, fmt.Errorf("bridge: unknown full policy %d", opts.Full)
	}
	nb := 1
	for nb*ways < 2*c {
		nb <<= 1
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("bridge: hash seed: %w", err)
	}
	t := &FDB{
		buckets: make([]bucket, nb),
		mask:    uint64(nb - 1),
		seed:    binary.LittleEndian.Uint64(seed[:]),
		limit:   int64(c),
		shared:  opts.SharedVLAN,
	}
	aging := opts.AgingTime
	if aging == 0 {
		aging = DefaultAgingTime
	}
	t.SetAgingTime(aging)
	t.full.Store(uint32(opts.Full))
	return t, nil
}

// SetFullPolicy changes what learning does when there is no room; the
// entries stay.
func (t *FDB) SetFullPolicy(p FullPolicy) error {
	if p != EvictOldest && p != Refuse {
		return fmt.Errorf("bridge: unknown full policy %d", p)
	}
	t.full.Store(uint32(p))
	return nil
}

// String names the policy as the config does.
func (p FullPolicy) String() string {
	switch p {
	case EvictOldest:
		return "evict"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("FullPolicy(%d)", uint8(p))
}

// SetAgingTime changes the aging time; negative disables aging. Entries
// are judged by the new time from now on.
func (t *FDB) SetAgingTime(d time.Duration) {
	ms := d.Milliseconds()
	if d < 0 {
		ms = -1
	} else if ms == 0 {
		ms = 1
	}
	t.agingMs.Store(ms)
	// Refresh an entry's time at most once per second, and often enough
	// that a busy station never ages out (a quarter of the aging time).
	r := maxRefresh.Milliseconds()
	if ms >= 0 {
		r = min(r, ms/4)
	}
	t.refreshMs.Store(r)
}

// AgingTime returns the current aging time (negative: none).
func (t *FDB) AgingTime() time.Duration {
	ms := t.agingMs.Load()
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// Capacity returns the most entries the table holds.
func (t *FDB) Capacity() int { return int(t.limit) }

// Len returns the number of entries (expired ones not yet swept included).
func (t *FDB) Len() int { return int(t.n.Load()) }
