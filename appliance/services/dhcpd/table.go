package dhcpd

import (
	"container/heap"
	"container/list"
	"net/netip"
	"time"
)

// entry is one client's state in the table.
type entry struct {
	key      string // client identity: "id:" + hex(option 61) or "hw:" + MAC
	mac      mac
	cid      string // hex(option 61)
	ip       netip.Addr
	hostname string
	state    State // offered, bound, expired or released
	expiry   time.Time
	lastSeen time.Time
	group    string    // the port its device was on (Config.PortOf)
	proven   bool      // its device used the address (see probation.go)
	bound    time.Time // when its binding began (renewals keep it)

	heap *entryHeap // the heap e is in; nil for a static hold
	hidx int        // e's index in it
	q    *queues    // the queues e is in (offers, unproven bindings), nil for none
	ql   *list.List // its list there
	qe   *list.Element
}

// live reports whether e holds its address now: an offer or a lease that
// has not run out.
func (e *entry) live(now time.Time) bool {
	return (e.state == StateOffered || e.state == StateBound) && now.Before(e.expiry)
}

// stateAt is e's state as seen at now.
func (e *entry) stateAt(now time.Time) State {
	if e.state == StateBound && !now.Before(e.expiry) {
		return StateExpired
	}
	return e.state
}

// pin is a static lease made by MakeStatic; it lives in the lease file.
type pin struct {
	IP       netip.Addr
	Hostname string
}

// The table's indexes: byKey and byIP hold every entry; the dynamic ones
// (all but static holds) are also in one of two heaps ordered by expiry,
// offers in s.offers and the rest in s.leased, so the entry to reclaim is
// found in O(log n): the oldest offer or, if it expired earlier, the
// top of s.leased. Every change of an entry's address, state or expiry in
// the table goes through set, put or del.

// entryHeap is a container/heap of entries ordered by expiry.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].expiry.Before(h[j].expiry) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.hidx = len(*h)
	*h = append(*h, e)
}

func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// dynamic is the number of dynamic entries, bounded by MaxLeases.
func (s *Server) dynamic() int { return len(s.offers) + len(s.leased) }

// index puts e into its heap, unless it holds its own static address.
func (s *Server) index(e *entry) {
	e.heap = nil
	if s.holdsStatic(e) {
		unqueue(e)
		return
	}
	e.heap = &s.leased
	if e.state == StateOffered {
		e.heap = &s.offers
	}
	heap.Push(e.heap, e)
	s.queue(e)
}

// reindex rebuilds the heaps and queues (after the statics changed).
func (s *Server) reindex() {
	s.offers, s.leased = nil, nil
	s.offerQ.clear()
	s.probation.clear()
	s.unused.clear()
	for _, e := range s.byKey {
		s.index(e)
	}
}

// put adds e (not in the table) with its address, taking the address over
// from its holder: the caller decided that one gives it up.
func (s *Server) put(e *entry) {
	if h := s.byIP[e.ip]; h != nil && h != e {
		s.del(h)
	}
	s.byKey[e.key] = e
	s.byIP[e.ip] = e
	s.index(e)
}

// del removes e from the table.
func (s *Server) del(e *entry) {
	if s.byKey[e.key] == e {
		delete(s.byKey, e.key)
	}
	if s.byIP[e.ip] == e {
		delete(s.byIP, e.ip)
	}
	if e.heap != nil {
		heap.Remove(e.heap, e.hidx)
		e.heap = nil
	}
	unqueue(e)
}

// set gives e (in the table or new) its address, state and expiry.
func (s *Server) set(e *entry, ip netip.Addr, st State, expiry time.Time) {
	if s.byKey[e.key] == e {
		s.del(e)
	}
	e.ip, e.state, e.expiry = ip, st, expiry
	s.put(e)
}

// reusable reports whether a may be handed out again from the pool.
func (s *Server) reusable(a netip.Addr, now time.Time) bool {
	_, st := s.staticIP[a]
	return !st && s.pol.inPool(a) && s.pol.host(a) && !s.quarantined(a, now)
}

// admit makes sure cl's entry e can hold a (invalid: a dynamic address
// still to be picked). Static holds are not bounded; a new dynamic entry
// needs room below MaxLeases, made by reclaiming an entry (see evict),
// whose address it returns.
func (s *Server) admit(cl client, e *entry, a netip.Addr, now time.Time) (netip.Addr, bool) {
	if m, ok := s.staticIP[a]; ok && m == cl.mac {
		return netip.Addr{}, true
	}
	if e != nil && s.byKey[e.key] == e && e.heap != nil {
		return netip.Addr{}, true // already counted
	}
	if h := s.byIP[a]; h != nil && h != e && h.heap != nil {
		return netip.Addr{}, true // takes h's place
	}
	if s.dynamic() < s.pol.maxLeases {
		return netip.Addr{}, true
	}
	return s.evict(now, false)
}

// evict reclaims the dynamic entry that is not bound and expired first:
// released and expired leases and offers (which expire OfferHold after
// they are made; of the port holding the most offers), never a proven
// bound lease; when there is none, an unproven binding (see reclaim).
// With pool it goes on until it freed an address the pool can hand out
// again, dropping entries whose address it cannot (left over from a
// config with another pool). It returns the address of the last entry it
// removed.
func (s *Server) evict(now time.Time, pool bool) (netip.Addr, bool) {
	for {
		best := s.offerQ.largest()
		if len(s.leased) > 0 {
			if l := s.leased[0]; !now.Before(l.expiry) && (best == nil || l.expiry.Before(best.expiry)) {
				best = l
			}
		}
		var a netip.Addr
		if best != nil {
			s.del(best)
			a = best.ip
		} else {
			var ok bool
			if a, ok = s.reclaim(now); !ok {
				return netip.Addr{}, false
			}
		}
		if !pool || s.reusable(a, now) {
			return a, true
		}
	}
}

// nextFree returns the next address of the pool nobody holds or remembers,
// scanning round-robin from where the last scan stopped.
func (s *Server) nextFree(now time.Time) (netip.Addr, bool) {
	p := s.pol
	v := s.cursor
	if v < p.start || v > p.end {
		v = p.start
	}
	for range p.end - p.start + 1 {
		a := addrOf(v)
		if v++; v > p.end {
			v = p.start
		}
		if s.byIP[a] == nil && s.reusable(a, now) {
			s.cursor = v
			return a, true
		}
	}
	return netip.Addr{}, false
}
