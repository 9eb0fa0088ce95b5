package dhcpd

import (
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Name is a local host name and its address.
type Name struct {
	Hostname string
	Addr     netip.Addr
}

// namesCache holds the local names, rebuilt when the table changed (gen)
// or a lease that gave a name ran out (until).
type namesCache struct {
	gen, built uint64 // built is gen+1 of the last build (0: never built)
	until      time.Time
	byName     map[string]netip.Addr
}

// sanitizeHostname turns a client's host name (option 12) into a DNS
// label: its first dot-separated part, lower case, every character other
// than a letter, digit or '-' replaced by '-', runs of '-' collapsed, no
// '-' at either end, at most 63 characters. It returns "" when nothing is
// left.
func sanitizeHostname(h string) string {
	h, _, _ = strings.Cut(h, ".")
	var b strings.Builder
	dash := false
	for i := 0; i < len(h) && b.Len() < 63; i++ {
		c := h[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			c = '-'
		}
		if c == '-' {
			if dash || b.Len() == 0 {
				continue
			}
			dash = true
		} else {
			dash = false
		}
		b.WriteByte(c)
	}
	return strings.TrimRight(b.String(), "-")
}

// namesLocked returns the current name table (s.mu held). Static leases'
// names always resolve; a bound lease's name resolves while it is bound,
// unless a static lease has the name; of two leases with one name the one
// seen last wins.
func (s *Server) namesLocked(now time.Time) map[string]netip.Addr {
	c := &s.names
	if c.built == c.gen+1 && now.Before(c.until) {
		return c.byName
	}
	m := map[string]netip.Addr{}
	for _, st := range s.static {
		if st.Hostname != "" {
			m[st.Hostname] = st.IP
		}
	}
	seen := map[string]time.Time{}
	until := now.Add(24 * time.Hour)
	for _, e := range s.byKey {
		if e.hostname == "" || e.state != StateBound || !now.Before(e.expiry) {
			continue
		}
		if st, ok := s.static[e.mac]; ok && st.Hostname != "" {
			continue
		}
		if _, taken := m[e.hostname]; taken {
			if t, dyn := seen[e.hostname]; !dyn || !e.lastSeen.After(t) {
				continue
			}
		}
		seen[e.hostname] = e.lastSeen
		m[e.hostname] = e.ip
		if e.expiry.Before(until) {
			until = e.expiry
		}
	}
	c.byName, c.until, c.built = m, until, c.gen+1
	return m
}

// Lookup returns the address of a local name: "host", "host.<Domain>",
// with or without the trailing dot, in any case.
func (s *Server) Lookup(name string) (netip.Addr, bool) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	s.mu.Lock()
	defer s.mu.Unlock()
	n = strings.TrimSuffix(n, "."+s.pol.cfg.Domain)
	if strings.Contains(n, ".") {
		return netip.Addr{}, false
	}
	a, ok := s.namesLocked(s.now())[n]
	return a, ok
}

// Names returns every local name (without the domain), ordered by name.
func (s *Server) Names() []Name {
	s.mu.Lock()
	m := s.namesLocked(s.now())
	out := make([]Name, 0, len(m))
	for n, a := range m {
		out = append(out, Name{Hostname: n, Addr: a})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Name) int { return strings.Compare(a.Hostname, b.Hostname) })
	return out
}
