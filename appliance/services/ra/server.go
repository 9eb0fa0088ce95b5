package ra

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
)

// Server announces the LAN's prefixes. Serve drives it; SetPrefixes,
// Prefixes and Stats may be called from any goroutine.
type Server struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	current    []Prefix
	deprecated []Prefix // removed, announced with lifetimes 0 until Valid
	stats      Stats
	kick       chan struct{} // a change: send an RA now
}

// Stats counts what the server did.
type Stats struct {
	// Sent counts the RAs sent: "unsolicited", "solicited" (answers to
	// RS), "change" (after SetPrefixes).
	Sent map[string]uint64
	// Solicitations counts the RSs received; Dropped the ones that were
	// not valid (by reason) or came too fast.
	Solicitations uint64
	Dropped       map[string]uint64
	LastError     string
}

// New checks cfg and returns a server announcing nothing yet. A nil log
// logs to slog.Default.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("ra: %w", err)
	}
	cfg.MAC = slices.Clone(cfg.MAC)
	cfg.DNS = slices.Clone(cfg.DNS)
	cfg.Domains = slices.Clone(cfg.Domains)
	return &Server{cfg: cfg, log: cmp.Or(log, slog.Default()).With("iface", cfg.Interface), kick: make(chan struct{}, 1),
		stats: Stats{Sent: map[string]uint64{}, Dropped: map[string]uint64{}}}, nil
}

// SetPrefixes replaces the announced prefixes (/64s). A prefix no longer
// in ps is deprecated: announced with lifetimes 0 until its valid time.
// A change is announced at once.
func (s *Server) SetPrefixes(ps []Prefix) error {
	for _, p := range ps {
		if !p.Prefix.Addr().Is6() || p.Prefix.Bits() != 64 || p.Prefix != p.Prefix.Masked() {
			return fmt.Errorf("ra: prefix %v is not a /64 for SLAAC", p.Prefix)
		}
	}
	s.mu.Lock()
	for _, old := range s.current {
		if !slices.ContainsFunc(ps, func(p Prefix) bool { return p.Prefix == old.Prefix }) {
			s.deprecated = append(s.deprecated, old)
		}
	}
	s.deprecated = slices.DeleteFunc(s.deprecated, func(d Prefix) bool {
		return slices.ContainsFunc(ps, func(p Prefix) bool { return p.Prefix == d.Prefix })
	})
	s.current = slices.Clone(ps)
	s.mu.Unlock()
	s.announce()
	return nil
}

// SetDNS replaces the announced DNS servers and search domains (checked as
// in Config); a change is announced at once.
func (s *Server) SetDNS(dns []netip.Addr, domains []string) error {
	s.mu.Lock()
	c := s.cfg
	s.mu.Unlock()
	c.DNS, c.Domains = slices.Clone(dns), slices.Clone(domains)
	if err := c.check(); err != nil {
		return fmt.Errorf("ra: %w", err)
	}
	s.mu.Lock()
	same := slices.Equal(s.cfg.DNS, c.DNS) && slices.Equal(s.cfg.Domains, c.Domains)
	s.cfg.DNS, s.cfg.Domains = c.DNS, c.Domains
	s.mu.Unlock()
	if !same {
		s.announce()
	}
	return nil
}

// SetOtherConfig sets or clears the O flag (Config.OtherConfig); a change
// is announced at once.
func (s *Server) SetOtherConfig(on bool) {
	s.mu.Lock()
	same := s.cfg.OtherConfig == on
	s.cfg.OtherConfig = on
	s.mu.Unlock()
	if !same {
		s.announce()
	}
}

// Prefixes returns the announced and the deprecated prefixes.
func (s *Server) Prefixes() (current, deprecated []Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.current), slices.Clone(s.deprecated)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Sent, st.Dropped = maps.Clone(s.stats.Sent), maps.Clone(s.stats.Dropped)
	return st
}

func (s *Server) count(kind string) {
	s.mu.Lock()
	s.stats.Sent[kind]++
	s.mu.Unlock()
}

func (s *Server) drop(why string) {
	s.mu.Lock()
	s.stats.Dropped[why]++
	s.mu.Unlock()
}

func (s *Server) fail(err error) {
	s.log.Warn("router advertisements", "err", err)
	s.mu.Lock()
	s.stats.LastError = err.Error()
	s.mu.Unlock()
}

// announce has Serve send an RA now (a change), once for any number of
// calls before it does.
func (s *Server) announce() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
