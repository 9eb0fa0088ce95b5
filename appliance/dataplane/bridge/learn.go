package bridge

import (
	"errors"
	"fmt"
)

// Errors of the static entry API.
var (
	ErrInvalidMAC = errors.New("bridge: multicast or zero MAC cannot be an FDB entry")
	ErrFull       = errors.New("bridge: no room for the entry")
	ErrPort       = errors.New("bridge: port 0 is not a port")
)

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
		if v&staticBit != 0 || v&activeBit != 0 && nowMs-seenOf(v) < t.refreshMs.Load() && !t.expiredAt(v, nowMs) {
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
		if v&activeBit == 0 && nowMs-seenOf(v) < t.refreshMs.Load() && !t.expiredAt(v, nowMs) {
			// Seen again soon after it was learned: the first repeat
			// marks the entry active and keeps its time.
			b.vals[i].Store(v | activeBit)
			return Known
		}
		nv := makeVal(port, nowMs, false)
		if !t.expiredAt(v, nowMs) {
			nv |= activeBit
		}
		b.vals[i].Store(nv)
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
// evicting is allowed, the oldest dynamic entry that was never seen again
// after it was learned (for a static entry: the oldest active one if there
// is no such). Learning never evicts an active entry, so a flood of forged
// sources churns only its own entries. It returns -1 if there is no room.
func (t *FDB) place(b *bucket, nowMs int64, static bool) int {
	empty, oldest, oldestActive := -1, -1, -1
	var oldestSeen, oldestActiveSeen int64
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
		switch {
		case v&activeBit != 0:
			if oldestActive < 0 || seenOf(v) < oldestActiveSeen {
				oldestActive, oldestActiveSeen = i, seenOf(v)
			}
		case oldest < 0 || seenOf(v) < oldestSeen:
			oldest, oldestSeen = i, seenOf(v)
		}
	}
	if oldest < 0 && static {
		oldest = oldestActive
	}
	if empty >= 0 && t.reserve() {
		if static {
			t.static.Add(1)
		}
		return empty
	}
	if oldest >= 0 && (static || FullPolicy(t.full.Load()) == EvictOldest) {
		t.evicted.Add(1)
		if static {
			t.static.Add(1)
		}
		return oldest // the count stays: one entry replaces another
	}
	// The table is full and this bucket holds nothing that may go (only
	// active stations and free slots): make room in another bucket, or
	// a newcomer whose bucket the flood never reaches is never learned.
	if empty >= 0 && !static && FullPolicy(t.full.Load()) == EvictOldest && t.evictElsewhere(b, nowMs) && t.reserve() {
		return empty
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

// elsewhereBuckets is how many other buckets evictElsewhere looks at.
const elsewhereBuckets = 8

// evictElsewhere removes the oldest entry that was never seen again after
// it was learned (or an expired one) from the next of the other buckets,
// from a rotating cursor, that has one, skipping those another writer
// holds (the caller holds own: it must not wait for a second lock). It
// reports whether it freed an entry.
func (t *FDB) evictElsewhere(own *bucket, nowMs int64) bool {
	for range elsewhereBuckets {
		b := &t.buckets[(t.evictAt.Add(1)-1)&t.mask]
		if b == own {
			continue
		}
		s, ok := b.tryLock()
		if !ok {
			continue
		}
		victim, seen := -1, int64(0)
		for i := range b.keys {
			if b.keys[i].Load() == 0 {
				continue
			}
			v := b.vals[i].Load()
			if v&staticBit != 0 || v&activeBit != 0 && !t.expiredAt(v, nowMs) {
				continue
			}
			if victim < 0 || seenOf(v) < seen {
				victim, seen = i, seenOf(v)
			}
		}
		if victim >= 0 {
			if t.expiredAt(b.vals[victim].Load(), nowMs) {
				t.expired.Add(1)
			} else {
				t.evicted.Add(1)
			}
			t.remove(b, victim)
		}
		b.unlock(s)
		if victim >= 0 {
			return true
		}
	}
	return false
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
