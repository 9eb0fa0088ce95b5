package dhcp6s

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Server answers the LAN's DHCPv6 clients. Serve drives it; SetDNS and
// Stats may be called from any goroutine.
type Server struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
	ans atomic.Pointer[answers] // its duid is nil until Serve knows the interface's MAC
	lim *limiter

	received atomic.Uint64
	served   [dhcpv6.MessageTypeInformationRequest + 1]atomic.Uint64 // by the type of the message answered
	dropped  [numReasons]atomic.Uint64
	lastErr  atomic.Pointer[string]
}

// Stats counts what the server did.
type Stats struct {
	// Received counts the messages read from the socket.
	Received uint64
	// Served counts the answers by the message answered:
	// "information-request", "solicit", "request", "renew", "release",
	// "decline".
	Served map[string]uint64
	// Dropped counts the messages without an answer by reason (see
	// Reason).
	Dropped   map[string]uint64
	LastError string
}

// New checks cfg and returns a server; nothing is opened before Serve. A
// nil log logs to slog.Default.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("dhcp6s: %w", err)
	}
	s := &Server{cfg: cfg, log: cmp.Or(log, slog.Default()).With("iface", cfg.Interface), now: time.Now, lim: newLimiter(cfg.Rate, cfg.ClientRate)}
	s.ans.Store(newAnswers(cfg.DUID, cfg.DNS, cfg.Domains, cfg.InfoRefresh))
	return s, nil
}

// SetDNS replaces the DNS servers and search domains answered (checked as
// in Config) from the next message on.
func (s *Server) SetDNS(dns []netip.Addr, domains []string) error {
	if err := checkDNS(dns, domains); err != nil {
		return fmt.Errorf("dhcp6s: %w", err)
	}
	for {
		old := s.ans.Load()
		if s.ans.CompareAndSwap(old, newAnswers(old.duid, dns, domains, old.irt)) {
			return nil
		}
	}
}

// DUID is the Server Identifier in use: the configured one, else the
// interface's DUID-LL once Serve has read its MAC (nil before).
func (s *Server) DUID() dhcpv6.DUID { return s.ans.Load().duid }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	st := Stats{Received: s.received.Load(), Served: map[string]uint64{}, Dropped: map[string]uint64{}}
	for t := range s.served {
		if n := s.served[t].Load(); n != 0 {
			st.Served[strings.ToLower(dhcpv6.MessageType(t).String())] = n
		}
	}
	for r := ReasonNone + 1; r < numReasons; r++ {
		if n := s.dropped[r].Load(); n != 0 {
			st.Dropped[r.String()] = n
		}
	}
	if e := s.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}
