package nat

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/routing"
)

// neighTable is the ARP cache shared by the workers: buckets of four
// slots, each slot a seqlock over atomic words, so lookups take no lock;
// writers (ARP learning, new incomplete entries) serialize on mu.
//
// It resists spoofing and floods: an ARP that claims a resolved address
// for another MAC does not move it while the MAC it has still answers
// the router's probes (the caller probes it at once), so a host on the
// segment cannot divert the gateway's traffic with gratuitous ARP or
// unsolicited replies; only a neighbour that stopped answering is
// replaced. A full bucket replaces an incomplete entry first, then the
// resolved one least recently confirmed or used, and never the pinned
// entry (the WAN gateway), so an ARP spray cannot evict the gateway or
// the LAN hosts the router is sending to.
//
// Resolution is bounded for whatever asks for many unknown addresses (a
// LAN host scanning the WAN's subnet; a port forward to a host that is
// gone is one address): a new incomplete entry never takes a resolved
// entry's slot unless no ARP confirmed it nor a frame went to it for
// inUse, and a quarter of the table at most is incomplete at once
// (unknown; the pinned entry does not count).
type neighTable struct {
	mu       sync.Mutex
	slots    []nslot
	nbuckets uint64
	seed     uint64
	// resolved counts entries that became resolved; workers with queued
	// frames compare it to know when to look at their queue again.
	resolved atomic.Uint64
	// refresh holds the keys of neighbours the fast path sends to that
	// want a probe before they go stale; a worker's Tick sends them.
	refresh routing.Probes[uint64]
	// unknown counts the live incomplete entries (changed under mu).
	unknown *routing.Unresolved
}

const neighWays = 4

type nslot struct {
	seq       atomic.Uint32
	probes    atomic.Uint32 // ARP requests sent since the last confirmation
	key       atomic.Uint64 // (side+1)<<32 | ip; 0 when empty
	mac       atomic.Uint64 // 1<<48 | MAC when resolved, 0 while incomplete
	confirmed atomic.Int64  // ns: last ARP from the neighbour, or creation
	probed    atomic.Int64  // ns: last ARP request sent
	used      atomic.Int64  // ns: last time a frame was sent to it (to the second)
	// counted is the second an incomplete entry counted in unknown was
	// created, 0 if it does not count (written under mu).
	counted atomic.Uint32
}

// neigh is a consistent copy of a slot.
type neigh struct {
	slot      *nslot
	mac       [6]byte
	resolved  bool
	probes    uint32
	confirmed int64
	probed    int64
	used      int64
}

// newNeighTable makes a table of n entries (rounded up to a power of
// two of buckets) whose incomplete entries live life seconds at most.
func newNeighTable(n int, seed uint64, life uint32) *neighTable {
	b := uint64(1)
	for b*neighWays < uint64(n) {
		b *= 2
	}
	return &neighTable{slots: make([]nslot, b*neighWays), nbuckets: b, seed: seed,
		unknown: routing.NewUnresolved(int(b*neighWays/4), life)}
}

// uncount takes the entry in s out of the incomplete count (under mu).
func (t *neighTable) uncount(s *nslot) {
	if c := s.counted.Load(); c != 0 {
		t.unknown.Done(c)
		s.counted.Store(0)
	}
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
			n.used = s.used.Load()
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

// learnResult is what an ARP packet did to the cache.
type learnResult uint8

const (
	learnIgnored  learnResult = iota // no entry (and none created)
	learnWritten                     // created or confirmed
	learnResolved                    // an incomplete (or new) entry became resolved
	learnConflict                    // it claims a resolved address for another MAC: not taken
)

// learn records that ip on side is at mac (an ARP packet from it). An
// absent entry is created only when create is set (pin is the key never
// evicted for it). A claim that a resolved entry moved to another MAC is
// taken only once the MAC it has failed maxProbes probes (the last one a
// second ago or more); otherwise it
// reports learnConflict and the entry as it is, so that the caller
// probes its MAC.
func (t *neighTable) learn(side Side, ip uint32, mac [6]byte, now int64, create bool, maxProbes uint32, pin uint64) (learnResult, neigh) {
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
			return learnIgnored, neigh{}
		}
		slot = t.victim(b, pin, now, false)
	}
	old := slot.mac.Load()
	// The MAC it has still answers unless maxProbes probes went out and
	// the last one had its second to be answered, as for a stale entry.
	if slot.key.Load() == k && old != 0 && old != macWord(mac) && (slot.probes.Load() < maxProbes || now-slot.probed.Load() < 1e9) {
		return learnConflict, neigh{slot: slot, mac: wordMAC(old), resolved: true, probes: slot.probes.Load(),
			confirmed: slot.confirmed.Load(), probed: slot.probed.Load()}
	}
	resolved := slot.key.Load() != k || old == 0
	t.uncount(slot)
	slot.write(k, macWord(mac), now, slot.probed.Load(), 0)
	if resolved {
		t.resolved.Add(1)
		return learnResolved, neigh{}
	}
	return learnWritten, neigh{}
}

