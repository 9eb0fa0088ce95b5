package bridge

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
)

// Layout of the packed words. A key word is the MAC (bits 0-47), the VLAN
// id (48-59) and a valid bit (63): 0 marks an empty slot. A value word is
// the last-seen time in milliseconds of the caller's clock (0-39, 34 years),
// the port (40-55), the static bit (56) and the active bit (57): the MAC
// was seen again after it was learned on this port, which a forged source
// of a MAC flood, seen once, never is.
const (
	keyValid   = 1 << 63
	seenBits   = 40
	seenMask   = 1<<seenBits - 1
	portShift  = 40
	staticBit  = 1 << 56
	activeBit  = 1 << 57
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

// tryLock locks b unless another writer holds it.
func (b *bucket) tryLock() (uint64, bool) {
	s := b.seq.Load()
	if s&1 == 0 && b.seq.CompareAndSwap(s, s+1) {
		return s + 1, true
	}
	return 0, false
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
