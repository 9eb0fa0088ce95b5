package ra

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
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
	log = cmp.Or(log, slog.Default())
	cfg.MAC = slices.Clone(cfg.MAC)
	cfg.DNS = slices.Clone(cfg.DNS)
	cfg.Domains = slices.Clone(cfg.Domains)
	return &Server{cfg: cfg, log: log.With("iface", cfg.Interface), kick: make(chan struct{}, 1),
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

// advertisement is the RA to send at now, or nil when there is nothing to
// announce; deprecated prefixes past their valid time are forgotten.
func (s *Server) advertisement(now time.Time, mac net.HardwareAddr) *ndp.RouterAdvertisement {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deprecated = slices.DeleteFunc(s.deprecated, func(p Prefix) bool { return !now.Before(p.Valid) })
	ra := &ndp.RouterAdvertisement{CurrentHopLimit: 64, OtherConfiguration: s.cfg.OtherConfig}
	valid := false
	for _, p := range s.current {
		if !now.Before(p.Valid) {
			continue
		}
		valid = true
		ra.Options = append(ra.Options, pio(p.Prefix, min(left(now, p.Preferred), preferredLimit), min(left(now, p.Valid), validLimit)))
	}
	for _, p := range s.deprecated {
		ra.Options = append(ra.Options, pio(p.Prefix, 0, 0))
	}
	if len(ra.Options) == 0 {
		return nil
	}
	if valid {
		ra.RouterLifetime = s.cfg.RouterLifetime
	}
	if len(mac) == 6 {
		ra.Options = append(ra.Options, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac})
	}
	if s.cfg.MTU > 0 {
		ra.Options = append(ra.Options, ndp.NewMTU(uint32(s.cfg.MTU)))
	}
	life := 3 * s.cfg.MaxInterval // RFC 8106 section 5.1
	if !valid {
		life = 0
	}
	if len(s.cfg.DNS) > 0 {
		ra.Options = append(ra.Options, &ndp.RecursiveDNSServer{Lifetime: life, Servers: s.cfg.DNS})
	}
	if len(s.cfg.Domains) > 0 {
		ra.Options = append(ra.Options, &ndp.DNSSearchList{Lifetime: life, DomainNames: s.cfg.Domains})
	}
	return ra
}

func pio(p netip.Prefix, preferred, valid time.Duration) *ndp.PrefixInformation {
	return &ndp.PrefixInformation{PrefixLength: uint8(p.Bits()), OnLink: true, AutonomousAddressConfiguration: true,
		PreferredLifetime: preferred, ValidLifetime: valid, Prefix: p.Addr()}
}

// left is the whole seconds from now to t, at least 0.
func left(now, t time.Time) time.Duration {
	return max(t.Sub(now), 0).Truncate(time.Second)
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
