// Package dhcpd is the LAN DHCPv4 server of the NAT router: a bounded, flood-proof lease table with static leases, conflict quarantine and persistence, served on a socket bound to the LAN interface.
package dhcpd

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol timers.
const (
	// OfferHold is how long an offered address stays reserved for the
	// client it was offered to (unless the table is full, see Server).
	OfferHold = 30 * time.Second
	// QuarantineTime is how long a declined address is not offered.
	QuarantineTime = 10 * time.Minute
)

// Stats are the server's counters.
type Stats struct {
	Discovers, Offers, Requests, Acks, Naks uint64
	Declines, Releases, Informs             uint64
	Dropped                                 uint64 // requests not answered: malformed, foreign, rate-limited or no address left
	PoolSize                                int    // dynamic addresses
	LeasesInUse                             int    // bound, unexpired leases (static ones too)
	Offered                                 int    // pending offers
	LeaseFileWrites                         uint64 // lease file writes (changes are coalesced)
	// Unproven are the bindings whose devices have not used their
	// address yet; Reclaimed and Refused sum Ports' (see probation.go).
	Unproven           int
	Reclaimed, Refused uint64
	// Ports are the ports with unproven bindings, reclaims or refusals.
	Ports []PortStats
}

// Server is the DHCPv4 server. Its methods are safe for concurrent use.
//
// The table holds at most MaxLeases entries with dynamic addresses plus one
// per static address. A new client takes a free address; when the table is
// full or the pool exhausted it takes the place of the entry that expired
// first among those not bound: released or expired leases and offers
// (which expire OfferHold after they are made), else the binding of a
// device that never used its address (probation.go). Proven bound leases
// and static leases are never taken, so a flood of new clients cannot
// displace known devices or stop them from renewing.
type Server struct {
	// OnChange, if set, is called (without locks held) after a lease is
	// bound, renewed, released, declined, expired, forgotten or made
	// static, and after Update. Offers do not call it. Set it before Serve
	// and do not change it afterwards; it must return quickly.
	OnChange func()

	log *slog.Logger
	now func() time.Time // the clock; tests replace it

	mu     sync.Mutex
	pol    *policy
	byKey  map[string]*entry
	byIP   map[netip.Addr]*entry
	offers entryHeap // dynamic entries in state offered, by expiry
	leased entryHeap // the other dynamic entries, by expiry
	// The offers by port, and the unproven bindings within their
	// probation by port and past it (probation.go).
	offerQ, probation, unused queues
	groups                    map[string]*group // per port: new-device limit, counters
	recent                    []reclaimed       // bindings reclaimed lately (revive.go)
	reclaimedAny              bool              // a binding was reclaimed (see reclaimedSince)
	pins                      map[mac]pin
	static                    map[mac]Static     // config statics and pins
	staticIP                  map[netip.Addr]mac // their addresses
	declined                  map[netip.Addr]time.Time
	cursor                    uint32 // where the next free-address scan starts
	names                     namesCache
	warned                    time.Time // last "pool exhausted" warning

	stats   counters
	dirty   chan struct{} // the lease file needs writing
	reopen  chan struct{} // Serve must reopen its socket (Interface changed)
	serving atomic.Bool

	saveMu    sync.Mutex // serializes lease file writes
	savedPath string     // what was last written, and where
	saved     []byte
	saveErr   time.Time // last logged save failure
}

type counters struct {
	discovers, offers, requests, acks, naks atomic.Uint64
	declines, releases, informs, dropped    atomic.Uint64
	writes                                  atomic.Uint64
}

// New validates cfg and returns a server with the leases of cfg.LeaseFile
// (a missing file is an empty table; a corrupt one is logged and ignored).
func New(cfg Config, log *slog.Logger) (*Server, error) {
	return newServer(cfg, log, time.Now)
}

// newServer is New with a clock.
func newServer(cfg Config, log *slog.Logger, now func() time.Time) (*Server, error) {
	pol, err := newPolicy(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		log:      log,
		now:      now,
		pol:      pol,
		byKey:    map[string]*entry{},
		byIP:     map[netip.Addr]*entry{},
		pins:     map[mac]pin{},
		declined: map[netip.Addr]time.Time{},
		groups:   map[string]*group{},
		cursor:   pol.start,
		dirty:    make(chan struct{}, 1),
		reopen:   make(chan struct{}, 1),
	}
	s.offerQ, s.probation, s.unused = newQueues(offerTime), newQueues(boundTime), newQueues(boundTime)
	s.rebuildStatics()
	if pol.cfg.LeaseFile != "" {
		s.load(pol.cfg.LeaseFile)
	}
	return s, nil
}

// Config returns the running config with its defaults filled in.
func (s *Server) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pol.cfg.clone()
}

