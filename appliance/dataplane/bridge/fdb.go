// Package bridge is the learning bridge's forwarding database: MAC (and VLAN) to port, with aging, static entries and a fixed capacity.
package bridge

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
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
	// MAC's bucket. The table stays current (a station that moved in
	// after the table filled is learned), but a flood of forged source
	// MACs churns out idle entries, which are flooded until relearned.
	// When the table is at capacity and the MAC's bucket holds no dynamic
	// entry, the MAC is refused as under Refuse.
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

// Stats are the table's counters.
type Stats struct {
	Entries   int    `json:"entries"`
	Static    int    `json:"static"`
	Capacity  int    `json:"capacity"`
	Learned   uint64 `json:"learned"`   // new entries learned
	Moves     uint64 `json:"moves"`     // a learned MAC seen on another port
	Expired   uint64 `json:"expired"`   // entries removed after AgingTime
	Evicted   uint64 `json:"evicted"`   // entries replaced because the table or bucket was full
	Refused   uint64 `json:"refused"`   // MACs not learned because the table or bucket was full
	Conflicts uint64 `json:"conflicts"` // a static MAC seen on another port (not moved)
}

// Entry is one FDB entry as listed for the dashboard.
type Entry struct {
	MAC    MAC           `json:"mac"`
	VLAN   uint16        `json:"vlan"`
	Port   Port          `json:"port"`
	Static bool          `json:"static"`
	Age    time.Duration `json:"age"` // since last seen; 0 for static entries
}

// MAC is an Ethernet address; its text form is 02:00:5e:10:00:01.
type MAC [6]byte

