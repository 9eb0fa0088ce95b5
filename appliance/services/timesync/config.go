package timesync

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// Defaults for the zero fields of Config.
const (
	// DefaultInterval is the steady poll interval, 2^10 s (ntpd's maxpoll):
	// a quartz clock off by 50 ppm drifts 51 ms in that time, which a slew
	// corrects, and the pool asks clients not to poll more often than they
	// need.
	DefaultInterval = 1024 * time.Second
	// DefaultMinInterval is the poll interval right after a sync or a step,
	// 2^4 s (ntpd's minpoll): the first rounds show whether the correction
	// held before the interval doubles up to DefaultInterval.
	DefaultMinInterval = 16 * time.Second
	// DefaultTimeout bounds one query and one name lookup.
	DefaultTimeout = 2 * time.Second
	// DefaultMaxStep is the step threshold (ntpd's 128 ms): larger offsets
	// are stepped, smaller ones slewed, so that time never jumps backwards
	// for small corrections.
	DefaultMaxStep = 128 * time.Millisecond
	// DefaultPanic is the panic threshold (ntpd's 1000 s): once synced, an
	// offset this large is applied only if the next round confirms it.
	DefaultPanic = 1000 * time.Second
	// DefaultSanity is how far past Floor an answer may put the time.
	DefaultSanity = 20 * 365 * 24 * time.Hour
)

// BuildFloor is the default Config.Floor: the day this package was
// written. No honest server puts the time before it; the supervisor passes
// its own build time, which is later.
var BuildFloor = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// DefaultServers returns the servers asked when Config.Servers is empty:
// the NTP pool's gokrazy vendor zone, which gokrazy's own ntp program asks.
// Four names give four independent servers, enough to outvote a
// falseticker.
func DefaultServers() []string {
	return []string{"0.gokrazy.pool.ntp.org", "1.gokrazy.pool.ntp.org", "2.gokrazy.pool.ntp.org", "3.gokrazy.pool.ntp.org"}
}

// Resolver looks up a server name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config says which servers to ask and how to keep the clock. Zero fields
// take the defaults above.
type Config struct {
	// Servers are addresses ("192.0.2.1", "2001:db8::1"), host names
	// ("0.pool.ntp.org") or either with a port ("192.0.2.1:123",
	// "[2001:db8::1]:123"). Empty means DefaultServers. The supervisor
	// passes its runtime config's servers and the WAN lease's option 42.
	Servers []string
	// Resolver resolves host names; nil means net.DefaultResolver. The box
	// may have no DNS before its router services run: addresses need none.
	Resolver Resolver
	// Source, when valid, is the local address queries are sent from (the
	// box's router address, whose policy route leads through the WAN).
	Source netip.Addr
	// Clock is the clock to keep; nil means System().
	Clock Clock
	// Interval is the steady poll interval (DefaultInterval).
	Interval time.Duration
	// MinInterval is the poll interval after a sync or a step, doubling on
	// each good round up to Interval (DefaultMinInterval). Before the first
	// sync a failed round is retried after MinInterval/8 (2 s by default),
	// doubling up to MinInterval; a failing server is skipped for as long.
	MinInterval time.Duration
	// Timeout bounds one query and one name lookup (DefaultTimeout).
	Timeout time.Duration
	// MaxStep: an offset larger than this steps the clock, a smaller one
	// slews it (DefaultMaxStep).
	MaxStep time.Duration
	// Panic: once synced, an offset larger than this is applied only when
	// the next round (after MinInterval) finds it again (DefaultPanic).
	Panic time.Duration
	// Floor: answers that put the time before it are refused (BuildFloor).
	Floor time.Time
	// Sanity: answers that put the time after Floor+Sanity are refused
	// (DefaultSanity).
	Sanity time.Duration
}

// normalize fills in defaults and checks cfg.
func normalize(cfg Config) (Config, []server, error) {
	if len(cfg.Servers) == 0 {
		cfg.Servers = DefaultServers()
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Clock == nil {
		cfg.Clock = System()
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Interval", &cfg.Interval, DefaultInterval},
		{"MinInterval", &cfg.MinInterval, DefaultMinInterval},
		{"Timeout", &cfg.Timeout, DefaultTimeout},
		{"MaxStep", &cfg.MaxStep, DefaultMaxStep},
		{"Panic", &cfg.Panic, DefaultPanic},
		{"Sanity", &cfg.Sanity, DefaultSanity},
	} {
		if *d.v < 0 {
			return Config{}, nil, fmt.Errorf("timesync config: %s %v is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.MinInterval > cfg.Interval {
		return Config{}, nil, fmt.Errorf("timesync config: MinInterval %v is longer than Interval %v", cfg.MinInterval, cfg.Interval)
	}
	if cfg.Floor.IsZero() {
		cfg.Floor = BuildFloor
	}
	var servers []server
	var specs []string
	for i, spec := range cfg.Servers {
		s, err := parseServer(spec)
		if err != nil {
			return Config{}, nil, fmt.Errorf("timesync config: Servers[%d]: %w", i, err)
		}
		if !slices.Contains(specs, s.String()) {
			servers = append(servers, s)
			specs = append(specs, s.String())
		}
	}
	cfg.Servers = specs
	return cfg, servers, nil
}

// Update replaces the configuration from the next round on; a changed
// server list starts a round at once. Servers that stay keep their state
// (backoff, kiss of death, counters). An invalid cfg changes nothing.
func (c *Client) Update(cfg Config) error {
	cfg, servers, err := normalize(cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := !slices.Equal(cfg.Servers, c.cfg.Servers)
	old := c.sources
	c.sources = nil
	for _, srv := range servers {
		i := slices.IndexFunc(old, func(s *source) bool { return s.srv == srv })
		if i >= 0 {
			c.sources = append(c.sources, old[i])
			continue
		}
		c.sources = append(c.sources, &source{srv: srv, st: ServerStatus{Server: srv.String()}})
	}
	c.cfg = cfg
	if c.poll == 0 {
		c.poll = cfg.MinInterval
	}
	c.poll = min(max(c.poll, cfg.MinInterval), cfg.Interval)
	if changed {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return nil
}
