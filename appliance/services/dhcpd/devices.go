package dhcpd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// State is a lease's state.
type State string

// Lease states.
const (
	StateOffered  State = "offered"  // offered, not yet requested
	StateBound    State = "bound"    // acknowledged and not expired
	StateExpired  State = "expired"  // its lease ran out; the address is remembered for the client
	StateReleased State = "released" // the client gave it back
	StateReserved State = "reserved" // a static lease the device has not taken yet
)

// Lease is one entry of the lease table, as Leases reports it.
type Lease struct {
	MAC      net.HardwareAddr
	ClientID string // option 61 in hex, empty if the client sent none
	IP       netip.Addr
	Hostname string
	Expiry   time.Time // end of the lease or of the offer; zero for a reserved static
	LastSeen time.Time
	Static   bool
	// InConfig: Static and from the config, which Forget refuses to
	// drop; false for a static lease MakeStatic made.
	InConfig bool
	State    State
	// Unproven: bound, but the device has not used its address yet (no
	// traffic through the box since): such leases are given back first
	// when the pool runs short (see Config.Activity).
	Unproven bool
}

// Errors of MakeStatic and Forget.
var (
	ErrNoLease      = errors.New("no lease for this MAC")
	ErrConfigStatic = errors.New("is a static lease of the config")
	// ErrAlreadyStatic: MakeStatic was called for a device it made static.
	ErrAlreadyStatic = errors.New("already static")
)

// Leases returns the table (without expired offers) and the static leases
// no device has taken yet, ordered by address.
func (s *Server) Leases() []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []Lease
	held := map[netip.Addr]bool{}
	for _, e := range s.byKey {
		if e.state == StateOffered && !now.Before(e.expiry) {
			continue
		}
		held[e.ip] = true
		static := s.holdsStatic(e)
		_, pinned := s.pins[e.mac]
		out = append(out, Lease{
			MAC: slices.Clone(net.HardwareAddr(e.mac[:])), ClientID: e.cid, IP: e.ip, Hostname: e.hostname,
			Expiry: e.expiry, LastSeen: e.lastSeen, Static: static, InConfig: static && !pinned, State: e.stateAt(now),
			Unproven: e.q == &s.probation || e.q == &s.unused,
		})
	}
	for m, st := range s.static {
		if !held[st.IP] {
			_, pinned := s.pins[m]
			out = append(out, Lease{MAC: slices.Clone(st.MAC), IP: st.IP, Hostname: st.Hostname, Static: true, InConfig: !pinned, State: StateReserved})
		}
	}
	slices.SortFunc(out, func(a, b Lease) int {
		if c := a.IP.Compare(b.IP); c != 0 {
			return c
		}
		return slices.Compare(a.MAC, b.MAC)
	})
	return out
}

// MakeStatic turns the address the device hw holds (its most recently seen
// lease) into a static lease kept in the lease file: from then on the
// device always gets it and nobody else does.
func (s *Server) MakeStatic(hw net.HardwareAddr) error {
	return s.device(hw, "make static", "lease made static", s.makeStatic)
}

func (s *Server) makeStatic(m mac) error {
	if s.pol.static[m].MAC != nil {
		return ErrConfigStatic
	}
	if _, ok := s.pins[m]; ok {
		return ErrAlreadyStatic
	}
	var best *entry
	for _, e := range s.byKey {
		if e.mac == m && e.state != StateOffered && (best == nil || e.lastSeen.After(best.lastSeen)) {
			best = e
		}
	}
	if best == nil {
		return ErrNoLease
	}
	if !s.pol.host(best.ip) {
		return fmt.Errorf("address %v is no longer a host address of the subnet", best.ip)
	}
	if om, ok := s.staticIP[best.ip]; ok && om != m {
		return fmt.Errorf("address %v is the static address of %v", best.ip, om)
	}
	s.pins[m] = pin{IP: best.ip, Hostname: best.hostname}
	s.rebuildStatics()
	s.names.gen++
	return nil
}

// Forget removes every entry of the device hw and its static lease made by
// MakeStatic; its addresses become free. A static lease of the config
// cannot be forgotten (ErrConfigStatic).
func (s *Server) Forget(hw net.HardwareAddr) error {
	return s.device(hw, "forget", "lease forgotten", s.forget)
}

// device runs op (MakeStatic's or Forget's) on the table entries of the
// device hw and logs done: errors say what was asked for.
func (s *Server) device(hw net.HardwareAddr, what, done string, op func(mac) error) error {
	m, ok := macOf(hw)
	if !ok {
		return fmt.Errorf("dhcpd: %s %v: not an Ethernet address", what, hw)
	}
	s.mu.Lock()
	err := op(m)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("dhcpd: %s %v: %w", what, hw, err)
	}
	s.log.Info("dhcpd: "+done, "mac", m)
	s.changed()
	return nil
}

func (s *Server) forget(m mac) error {
	if s.pol.static[m].MAC != nil {
		return ErrConfigStatic
	}
	found := s.forgetReclaimed(m)
	for _, e := range s.byKey {
		if e.mac == m {
			s.del(e)
			found = true
		}
	}
	if _, ok := s.pins[m]; ok {
		delete(s.pins, m)
		s.rebuildStatics()
		found = true
	}
	if !found {
		return ErrNoLease
	}
	s.names.gen++
	return nil
}
