package ra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

var (
	allNodes   = netip.MustParseAddr("ff02::1")
	allRouters = netip.MustParseAddr("ff02::2")
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
	select {
	case s.kick <- struct{}{}:
	default:
	}
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
		select {
		case s.kick <- struct{}{}:
		default:
		}
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
		select {
		case s.kick <- struct{}{}:
		default:
		}
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

// Serve announces until ctx is done (nil then); it fails when the socket
// cannot be opened. It opens the socket in the calling thread's network
// namespace.
func (s *Server) Serve(ctx context.Context) error {
	ifi, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("ra: %w", err)
	}
	mac := s.cfg.MAC
	if mac == nil {
		mac = ifi.HardwareAddr
	}
	conn, err := listen(ctx, ifi)
	if err != nil {
		return fmt.Errorf("ra: listen on %s: %w", ifi.Name, err)
	}
	if conn == nil {
		return nil // ctx ended first
	}
	defer conn.Close()
	if err := setup(conn); err != nil {
		return fmt.Errorf("ra: %s: %w", ifi.Name, err)
	}
	rs := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.readLoop(conn, rs) })
	defer func() {
		conn.Close()
		wg.Wait()
	}()
	return s.loop(ctx, conn, mac, rs)
}

// listen opens the socket on the interface's link-local address, waiting
// for one (an interface without carrier has none yet) until ctx ends (nil,
// nil then). It looks every 200 ms at first (DAD takes a second or two),
// then less and less often, up to listenPollMax: each look is a netlink
// dump of the addresses, and an interface without IPv6 never gets one.
func listen(ctx context.Context, ifi *net.Interface) (*ndp.Conn, error) {
	wait := 200 * time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if hasLinkLocal(ifi) {
			conn, _, err := ndp.Listen(ifi, ndp.LinkLocal)
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-t.C:
		}
		wait = min(wait*3/2, listenPollMax)
		t.Reset(wait)
	}
}

// listenPollMax is the longest wait between two looks for a link-local
// address.
const listenPollMax = 5 * time.Second

func hasLinkLocal(ifi *net.Interface) bool {
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}

func setup(conn *ndp.Conn) error {
	if err := conn.JoinGroup(allRouters); err != nil {
		return fmt.Errorf("join ff02::2: %w", err)
	}
	if err := conn.SetControlMessage(ipv6.FlagHopLimit, true); err != nil {
		return fmt.Errorf("hop limit control messages: %w", err)
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	if err := conn.SetICMPFilter(&f); err != nil {
		return fmt.Errorf("ICMPv6 filter: %w", err)
	}
	return nil
}

// loop sends the RAs: unsolicited on a random schedule, after a change at
// once, after a solicitation within maxRADelay but no sooner than
// minDelayBetweenRAs after the last one.
func (s *Server) loop(ctx context.Context, conn *ndp.Conn, mac net.HardwareAddr, rs <-chan struct{}) error {
	var last time.Time
	sent := 0 // unsolicited RAs so far: the first ones come sooner
	next := time.Now()
	why := "unsolicited"
	send := func(kind string) {
		now := time.Now()
		if ra := s.advertisement(now, mac); ra != nil {
			if err := conn.WriteTo(ra, nil, allNodes); err != nil {
				s.fail(fmt.Errorf("send RA: %w", err))
			} else {
				s.count(kind)
				last = now
			}
		}
		sent++
		iv := s.interval()
		if sent < maxInitialRAs {
			iv = min(iv, maxInitialInterval)
		}
		next, why = now.Add(iv), "unsolicited"
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			sent = 0 // announce a change like a new interface (RFC 4861 6.2.4)
			send("change")
		case <-rs:
			at := time.Now().Add(rand.N(maxRADelay))
			if at.Before(last.Add(minDelayBetweenRAs)) {
				at = last.Add(minDelayBetweenRAs)
			}
			if at.Before(next) {
				next, why = at, "solicited"
			}
		case <-timer.C:
			send(why)
		}
		timer.Reset(time.Until(next))
	}
}

// interval is a random time between MaxInterval/3 and MaxInterval.
func (s *Server) interval() time.Duration {
	lo := s.cfg.MaxInterval / 3
	return lo + rand.N(s.cfg.MaxInterval-lo+1)
}

// readLoop takes the router solicitations and signals them (coalesced).
func (s *Server) readLoop(conn *ndp.Conn, rs chan<- struct{}) {
	for {
		m, cm, src, err := conn.ReadFrom()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.fail(fmt.Errorf("read: %w", err))
			time.Sleep(time.Second)
			continue
		}
		if why := checkRS(m, cm, src); why != "" {
			s.drop(why)
			continue
		}
		s.mu.Lock()
		s.stats.Solicitations++
		s.mu.Unlock()
		select {
		case rs <- struct{}{}:
		default:
		}
	}
}

// checkRS says why a message is no valid router solicitation (RFC 4861
// 6.1.1), or "" for one.
func checkRS(m ndp.Message, cm *ipv6.ControlMessage, src netip.Addr) string {
	rs, ok := m.(*ndp.RouterSolicitation)
	switch {
	case !ok:
		return "not_rs"
	case cm == nil || cm.HopLimit != ndp.HopLimit:
		return "hop_limit"
	case src.IsUnspecified() && slices.ContainsFunc(rs.Options, func(o ndp.Option) bool {
		_, lla := o.(*ndp.LinkLayerAddress)
		return lla
	}):
		return "unspecified_with_lla"
	}
	return ""
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