func (m MAC) String() string {
	const hex = "0123456789abcdef"
	var b [17]byte
	for i, v := range m {
		if i > 0 {
			b[i*3-1] = ':'
		}
		b[i*3], b[i*3+1] = hex[v>>4], hex[v&15]
	}
	return string(b[:])
}

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *MAC) UnmarshalText(b []byte) error {
	v, err := ParseMAC(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ParseMAC parses six colon- or dash-separated hex bytes.
func ParseMAC(s string) (MAC, error) {
	var m MAC
	if len(s) != 17 {
		return m, fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", s)
	}
	for i := range 6 {
		if i > 0 && s[i*3-1] != ':' && s[i*3-1] != '-' {
			return MAC{}, fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", s)
		}
		hi, ok1 := unhex(s[i*3])
		lo, ok2 := unhex(s[i*3+1])
		if !ok1 || !ok2 {
			return MAC{}, fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", s)
		}
		m[i] = hi<<4 | lo
	}
	return m, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// IsGroup reports whether m is a multicast or broadcast address.
func IsGroup(m *[6]byte) bool { return m[0]&1 != 0 }

// IsZero reports whether m is 00:00:00:00:00:00.
func IsZero(m *[6]byte) bool { return *m == [6]byte{} }

// Errors of the static entry API.
var (
	ErrInvalidMAC = errors.New("bridge: multicast or zero MAC cannot be an FDB entry")
	ErrFull       = errors.New("bridge: no room for the entry")
	ErrPort       = errors.New("bridge: port 0 is not a port")
)

// Layout of the packed words. A key word is the MAC (bits 0-47), the VLAN
// id (48-59) and a valid bit (63): 0 marks an empty slot. A value word is
// the last-seen time in milliseconds of the caller's clock (0-39, 34 years),
// the port (40-55) and the static bit (56).
const (
	keyValid   = 1 << 63
	seenBits   = 40
	seenMask   = 1<<seenBits - 1
	portShift  = 40
	staticBit  = 1 << 56
	ways       = 7 // entries per bucket: keys fill one cache line with the sequence word
	maxRefresh = time.Second
)

// bucket is a seqlocked group of entries: an odd seq means a writer is
// inside. Readers never write; they retry when seq changed under them.
// Every field is accessed atomically, so the race detector agrees.
type bucket struct {
	seq  atomic.Uint64
	keys [ways]atomic.Uint64
	vals [ways]atomic.Uint64
	_    [8]byte // 128 bytes: two cache lines
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
	full    FullPolicy
	shared  bool

	agingMs   atomic.Int64 // <= 0: no aging
	refreshMs atomic.Int64 // a fresh entry is rewritten at most this often

	_ [64]byte
	n atomic.Int64 // valid entries
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
		full:    opts.Full,
		shared:  opts.SharedVLAN,
	}
	aging := opts.AgingTime
	if aging == 0 {
		aging = DefaultAgingTime
	}
	t.SetAgingTime(aging)
	return t, nil
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

func (t *FDB) key(mac *[6]byte, vid uint16) uint64 {
	k := uint64(mac[0])<<40 | uint64(mac[1])<<32 | uint64(mac[2])<<24 | uint64(mac[3])<<16 | uint64(mac[4])<<8 | uint64(mac[5])
	if !t.shared {
		k |= uint64(vid&0xfff) << 48
	}
	return k | keyValid
}

func (t *FDB) bucket(k uint64) *bucket {
	hi, lo := bits.Mul64(k^t.seed, 0x9e3779b97f4a7c15)
	return &t.buckets[(hi^lo)&t.mask]
}

func msOf(now int64) int64 {
	if now <= 0 {
		return 0
	}
	return now / int64(time.Millisecond)
}

func seenOf(v uint64) int64 { return int64(v & seenMask) }
func portOf(v uint64) Port  { return Port(v >> portShift) }
func makeVal(p Port, ms int64, static bool) uint64 {
	v := uint64(p)<<portShift | uint64(ms)&seenMask
	if static {
		v |= staticBit
	}
	return v
}

// expiredAt reports whether value v is past its aging time at nowMs.
func (t *FDB) expiredAt(v uint64, nowMs int64) bool {
	if v&staticBit != 0 {
		return false
	}
	aging := t.agingMs.Load()
	return aging >= 0 && nowMs-seenOf(v) > aging
}

// read finds key k in b without locking and returns its slot and value.
func (b *bucket) read(k uint64) (slot int, v uint64) {
	for spins := 0; ; spins++ {
		s := b.seq.Load()
		if s&1 != 0 {
			if spins > 100 {
				runtime.Gosched()
			}
			continue
		}
		slot, v = -1, 0
		for i := range b.keys {
			if b.keys[i].Load() == k {
				slot, v = i, b.vals[i].Load()
				break
			}
		}
		if b.seq.Load() == s {
			return slot, v
		}
	}
}

func (b *bucket) lock() uint64 {
	for spins := 0; ; spins++ {
		s := b.seq.Load()
		if s&1 == 0 && b.seq.CompareAndSwap(s, s+1) {
			return s + 1
		}
		if spins > 100 {
			runtime.Gosched()
		}
	}
}

func (b *bucket) unlock(s uint64) { b.seq.Store(s + 1) }

// find returns the slot of k in a locked bucket, or -1.
func (b *bucket) find(k uint64) int {
	for i := range b.keys {
		if b.keys[i].Load() == k {
			return i
		}
	}
	return -1
}

// Lookup returns the port of mac in VLAN vid (ignored with SharedVLAN), if
// the table has a live entry. It does not lock, write or allocate.
func (t *FDB) Lookup(mac *[6]byte, vid uint16, now int64) (Port, bool) {
	k := t.key(mac, vid)
	slot, v := t.bucket(k).read(k)
	if slot < 0 || t.expiredAt(v, msOf(now)) {
		return 0, false
	}
	return portOf(v), true
}

// LearnResult says what Learn did.
type LearnResult uint8

// Learn results.
const (
	Known      LearnResult = iota // already known on this port, nothing written
	Refreshed                     // known on this port, last-seen time updated
	Learned                       // new entry
	Moved                         // known on another port, moved to this one
	NotLearned                    // invalid source, static elsewhere, or no room
)

// Learn records that mac (in VLAN vid) was seen on port at now. A known,
// recently refreshed entry costs one lock-free read. Group and zero
// addresses are never learned; a static entry never moves.
func (t *FDB) Learn(mac *[6]byte, vid uint16, port Port, now int64) LearnResult {
	if IsGroup(mac) || IsZero(mac) || port == 0 {
		return NotLearned
	}
	nowMs := msOf(now)
	k := t.key(mac, vid)
	b := t.bucket(k)
	if slot, v := b.read(k); slot >= 0 && portOf(v) == port {
		if v&staticBit != 0 || nowMs-seenOf(v) < t.refreshMs.Load() && !t.expiredAt(v, nowMs) {
			return Known
		}
	}
	s := b.lock()
	defer b.unlock(s)
	if i := b.find(k); i >= 0 {
		v := b.vals[i].Load()
		switch {
		case v&staticBit != 0:
			if portOf(v) == port {
				return Known
			}
			t.conflicts.Add(1)
			return NotLearned
		case portOf(v) != port:
			b.vals[i].Store(makeVal(port, nowMs, false))
			if t.expiredAt(v, nowMs) {
				t.learned.Add(1) // a stale entry elsewhere: this is a new sighting
				return Learned
			}
			t.moves.Add(1)
			return Moved
		}
		b.vals[i].Store(makeVal(port, nowMs, false))
		return Refreshed
	}
	i := t.place(b, nowMs, false)
	if i < 0 {
		t.refused.Add(1)
		return NotLearned
	}
	b.vals[i].Store(makeVal(port, nowMs, false))
	b.keys[i].Store(k)
	t.learned.Add(1)
	return Learned
}

// place picks a slot for a new key in the locked bucket b and accounts for
// it: an empty slot (if the table has room), an expired entry, or, when
// evicting is allowed (always for a static entry), the oldest dynamic
// entry. It returns -1 if there is no room.
func (t *FDB) place(b *bucket, nowMs int64, static bool) int {
	empty, oldest := -1, -1
	var oldestSeen int64
	for i := range b.keys {
		if b.keys[i].Load() == 0 {
			if empty < 0 {
				empty = i
			}
			continue
		}
		v := b.vals[i].Load()
		if v&staticBit != 0 {
			continue
		}
		if t.expiredAt(v, nowMs) {
			t.expired.Add(1)
			t.remove(b, i)
			if empty < 0 || i < empty {
				empty = i
			}
			continue
		}
		if oldest < 0 || seenOf(v) < oldestSeen {
			oldest, oldestSeen = i, seenOf(v)
		}
	}
	if empty >= 0 && t.reserve() {
		if static {
			t.static.Add(1)
		}
		return empty
	}
	if oldest >= 0 && (static || t.full == EvictOldest) {
		t.evicted.Add(1)
		if static {
			t.static.Add(1)
		}
		return oldest // the count stays: one entry replaces another
	}
	return -1
}

// reserve takes one entry of the capacity.
func (t *FDB) reserve() bool {
	for {
		n := t.n.Load()
		if n >= t.limit {
			return false
		}
		if t.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// remove clears slot i of a locked bucket.
func (t *FDB) remove(b *bucket, i int) {
	if b.vals[i].Load()&staticBit != 0 {
		t.static.Add(-1)
	}
	b.keys[i].Store(0)
	b.vals[i].Store(0)
	t.n.Add(-1)
}

// AddStatic adds (or replaces) a static entry: mac in VLAN vid is on port
// and never ages or moves. It may evict a dynamic entry of its bucket; it
// fails with ErrFull if the bucket holds only static entries or the table
// is at capacity with no dynamic entry to replace.
func (t *FDB) AddStatic(mac [6]byte, vid uint16, port Port) error {
	if IsGroup(&mac) || IsZero(&mac) {
		return fmt.Errorf("%w: %s", ErrInvalidMAC, MAC(mac))
	}
	if port == 0 {
		return ErrPort
	}
	k := t.key(&mac, vid)
	b := t.bucket(k)
	s := b.lock()
	defer b.unlock(s)
	if i := b.find(k); i >= 0 {
		if b.vals[i].Load()&staticBit == 0 {
			t.static.Add(1)
		}
		b.vals[i].Store(makeVal(port, 0, true))
		return nil
	}
	i := t.place(b, 0, true)
	if i < 0 {
		return fmt.Errorf("%w: static %s vlan %d", ErrFull, MAC(mac), vid)
	}
	b.vals[i].Store(makeVal(port, 0, true))
	b.keys[i].Store(k)
	return nil
}

// Delete removes the entry of mac in VLAN vid, static or not, and reports
// whether there was one.
func (t *FDB) Delete(mac [6]byte, vid uint16) bool {
	k := t.key(&mac, vid)
	b := t.bucket(k)
	s := b.lock()
	defer b.unlock(s)
	if i := b.find(k); i >= 0 {
		t.remove(b, i)
		return true
	}
	return false
}

// Flush removes entries matching the filter and returns how many: with
// port 0 every port, else only that port's; static entries only if
// withStatic.
func (t *FDB) Flush(port Port, withStatic bool) int {
	return t.sweep(func(v uint64) bool {
		return (port == 0 || portOf(v) == port) && (withStatic || v&staticBit == 0)
	}, false)
}

// Sweep removes expired entries and returns how many. The dataplane calls
// it about once a second; Lookup already ignores expired entries.
func (t *FDB) Sweep(now int64) int {
	nowMs := msOf(now)
	return t.sweep(func(v uint64) bool { return t.expiredAt(v, nowMs) }, true)
}

func (t *FDB) sweep(match func(v uint64) bool, expiry bool) int {
	n := 0
	for bi := range t.buckets {
		b := &t.buckets[bi]
		hit := false
		for i := range b.keys {
			if b.keys[i].Load() != 0 && match(b.vals[i].Load()) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		s := b.lock()
		for i := range b.keys {
			if b.keys[i].Load() != 0 && match(b.vals[i].Load()) {
				t.remove(b, i)
				n++
				if expiry {
					t.expired.Add(1)
				}
			}
		}
		b.unlock(s)
	}
	return n
}

// Entries appends the live entries to dst (reusing its storage) and returns
// it, in table order.
func (t *FDB) Entries(dst []Entry, now int64) []Entry {
	nowMs := msOf(now)
	var keys, vals [ways]uint64
	for bi := range t.buckets {
		b := &t.buckets[bi]
		for {
			s := b.seq.Load()
			if s&1 != 0 {
				runtime.Gosched()
				continue
			}
			for i := range b.keys {
				keys[i], vals[i] = b.keys[i].Load(), b.vals[i].Load()
			}
			if b.seq.Load() == s {
				break
			}
		}
		for i, k := range keys {
			if k == 0 || t.expiredAt(vals[i], nowMs) {
				continue
			}
			e := Entry{Port: portOf(vals[i]), Static: vals[i]&staticBit != 0}
			for j := range 6 {
				e.MAC[j] = byte(k >> (40 - 8*j))
			}
			if !t.shared {
				e.VLAN = uint16(k>>48) & 0xfff
			}
			if !e.Static {
				e.Age = time.Duration(max(nowMs-seenOf(vals[i]), 0)) * time.Millisecond
			}
			dst = append(dst, e)
		}
	}
	return dst
}

// Stats returns the table's counters.
func (t *FDB) Stats() Stats {
	return Stats{
		Entries:   int(t.n.Load()),
		Static:    int(t.static.Load()),
		Capacity:  int(t.limit),
		Learned:   uint64(t.learned.Load()),
		Moves:     uint64(t.moves.Load()),
		Expired:   uint64(t.expired.Load()),
		Evicted:   uint64(t.evicted.Load()),
		Refused:   uint64(t.refused.Load()),
		Conflicts: uint64(t.conflicts.Load()),
	}
}