// inUse is how long after the router last sent to a neighbour it counts
// as one with live traffic, kept over any that is not.
const inUse = 300e9

// victim picks the slot of a full bucket to replace at now: an empty one,
// else the incomplete one created first, else the resolved one least
// recently confirmed that the router has not sent to within inUse, else
// the one sent to least recently; never the slot of key pin. For a new
// incomplete entry (resolving) a resolved one goes only if neither ARP
// nor a frame to it came within inUse, else there is none (nil).
func (t *neighTable) victim(b []nslot, pin uint64, now int64, resolving bool) *nslot {
	var v *nslot
	var vTier, vAge int64
	for i := range b {
		s := &b[i]
		k := s.key.Load()
		if k == 0 {
			return s
		}
		if k == pin && pin != 0 {
			continue
		}
		tier, age := int64(1), s.confirmed.Load()
		switch used := s.used.Load(); {
		case s.mac.Load() == 0:
			tier = 0
		case used != 0 && now-used < inUse:
			tier, age = 2, used
		}
		if resolving && tier != 0 && (tier == 2 || now-age < inUse) {
			continue // a neighbour in use
		}
		if v == nil || tier < vTier || tier == vTier && age < vAge {
			v, vTier, vAge = s, tier, age
		}
	}
	return v
}

// incomplete makes an unresolved entry for (side, ip) unless one exists
// (pin as for learn) and reports whether there is one now: a new one
// must find a slot (victim) and, unless it is pin's, a place among the
// incomplete entries of the last life seconds; one older than that is
// made anew, as a new one (its resolution was over).
func (t *neighTable) incomplete(side Side, ip uint32, now int64, pin uint64) bool {
	k := neighKey(side, ip)
	sec := uint32(now / 1e9)
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(k)
	var slot *nslot
	for i := range b {
		if s := &b[i]; s.key.Load() == k {
			if s.mac.Load() != 0 || !t.unknown.Expired(uint32(s.confirmed.Load()/1e9), sec) || k == pin {
				return true
			}
			slot = s
		}
	}
	if slot == nil {
		if slot = t.victim(b, pin, now, true); slot == nil {
			return false
		}
	}
	if k != pin && !t.unknown.Add(sec) {
		return false
	}
	t.uncount(slot)
	slot.write(k, 0, now, 0, 0)
	if k != pin {
		slot.counted.Store(sec)
	}
	return true
}

// markUsed notes that a frame was sent to the entry n (at most one write a
// second per neighbour).
func markUsed(n *neigh, now int64) {
	if now-n.used >= 1e9 {
		n.slot.used.Store(now)
	}
}

// forget deletes the entry in slot s if it still holds key (side, ip).
func (t *neighTable) forget(s *nslot, side Side, ip uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.key.Load() == neighKey(side, ip) {
		t.uncount(s)
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

// unclaimProbe gives back the probe claimProbe counted when its ARP
// request did not go out (over the rate, no buffer): the neighbour is
// not the worse for it, and the next claim may send it a second later.
func unclaimProbe(n *neigh) { n.slot.probes.Add(^uint32(0)) }

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
