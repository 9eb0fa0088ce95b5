package dhcpd

import (
	"container/list"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Probation: a pool starvation (DISCOVER and REQUEST from thousands of
// made-up MACs) binds leases that no device ever uses. With
// Config.Activity set, a new binding is unproven until its device shows
// that it uses the address (traffic through the box); then it is proven
// and never reclaimed. Unproven bindings are given back first:
//
//   - those within their Probation hold at most UnprovenShare of the pool:
//     a binding past that share reclaims the oldest one of the port that
//     holds the most (a flood churns through its own);
//   - when the pool is short, a new device reclaims the oldest unproven
//     binding past its Probation (unused), else the oldest one in
//     probation of the port that holds the most;
//   - offers, too, are reclaimed from the port that holds the most.
//
// A binding is checked for use again just before it is reclaimed, and a
// reclaimed one whose device is seen using the address within its
// probation gets it back (revive.go). A real device silent for longer is
// NAKed when it renews if its address went to another device, and asks
// again (RFC 2131 §3.1, step 5); if the address is still free it gets it back.
// New devices (no proven entry) bind at most NewLeasesPerSecond per port
// (Config.PortOf), so a flood on one port cannot use up another's.

// FloodHold is how long a port counts as flooding (Stats.Ports) after it
// last hit its new-device limit or the share of unproven bindings.
const FloodHold = 5 * time.Minute

// maxGroups bounds the groups (ports) counted apart; any more count as
// the unknown port "".
const maxGroups = 64

// group is a port's (later a zone's) new-device limit and counters.
type group struct {
	limiter   bucket
	reclaimed uint64    // its unproven bindings reclaimed
	revived   uint64    // of those, given back (revive.go)
	refused   uint64    // its new devices' requests over the limit
	flood     time.Time // when it last hit the limit or the share
	warned    time.Time // when its flood was last logged
}

// queues hold entries in the order of a time (key), oldest first, one
// list per group. An entry is in at most one list of one queues.
type queues struct {
	key func(*entry) time.Time
	by  map[string]*list.List
	n   int
}

func newQueues(key func(*entry) time.Time) queues {
	return queues{key: key, by: map[string]*list.List{}}
}

func offerTime(e *entry) time.Time { return e.expiry }
func boundTime(e *entry) time.Time { return e.bound }

// push adds e to the list of its group, in key order from the back.
func (q *queues) push(e *entry) {
	unqueue(e)
	l := q.by[e.group]
	if l == nil {
		l = list.New()
		q.by[e.group] = l
	}
	k := q.key(e)
	at := l.Back()
	for at != nil && k.Before(q.key(at.Value.(*entry))) {
		at = at.Prev()
	}
	if at == nil {
		e.qe = l.PushFront(e)
	} else {
		e.qe = l.InsertAfter(e, at)
	}
	e.q, e.ql = q, l
	q.n++
}

// unqueue takes e out of the list it is in, if any.
func unqueue(e *entry) {
	if e.q == nil {
		return
	}
	e.ql.Remove(e.qe)
	e.q.n--
	e.q, e.ql, e.qe = nil, nil, nil
}

// largest returns the oldest entry of the group with the most entries
// (of two as large, the one whose oldest is older), nil when empty.
func (q *queues) largest() *entry {
	var best *list.List
	for _, l := range q.by {
		if l.Len() == 0 {
			continue
		}
		if best == nil || l.Len() > best.Len() ||
			l.Len() == best.Len() && q.key(l.Front().Value.(*entry)).Before(q.key(best.Front().Value.(*entry))) {
			best = l
		}
	}
	if best == nil {
		return nil
	}
	return best.Front().Value.(*entry)
}

// oldest returns the oldest entry of all groups, nil when empty.
func (q *queues) oldest() *entry {
	var best *entry
	for _, l := range q.by {
		if f := l.Front(); f != nil && (best == nil || q.key(f.Value.(*entry)).Before(q.key(best))) {
			best = f.Value.(*entry)
		}
	}
	return best
}

// count is the number of entries of group g.
func (q *queues) count(g string) int {
	if l := q.by[g]; l != nil {
		return l.Len()
	}
	return 0
}

// clear empties the lists.
func (q *queues) clear() {
	for _, l := range q.by {
		for f := l.Front(); f != nil; f = l.Front() {
			unqueue(f.Value.(*entry))
		}
	}
}

// queue puts e in the queue its state calls for: offers and unproven
// bindings that are dynamic (static holds are never reclaimed).
func (s *Server) queue(e *entry) {
	switch {
	case e.heap == nil:
		unqueue(e)
	case e.state == StateOffered:
		s.offerQ.push(e)
	case e.state == StateBound && !e.proven:
		s.probation.push(e) // age moves it on if its probation is over
	default:
		unqueue(e)
	}
}

// age moves the unproven bindings whose probation is over to the unused.
func (s *Server) age(now time.Time) {
	end := now.Add(-s.pol.probation)
	for _, l := range s.probation.by {
		for f := l.Front(); f != nil; f = l.Front() {
			e := f.Value.(*entry)
			if e.bound.After(end) {
				break
			}
			s.unused.push(e)
		}
	}
}

// groupOf is the group of the device with MAC m: its port.
func (s *Server) groupOf(m mac) string {
	if s.pol.cfg.PortOf == nil {
		return ""
	}
	name := s.pol.cfg.PortOf(net.HardwareAddr(m[:]))
	if _, ok := s.groups[name]; !ok && len(s.groups) >= maxGroups {
		return ""
	}
	return name
}

// group returns the counters of group name.
func (s *Server) group(name string) *group {
	g := s.groups[name]
	if g == nil {
		g = &group{}
		s.groups[name] = g
	}
	return g
}

// limit reports whether a new device of group name may bind a lease now,
// counting a refusal as a sign of a flood.
func (s *Server) limit(name string, now time.Time) bool {
	g := s.group(name)
	if g.limiter.allow(now, s.pol.newRate) {
		return true
	}
	g.refused++
	s.flooding(name, g, now)
	return false
}

// flooding notes that group name shows a flood now, and logs it at most
// once a minute.
func (s *Server) flooding(name string, g *group, now time.Time) {
	g.flood = now
	if now.Sub(g.warned) >= time.Minute {
		g.warned = now
		s.log.Warn("dhcpd: a flood of new devices: unproven leases are given back first", "port", name,
			"unproven", s.probation.count(name)+s.unused.count(name), "reclaimed", g.reclaimed, "refused", g.refused)
	}
}

// bind marks e, just bound to addr (it held old before), as proven or
// unproven: a renewal keeps its state, a new address starts unproven
// (without Activity every binding is proven).
func (s *Server) bind(e *entry, old netip.Addr, renewal bool, now time.Time) {
	switch {
	case s.pol.cfg.Activity == nil:
		e.proven = true
	case old != e.ip:
		e.proven = false
	}
	if !renewal {
		e.bound = now
	}
	s.queue(e)
}

// active reports whether e's device showed traffic through the box
// since its binding began (always, without Activity).
func (s *Server) active(e *entry) bool {
	act := s.pol.cfg.Activity
	if act == nil {
		return true
	}
	// Connection times are in whole seconds.
	t := act(e.ip, net.HardwareAddr(e.mac[:]))
	return !t.IsZero() && !t.Before(e.bound.Truncate(time.Second))
}

// used reports whether e's device showed traffic through the box since
// its binding began; if so e becomes proven and leaves its queue.
func (s *Server) used(e *entry) bool {
	if !s.active(e) {
		return false
	}
	e.proven = true
	unqueue(e)
	s.log.Debug("dhcpd: lease in use", "mac", e.mac, "ip", e.ip)
	return true
}

// prove checks every unproven binding, and every one reclaimed lately,
// for use; it reports whether one became proven or was given back (the
// lease file records it).
func (s *Server) prove() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probation.n+s.unused.n+len(s.recent) == 0 {
		return false
	}
	now := s.now()
	s.age(now)
	revived := s.revive(now)
	var all []*entry
	for _, q := range []*queues{&s.probation, &s.unused} {
		for _, l := range q.by {
			for f := l.Front(); f != nil; f = f.Next() {
				all = append(all, f.Value.(*entry))
			}
		}
	}
	proven := false
	for _, e := range all {
		if s.used(e) {
			proven = true
		}
	}
	return proven || revived || s.reclaimedSince()
}

// share keeps the unproven bindings within their probation at most
// s.pol.unproven: past it, the oldest of the port holding the most goes.
func (s *Server) share(now time.Time) {
	s.age(now)
	for s.probation.n > s.pol.unproven {
		if e := s.probation.largest(); !s.used(e) {
			g := s.group(e.group)
			s.reclaimLease(e, g, "share of unproven leases", now)
			s.flooding(e.group, g, now)
		}
	}
}

// reclaim frees an unproven binding for a new device when the pool is
// short: the oldest past its probation, else the oldest in probation of
// the port holding the most. It returns the address freed.
func (s *Server) reclaim(now time.Time) (netip.Addr, bool) {
	s.age(now)
	for {
		e := s.unused.oldest()
		fresh := e == nil
		if fresh {
			e = s.probation.largest()
		}
		if e == nil {
			return netip.Addr{}, false
		}
		if s.used(e) {
			continue
		}
		g := s.group(e.group)
		s.reclaimLease(e, g, "pool short", now)
		if fresh {
			s.flooding(e.group, g, now)
		}
		return e.ip, true
	}
}

// reclaimLease drops the unproven binding e of group g, remembering it
// for a second chance (revive).
func (s *Server) reclaimLease(e *entry, g *group, why string, now time.Time) {
	s.del(e)
	s.remember(e, now)
	s.reclaimedAny = true
	g.reclaimed++
	s.names.gen++
	s.log.Debug("dhcpd: unproven lease reclaimed", "mac", e.mac, "ip", e.ip, "port", e.group, "why", why)
}

// PortStats are a port's new devices (Stats.Ports).
type PortStats struct {
	Port      string // "" for devices on no known port
	Unproven  int    // bindings not yet proven
	Reclaimed uint64 // unproven bindings given back
	Revived   uint64 // of those, given back to their devices seen using them after all
	Refused   uint64 // requests of new devices over the port's limit
	// Flooding: the port hit its new-device limit or the share of
	// unproven bindings within the last FloodHold.
	Flooding bool
}

// portStats are the groups' counters with s.mu held, ordered by port.
func (s *Server) portStats(now time.Time) []PortStats {
	var out []PortStats
	names := map[string]bool{}
	for _, m := range []map[string]*list.List{s.probation.by, s.unused.by} {
		for name := range m {
			names[name] = true
		}
	}
	for name := range s.groups {
		names[name] = true
	}
	for name := range names {
		g := s.groups[name]
		if g == nil {
			g = &group{}
		}
		n := s.probation.count(name) + s.unused.count(name)
		if n == 0 && g.reclaimed == 0 && g.refused == 0 {
			continue
		}
		out = append(out, PortStats{Port: name, Unproven: n, Reclaimed: g.reclaimed, Revived: g.revived, Refused: g.refused,
			Flooding: !g.flood.IsZero() && now.Sub(g.flood) < FloodHold})
	}
	slices.SortFunc(out, func(a, b PortStats) int { return strings.Compare(a.Port, b.Port) })
	return out
}

// reclaimedSince reports whether a binding was reclaimed since it was last
// asked (a change of the table, for the lease file, after an offer).
func (s *Server) reclaimedSince() bool {
	r := s.reclaimedAny
	s.reclaimedAny = false
	return r
}
