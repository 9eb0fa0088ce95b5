package bridge

import (
	"runtime"
	"time"
)

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
