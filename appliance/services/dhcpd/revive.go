package dhcpd

import (
	"slices"
	"time"
)

// A device that bound a lease and then sent nothing through the box for a
// while may be real but slow; its binding may have been reclaimed (see
// probation.go). The server remembers the bindings it reclaimed for
// Probation: one whose device is seen using its address after all gets
// it back, proven, unless a proven device or a static lease holds the
// address by then. So a real device on a flooded port loses its lease
// only if it stays silent for its whole probation.

// maxRecent bounds the reclaimed bindings remembered (at the default 50
// new devices a second, 20 s of a flood's).
const maxRecent = 1024

// reclaimed is a binding reclaimed at a time.
type reclaimed struct {
	e  *entry
	at time.Time
}

// remember keeps e, reclaimed at now, for revive.
func (s *Server) remember(e *entry, now time.Time) {
	if s.pol.cfg.Activity == nil {
		return
	}
	if len(s.recent) >= maxRecent {
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	s.recent = append(s.recent, reclaimed{e: e, at: now})
}

// revive gives the reclaimed bindings whose devices use their address
// back to them, and forgets those reclaimed Probation ago. It reports
// whether it gave one back.
func (s *Server) revive(now time.Time) bool {
	keep := s.recent[:0]
	var back []*entry
	for _, r := range s.recent {
		switch {
		case now.Sub(r.at) >= s.pol.probation:
		case s.active(r.e):
			back = append(back, r.e)
		default:
			keep = append(keep, r)
		}
	}
	clear(s.recent[len(keep):])
	s.recent = keep
	revived := false
	for _, e := range back { // restore may reclaim, adding to s.recent
		if s.restore(e, now) {
			revived = true
		}
	}
	return revived
}

// restore puts the reclaimed binding e back, proven, if its client has no
// other entry, its lease has not ended and its address may be its again:
// free, or held by an offer or an unproven binding (reclaimed for it).
func (s *Server) restore(e *entry, now time.Time) bool {
	if s.byKey[e.key] != nil || !now.Before(e.expiry) || !s.reusable(e.ip, now) {
		return false
	}
	if h := s.byIP[e.ip]; h != nil {
		switch {
		case h.heap == nil || h.live(now) && h.state == StateBound && h.proven:
			return false
		case h.q == &s.probation || h.q == &s.unused:
			s.reclaimLease(h, s.group(h.group), "its address is in use by the device it was reclaimed from", now)
		default:
			s.del(h)
		}
	}
	if s.dynamic() >= s.pol.maxLeases {
		if _, ok := s.evict(now, false); !ok {
			return false
		}
	}
	e.proven = true
	s.put(e)
	s.group(e.group).revived++
	s.names.gen++
	s.log.Info("dhcpd: a reclaimed lease is in use after all: given back", "mac", e.mac, "ip", e.ip, "port", e.group)
	return true
}

// forgetReclaimed drops the device m's reclaimed bindings (Forget): none
// comes back. It reports whether there was one.
func (s *Server) forgetReclaimed(m mac) bool {
	n := len(s.recent)
	s.recent = slices.DeleteFunc(s.recent, func(r reclaimed) bool { return r.e.mac == m })
	return len(s.recent) < n
}
