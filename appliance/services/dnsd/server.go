package dnsd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Server answers DNS queries on LAN addresses.
type Server struct {
	log   *slog.Logger
	ns    *netns
	now   func() time.Time
	st    atomic.Pointer[settings]
	ups   atomic.Pointer[[]*upstream]
	cache *cache
	lim   *limiter
	tcp   *connLimit
	stats counters

	// base is cancelled when Serve returns: upstream queries abort.
	base   context.Context
	cancel context.CancelFunc

	flightMu sync.Mutex
	flights  map[flightKey]*flight

	noUpstreamLogged atomic.Bool

	mu        sync.Mutex // serializes Update, Serve's start and stop
	listeners map[netip.AddrPort]*listener
	serving   bool
	stopped   bool
	errc      chan error
}

// New validates cfg and binds its listen addresses (UDP and TCP; on Linux
// with IP_FREEBIND, so a LAN address not configured yet binds). The
// sockets, and every upstream socket later, belong to the network
// namespace of the calling thread. Serve must follow: it releases them
// when it returns.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	st, err := newSettings(cfg)
	if err != nil {
		return nil, err
	}
	log = cmp.Or(log, slog.Default())
	ns, err := captureNetns()
	if err != nil {
		return nil, fmt.Errorf("dnsd: %w", err)
	}
	s := &Server{
		log:       log,
		ns:        ns,
		now:       time.Now,
		cache:     newCache(st.cfg.CacheSize, st.cfg.CacheBytes),
		lim:       newLimiter(st.cfg.RateLimit, st.cfg.RateBurst),
		tcp:       &connLimit{per: make(map[netip.Addr]int)},
		flights:   make(map[flightKey]*flight),
		listeners: make(map[netip.AddrPort]*listener),
		errc:      make(chan error, 1),
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.st.Store(st)
	ups := newUpstreams(st.cfg.Upstreams)
	s.ups.Store(&ups)
	for _, ap := range st.cfg.Listen {
		l, err := s.bind(ap)
		if err != nil {
			for _, l := range s.listeners {
				l.close()
			}
			ns.close()
			return nil, err
		}
		s.listeners[ap] = l
	}
	return s, nil
}

// Serve answers queries until ctx ends or a listener fails, then closes
// every socket and returns (nil when ctx ended).
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.serving || s.stopped {
		s.mu.Unlock()
		return errors.New("dnsd: Serve called twice")
	}
	s.serving = true
	for _, l := range s.listeners {
		s.start(l)
	}
	s.mu.Unlock()
	st := s.st.Load()
	s.log.Info("dnsd: serving", "listen", s.Addrs(), "upstreams", st.cfg.Upstreams, "domain", st.domain)

	var err error
	select {
	case <-ctx.Done():
	case err = <-s.errc:
		s.log.Error("dnsd: listener failed", "err", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.cancel()
	for ap, l := range s.listeners {
		l.stop()
		delete(s.listeners, ap)
	}
	s.ns.close()
	return err
}

// Update applies cfg to the running server: new listen addresses are bound
// (all or none: on an error nothing changes), dropped ones closed; local
// names, TTLs, limits and the cache bounds apply to the next query. The
// cache is kept unless the set of upstreams changed, which flushes it.
func (s *Server) Update(cfg Config) error {
	st, err := newSettings(cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("dnsd: update: server stopped")
	}
	// Each listen address keeps its listener when one is bound there: by
	// the configured address, or by the bound one (a port 0 resolved).
	keep := map[netip.AddrPort]*listener{}
	added := map[netip.AddrPort]*listener{}
	for _, ap := range st.cfg.Listen {
		if l := s.listeners[ap]; l != nil {
			keep[ap] = l
			continue
		}
		if l := s.listenerAt(ap); l != nil {
			keep[ap] = l
			continue
		}
		l, err := s.bind(ap)
		if err != nil {
			for _, l := range added {
				l.close()
			}
			return fmt.Errorf("dnsd: update: %w", err)
		}
		added[ap] = l
	}

	old := s.st.Load()
	if !slices.Equal(old.cfg.Upstreams, st.cfg.Upstreams) {
		oldUps := *s.ups.Load()
		ups := newUpstreams(st.cfg.Upstreams)
		sameSet := len(oldUps) == len(ups)
		for i, u := range ups {
			j := slices.IndexFunc(oldUps, func(o *upstream) bool { return o.addr == u.addr })
			if j < 0 {
				sameSet = false
				continue
			}
			ups[i] = oldUps[j]
		}
		if !sameSet {
			ups = newUpstreams(st.cfg.Upstreams)
			s.cache.flush()
			s.log.Info("dnsd: upstreams changed, cache flushed", "upstreams", st.cfg.Upstreams)
		}
		s.ups.Store(&ups)
		s.noUpstreamLogged.Store(false)
	}
	s.cache.resize(st.cfg.CacheSize, st.cfg.CacheBytes)
	s.lim.configure(st.cfg.RateLimit, st.cfg.RateBurst)
	s.st.Store(st)

	kept := map[*listener]bool{}
	for _, l := range keep {
		kept[l] = true
	}
	for _, l := range s.listeners {
		if !kept[l] {
			l.stop()
		}
	}
	s.listeners = keep
	for ap, l := range added {
		s.listeners[ap] = l
		if s.serving {
			s.start(l)
		}
	}
	if len(added) > 0 {
		s.log.Info("dnsd: listening", "listen", s.addrsLocked())
	}
	return nil
}

// listenerAt returns the listener bound at ap, if any.
func (s *Server) listenerAt(ap netip.AddrPort) *listener {
	for _, l := range s.listeners {
		if l.addr == ap {
			return l
		}
	}
	return nil
}

// Flush empties the cache.
func (s *Server) Flush() { s.cache.flush() }

// Addrs returns the bound listen addresses (ports filled in), in the
// configured order.
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrsLocked()
}

func (s *Server) addrsLocked() []netip.AddrPort {
	var out []netip.AddrPort
	for _, ap := range s.st.Load().cfg.Listen {
		if l := s.listeners[ap]; l != nil {
			out = append(out, l.addr)
		}
	}
	return out
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	out := Stats{
		QueriesUDP:       c.queriesUDP.Load(),
		QueriesTCP:       c.queriesTCP.Load(),
		RateLimited:      c.rateLimited.Load(),
		Invalid:          c.invalid.Load(),
		Local:            c.local.Load(),
		Any:              c.anyQ.Load(),
		CacheHits:        c.hits.Load(),
		CacheMisses:      c.misses.Load(),
		Coalesced:        c.coalesced.Load(),
		UpstreamQueries:  c.upQueries.Load(),
		UpstreamFailures: c.upFailures.Load(),
		UpstreamTimeouts: c.upTimeouts.Load(),
		ServFail:         c.servFail.Load(),
		Truncated:        c.truncated.Load(),
		Latency:          c.latency.snapshot(),
	}
	out.CacheEntries, out.CacheBytes = s.cache.size()
	now := s.now().UnixNano()
	for _, u := range *s.ups.Load() {
		out.Upstreams = append(out.Upstreams, UpstreamStats{
			Addr:     u.addr,
			Queries:  u.queries.Load(),
			Failures: u.failures.Load(),
			Timeouts: u.timeouts.Load(),
			Demoted:  u.badUntil.Load() > now,
		})
	}
	return out
}
