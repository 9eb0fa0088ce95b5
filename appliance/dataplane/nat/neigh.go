package nat

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// neighTable is the ARP cache shared by the workers: buckets of four
// slots, each slot a seqlock over atomic words, so lookups take no lock;
// writers (ARP learning, new incomplete entries) serialize on mu. A full
// bucket replaces its oldest entry.
type neighTable struct {
	mu       sync.Mutex
	slots    []nslot
	nbuckets uint64
	seed     uint64
	// resolved counts entries that became resolved; workers with queued
	// frames compare it to know when to look at their queue again.
	resolved atomic.Uint64
}

const neighWays = 4

type nslot struct {
	seq       atomic.Uint32
	probes    atomic.Uint32 // ARP requests sent since the last confirmation
	key       atomic.Uint64 // (side+1)<<32 | ip; 0 when empty
	mac       atomic.Uint64 // 1<<48 | MAC when resolved, 0 while incomplete
	confirmed atomic.Int64  // ns: last ARP from the neighbour, or creation
	probed    atomic.Int64  // ns: last ARP request sent
}

// neigh is a consistent copy of a slot.
type neigh struct {
	slot      *nslot
	mac       [6]byte
	resolved  bool
	probes    uint32
	confirmed int64
	probed    int64
}

func newNeighTable(n int, seed uint64) *neighTable {
	b := uint64(1)
	for b*neighWays < uint64(n) {
		b *= 2
	}
	return &neighTable{slots: make([]nslot, b*neighWays), nbuckets: b, seed: seed}
}

func neighKey(side Side, ip uint32) uint64 { return uint64(side+1)<<32 | uint64(ip) }

func (t *neighTable) bucket(k uint64) []nslot {
	hi, lo := bits.Mul64(k^t.seed, 0x9e3779b97f4a7c15)
	b := (hi ^ lo) & (t.nbuckets - 1)
	return t.slots[b*neighWays : (b+1)*neighWays]
}

func macWord(m [6]byte) uint64 {
	return 1<<48 | uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

func wordMAC(w uint64) (m [6]byte) {
	m[0], m[1], m[2], m[3], m[4], m[5] = byte(w>>40), byte(w>>32), byte(w>>24), byte(w>>16), byte(w>>8), byte(w)
	return m
}

// get returns the entry for (side, ip).
func (t *neighTable) get(side Side, ip uint32) (n neigh, ok bool) {
	k := neighKey(side, ip)
	b := t.bucket(k)
	for i := range b {
		s := &b[i]
		for spin := 1; ; spin++ {
			q := s.seq.Load()
			if q&1 != 0 { // a writer is in the middle of it
				if spin%64 == 0 {
					runtime.Gosched()
				}
				continue
			}
			sk := s.key.Load()
			mac := s.mac.Load()
			n.probes = s.probes.Load()
			n.confirmed = s.confirmed.Load()
			n.probed = s.probed.Load()
			if s.seq.Load() != q {
				continue
			}
			if sk != k {
				break
			}
			n.slot = s
			n.resolved = mac != 0
			n.mac = wordMAC(mac)
			return n, true
		}
	}
	return neigh{}, false
}

// write stores a slot's fields under the seqlock; the caller holds mu.
func (s *nslot) write(k, mac uint64, confirmed, probed int64, probes uint32) {
	s.seq.Add(1)
	s.key.Store(k)
	s.mac.Store(mac)
	s.confirmed.Store(confirmed)
	s.probed.Store(probed)
	s.probes.Store(probes)
	s.seq.Add(1)
}

// learn records that ip on side is at mac (an ARP packet from it). An
// absent entry is created only when create is set. It reports whether an
// entry was written and whether it changed from incomplete to resolved.
func (t *neighTable) learn(side Side, ip uint32, mac [6]byte, now int64, create bool) (written, resolved bool) {
	k := neighKey(side, ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(k)
	var slot *nslot
	for i := range b {
		if b[i].key.Load() == k {
			slot = &b[i]
			break
		}
	}
	if slot == nil {
		if !create {
			return false, false
		}
		slot = t.victim(b)
	}
	resolved = slot.key.Load() != k || slot.mac.Load() == 0
	slot.write(k, macWord(mac), now, slot.probed.Load(), 0)
	if resolved {
		t.resolved.Add(1)
	}
	return true, resolved
}

// victim picks the slot of a full bucket to replace: an empty one, else
// the least recently confirmed.
func (t *neighTable) victim(b []nslot) *nslot {
	v := &b[0]
	for i := range b {
		if b[i].key.Load() == 0 {
			return &b[i]
		}
		if b[i].confirmed.Load() < v.confirmed.Load() {
			v = &b[i]
		}
	}
	return v
}

// incomplete creates an unresolved entry for (side, ip) unless one exists.
func (t *neighTable) incomplete(side Side, ip uint32, now int64) {
	k := neighKey(side, ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(k)
	for i := range b {
		if b[i].key.Load() == k {
			return
		}
	}
	t.victim(b).write(k, 0, now, 0, 0)
}

// forget deletes the entry in slot s if it still holds key (side, ip).
func (t *neighTable) forget(s *nslot, side Side, ip uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.key.Load() == neighKey(side, ip) {
		s.write(0, 0, 0, 0, 0)
	}
}

// claimProbe reserves the right to send an ARP request for the entry in
// s (copied as n) at now: at most one per second per neighbour, over all
// workers.
func claimProbe(n *neigh, now int64) bool {
	if now-n.probed < 1e9 {
		return false
	}
	if !n.slot.probed.CompareAndSwap(n.probed, now) {
		return false
	}
	n.slot.probes.Add(1)
	return true
}

// Neighbour is one ARP cache entry, for the dashboard.
type Neighbour struct {
	Side      Side
	IP        [4]byte
	MAC       [6]byte
	Resolved  bool
	Confirmed int64 // ns
}

// list returns the entries.
func (t *neighTable) list(dst []Neighbour) []Neighbour {
	for i := range t.slots {
		s := &t.slots[i]
		for {
			q := s.seq.Load()
			if q&1 != 0 {
				continue
			}
			k, mac, c := s.key.Load(), s.mac.Load(), s.confirmed.Load()
			if s.seq.Load() != q {
				continue
			}
			if k != 0 {
				var ip [4]byte
				v := uint32(k)
				ip[0], ip[1], ip[2], ip[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
				dst = append(dst, Neighbour{Side: Side(k>>32 - 1), IP: ip, MAC: wordMAC(mac), Resolved: mac != 0, Confirmed: c})
			}
			break
		}
	}
	return dst
}