// Update applies cfg live. Leases stay valid where the new pool and
// statics allow; a lease outside the new pool or on a new static address
// of another device is refused (NAK) when its client renews. Pins (see
// MakeStatic) that conflict with cfg are dropped.
func (s *Server) Update(cfg Config) error {
	pol, err := newPolicy(cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.pol
	s.pol = pol
	if !pol.inPool(addrOf(s.cursor)) {
		s.cursor = pol.start
	}
	for _, g := range s.groups {
		g.limiter = bucket{}
	}
	if pol.cfg.Activity == nil {
		for _, e := range s.byKey {
			e.proven = true
		}
	}
	s.rebuildStatics()
	s.share(s.now()) // within a smaller share
	s.names.gen++
	s.mu.Unlock()
	if old.cfg.Interface != pol.cfg.Interface {
		select {
		case s.reopen <- struct{}{}:
		default:
		}
	}
	s.log.Info("dhcpd: config applied", "interface", pol.cfg.Interface, "subnet", pol.subnet,
		"pool", fmt.Sprintf("%v-%v", addrOf(pol.start), addrOf(pol.end)), "static", len(s.static))
	s.changed()
	return nil
}

// rebuildStatics merges the config's statics with the pins, drops pins
// that conflict with the config, and recounts the dynamic entries.
func (s *Server) rebuildStatics() {
	p := s.pol
	s.static = make(map[mac]Static, len(p.static)+len(s.pins))
	s.staticIP = make(map[netip.Addr]mac, len(p.static)+len(s.pins))
	for m, st := range p.static {
		s.static[m] = st
		s.staticIP[st.IP] = m
	}
	for m, pn := range s.pins {
		why := ""
		switch _, dup := s.staticIP[pn.IP]; {
		case p.static[m].MAC != nil:
			why = "the config has a static lease for this MAC"
		case dup:
			why = "the config gives its address to another MAC"
		case !p.host(pn.IP):
			why = "its address is not a host address of the subnet any more"
		}
		if why != "" {
			s.log.Warn("dhcpd: dropping static lease made from a lease", "mac", m, "ip", pn.IP, "why", why)
			delete(s.pins, m)
			continue
		}
		s.static[m] = Static{MAC: slices.Clone(net.HardwareAddr(m[:])), IP: pn.IP, Hostname: pn.Hostname}
		s.staticIP[pn.IP] = m
	}
	s.reindex()
}

// holdsStatic reports whether e holds its own static address.
func (s *Server) holdsStatic(e *entry) bool {
	m, ok := s.staticIP[e.ip]
	return ok && m == e.mac
}

// changed marks the lease file dirty and calls OnChange.
func (s *Server) changed() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
	if s.OnChange != nil {
		s.OnChange()
	}
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Discovers: s.stats.discovers.Load(), Offers: s.stats.offers.Load(),
		Requests: s.stats.requests.Load(), Acks: s.stats.acks.Load(), Naks: s.stats.naks.Load(),
		Declines: s.stats.declines.Load(), Releases: s.stats.releases.Load(),
		Informs: s.stats.informs.Load(), Dropped: s.stats.dropped.Load(),
		LeaseFileWrites: s.stats.writes.Load(),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	st.PoolSize = s.poolSize()
	s.age(now)
	st.Unproven = s.probation.n + s.unused.n
	st.Ports = s.portStats(now)
	for _, p := range st.Ports {
		st.Reclaimed += p.Reclaimed
		st.Refused += p.Refused
	}
	for _, e := range s.byKey {
		switch {
		case e.state == StateBound && now.Before(e.expiry):
			st.LeasesInUse++
		case e.state == StateOffered && now.Before(e.expiry):
			st.Offered++
		}
	}
	return st
}

// Pool returns the first and last address of the dynamic pool: the
// config's, or the subnet's host addresses when it names none.
func (s *Server) Pool() (first, last netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return addrOf(s.pol.start), addrOf(s.pol.end)
}

func (s *Server) poolSize() int {
	pinned := make(map[netip.Addr]bool, len(s.pins))
	for _, pn := range s.pins {
		pinned[pn.IP] = true
	}
	return s.pol.poolSize(pinned)
}

// sweep forgets expired offers and quarantines, and marks bound leases
// that ran out as expired. It reports whether a lease expired.
func (s *Server) sweep() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	expired := false
	for _, e := range s.byKey {
		switch {
		case e.state == StateOffered && !now.Before(e.expiry):
			s.del(e)
		case e.state == StateBound && !now.Before(e.expiry):
			e.state = StateExpired // in place: its heap and key stay the same
			unqueue(e)
			expired = true
		}
	}
	for a, until := range s.declined {
		if !now.Before(until) {
			delete(s.declined, a)
		}
	}
	if expired {
		s.names.gen++
	}
	return expired
}

// bucket is a token bucket: rate tokens per second, up to 2*rate.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) allow(now time.Time, rate int) bool {
	if rate < 0 {
		return true
	}
	burst := float64(2 * rate)
	if b.last.IsZero() {
		b.tokens = burst
	} else if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(burst, b.tokens+dt*float64(rate))
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
