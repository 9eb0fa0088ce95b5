package routing

import "sync/atomic"

// Unresolved counts a neighbour cache's live incomplete entries (being
// resolved by ARP or NDP) against a cap. An entry counts from the second
// it was created until it is resolved or goes away (Done), and at most
// for Life seconds: past that its resolution has given up (its requests
// are over and its queued frames dropped) and it is a free way for the
// next entry, whether or not a lookup met it since. So the count needs no
// sweep: it is kept per second of creation, in a ring of slots that each
// hold their second and count in one atomic word.
//
// It is safe for concurrent use; the cap is checked before the count
// goes up, so concurrent Adds may pass it by one each.
type Unresolved struct {
	slots [unresolvedSlots]atomic.Uint64 // second<<32 | count
	cap   int
	life  uint32
}

// unresolvedSlots bounds Life: a slot is reused after this many seconds.
const unresolvedSlots = 16

// NewUnresolved returns a counter of at most limit live entries, each
// live for life seconds (1 to 15) at most.
func NewUnresolved(limit int, life uint32) *Unresolved {
	return &Unresolved{cap: limit, life: min(max(life, 1), unresolvedSlots-1)}
}

// Add counts an entry created at now (seconds) unless the cap's worth
// are live; ok says whether it was counted (and may be created).
func (u *Unresolved) Add(now uint32) (ok bool) {
	if u.Live(now) >= u.cap {
		return false
	}
	u.inc(now)
	return true
}

func (u *Unresolved) inc(now uint32) {
	s := &u.slots[now%unresolvedSlots]
	for {
		v := s.Load()
		next := uint64(now)<<32 | 1
		if uint32(v>>32) == now {
			next = v + 1
		}
		if s.CompareAndSwap(v, next) {
			return
		}
	}
}

// Done uncounts an entry created at created (seconds), if it still
// counts (ok): it was resolved, replaced or given up.
func (u *Unresolved) Done(created uint32) (ok bool) {
	s := &u.slots[created%unresolvedSlots]
	for {
		v := s.Load()
		if uint32(v>>32) != created || uint32(v) == 0 {
			return false
		}
		if s.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// Move hands the count of an entry created at from, if it still counts
// (ok), to one created at now that replaces it; the live count stays.
func (u *Unresolved) Move(from, now uint32) (ok bool) {
	if u.Expired(from, now) || !u.Done(from) {
		return false
	}
	u.inc(now)
	return true
}

// Live is the number of entries counted within the last Life seconds at
// now (seconds).
func (u *Unresolved) Live(now uint32) int {
	n := 0
	for i := range u.slots {
		v := u.slots[i].Load()
		if now-uint32(v>>32) < u.life {
			n += int(uint32(v))
		}
	}
	return n
}

// Expired says whether an entry created at created no longer counts at
// now (seconds): its resolution is over.
func (u *Unresolved) Expired(created, now uint32) bool { return now-created >= u.life }

// Cap is the most entries that may be live.
func (u *Unresolved) Cap() int { return u.cap }
