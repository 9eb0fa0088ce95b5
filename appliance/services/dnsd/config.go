package dnsd

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Defaults applied by New and Update to zero Config fields.
const (
	DefaultDomain         = "lan"
	DefaultCacheSize      = 10000
	DefaultCacheBytes     = 8 << 20
	DefaultTimeout        = 2 * time.Second
	DefaultMaxTTL         = 24 * time.Hour
	DefaultNegativeMaxTTL = time.Hour
	DefaultLocalTTL       = 60 * time.Second
	DefaultRateLimit      = 100 // queries per second per client
	DefaultRateBurst      = 300
	DefaultUDPSize        = 1232 // the DNS flag day 2020 size: no IP fragmentation
)

// Host is one local name: a DHCP lease or a static entry.
type Host struct {
	// Name is a single label ("laptop") or a name directly under the local
	// domain ("laptop.lan"); names that are neither are ignored.
	Name string
	// Addr answers A (IPv4) or AAAA (IPv6) queries and its PTR.
	Addr netip.Addr
}

// Local is the source of the current local names. Hosts is called for
// each query that needs them, from many goroutines at once: it must be safe
// for concurrent use and cheap. When two hosts claim one address, the PTR
// answer names the first.
type Local interface {
	Hosts() []Host
}

// LocalFunc adapts a function to Local.
type LocalFunc func() []Host

// Hosts returns f().
func (f LocalFunc) Hosts() []Host { return f() }

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	// Listen are the LAN addresses the server answers on, each with UDP and
	// TCP. Port 0 picks one free port for both (tests).
	Listen []netip.AddrPort
	// AllowWildcard permits 0.0.0.0 or :: in Listen (tests only: a
	// wildcard socket would answer on the WAN side too).
	AllowWildcard bool
	// Upstreams are tried in order, a failing one last for a while. Empty:
	// forwarded queries get SERVFAIL at once.
	Upstreams []netip.AddrPort
	// Source, when valid, is the local address upstream queries are sent
	// from (the box's router address, whose policy route leads through
	// the WAN).
	Source netip.Addr
	// Domain is the local domain ("lan"); its names never go upstream.
	Domain string
	// Hostname is the box's own name, answered as Hostname.Domain and as
	// Hostname alone with the listen addresses. Empty: none.
	Hostname string
	// Local gives the LAN hosts' names (nil: none).
	Local Local
	// Subnets are LAN prefixes whose reverse names are answered locally,
	// besides the private and special ranges of RFC 6303 that always are.
	Subnets []netip.Prefix

	// CacheSize bounds the cache in entries, CacheBytes in bytes (each
	// entry counts its wire size, its key and a fixed overhead).
	CacheSize  int
	CacheBytes int
	// Timeout bounds one upstream query before the next upstream is tried.
	Timeout time.Duration
	// MinTTL and MaxTTL clamp the record TTLs of forwarded answers (whole
	// seconds); MinTTL does not lengthen negative answers.
	MinTTL, MaxTTL time.Duration
	// NegativeMaxTTL bounds how long an NXDOMAIN or NODATA answer is
	// cached (RFC 2308: the SOA minimum, at most this).
	NegativeMaxTTL time.Duration
	// LocalTTL is the TTL of local answers and of their negative answers.
	LocalTTL time.Duration

	// RateLimit is the queries per second one client address may send,
	// with bursts up to RateBurst; excess queries are dropped. Negative
	// RateLimit: no limit.
	RateLimit float64
	RateBurst int
	// UDPSize is the largest UDP response sent and the EDNS buffer size
	// advertised, in bytes (512..4096).
	UDPSize int
}

// settings is a validated Config with its defaults applied, in the forms
// the handler uses. It is immutable once built.
type settings struct {
	cfg      Config
	domain   string // canonical fqdn: "lan."
	hostname string // lowercase label, "" for none
	listen   []netip.Addr
	subnets  []netip.Prefix

	minTTL, maxTTL, negMaxTTL, localTTL uint32
}

func (c Config) withDefaults() Config {
	c.Domain = cmp.Or(c.Domain, DefaultDomain)
	c.CacheSize = cmp.Or(c.CacheSize, DefaultCacheSize)
	c.CacheBytes = cmp.Or(c.CacheBytes, DefaultCacheBytes)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxTTL = cmp.Or(c.MaxTTL, DefaultMaxTTL)
	c.NegativeMaxTTL = cmp.Or(c.NegativeMaxTTL, DefaultNegativeMaxTTL)
	c.LocalTTL = cmp.Or(c.LocalTTL, DefaultLocalTTL)
	c.RateLimit = cmp.Or(c.RateLimit, DefaultRateLimit)
	c.RateBurst = cmp.Or(c.RateBurst, DefaultRateBurst)
	c.UDPSize = cmp.Or(c.UDPSize, DefaultUDPSize)
	return c
}

// Validate reports whether c (with defaults applied) is usable. Every
// problem is reported, joined.
func (c Config) Validate() error {
	_, err := newSettings(c)
	return err
}

func newSettings(c Config) (*settings, error) {
	c = c.withDefaults()
	var pr problems
	listen, seen := pr.listen(c)
	pr.upstreams(c, seen)
	domain, hostname, subnets := pr.names(c)
	s := &settings{
		cfg:       c,
		domain:    domain,
		hostname:  hostname,
		listen:    listen,
		subnets:   subnets,
		minTTL:    pr.secs("minTTL", c.MinTTL),
		maxTTL:    pr.secs("maxTTL", c.MaxTTL),
		negMaxTTL: pr.secs("negativeMaxTTL", c.NegativeMaxTTL),
		localTTL:  pr.secs("localTTL", c.LocalTTL),
	}
	if s.minTTL > s.maxTTL {
		pr.bad("minTTL %s above maxTTL %s", c.MinTTL, c.MaxTTL)
	}
	pr.limits(c)
	if len(pr) > 0 {
		return nil, fmt.Errorf("dnsd: config: %w", errors.Join(pr...))
	}
	return s, nil
}

// problems collects every problem a Config has.
type problems []error

func (pr *problems) bad(format string, args ...any) { *pr = append(*pr, fmt.Errorf(format, args...)) }

// listen checks the listen addresses and returns the distinct ones that
// are not wildcards, and the set of all.
func (pr *problems) listen(c Config) ([]netip.Addr, map[netip.AddrPort]bool) {
	if len(c.Listen) == 0 {
		pr.bad("listen: no addresses")
	}
	seen := map[netip.AddrPort]bool{}
	var listen []netip.Addr
	for i, ap := range c.Listen {
		switch {
		case !ap.IsValid():
			pr.bad("listen[%d]: invalid address", i)
			continue
		case ap.Addr().Zone() != "":
			pr.bad("listen[%d] %s: zoned addresses are not supported", i, ap)
		case ap.Addr().IsUnspecified() && !c.AllowWildcard:
			pr.bad("listen[%d] %s: wildcard address refused (the server listens on LAN addresses only)", i, ap)
		case ap.Addr().IsMulticast():
			pr.bad("listen[%d] %s: multicast address", i, ap)
		}
		if seen[ap] {
			pr.bad("listen[%d] %s: listed twice", i, ap)
		}
		seen[ap] = true
		if a := ap.Addr().Unmap(); !a.IsUnspecified() && !slices.Contains(listen, a) {
			listen = append(listen, a)
		}
	}
	return listen, seen
}

// upstreams checks the upstream servers: unicast, distinct, none of
// them a listen address.
func (pr *problems) upstreams(c Config, listen map[netip.AddrPort]bool) {
	ups := map[netip.AddrPort]bool{}
	for i, ap := range c.Upstreams {
		switch {
		case !ap.IsValid():
			pr.bad("upstreams[%d]: invalid address", i)
			continue
		case ap.Port() == 0:
			pr.bad("upstreams[%d] %s: port 0", i, ap)
		case ap.Addr().IsUnspecified() || ap.Addr().IsMulticast():
			pr.bad("upstreams[%d] %s: not a unicast address", i, ap)
		case listen[ap]:
			pr.bad("upstreams[%d] %s: is a listen address (a query loop)", i, ap)
		}
		if ups[ap] {
			pr.bad("upstreams[%d] %s: listed twice", i, ap)
		}
		ups[ap] = true
	}
}

// names checks the local domain, the box's host name and the local
// subnets, and returns them canonical.
func (pr *problems) names(c Config) (domain, hostname string, subnets []netip.Prefix) {
	domain = dns.CanonicalName(c.Domain)
	if !validDomain(domain) {
		pr.bad("domain %q: not a domain name of letters, digits and hyphens", c.Domain)
	} else if dns.IsSubDomain("arpa.", domain) && domain != "home.arpa." {
		pr.bad("domain %q: under arpa.", c.Domain)
	}
	hostname = strings.ToLower(c.Hostname)
	if hostname != "" && !validLabel(hostname) {
		pr.bad("hostname %q: not a single label of letters, digits and hyphens", c.Hostname)
	}
	for i, p := range c.Subnets {
		if !p.IsValid() {
			pr.bad("subnets[%d]: invalid prefix", i)
			continue
		}
		subnets = append(subnets, p.Masked())
	}
	return domain, hostname, subnets
}

// secs is d in whole seconds, a problem if it is out of range.
func (pr *problems) secs(name string, d time.Duration) uint32 {
	if d < 0 || d > time.Duration(math.MaxInt32)*time.Second {
		pr.bad("%s %s: out of range (0 to 2^31-1 s)", name, d)
		return 0
	}
	return uint32(d / time.Second)
}

// limits checks the cache, timeout, rate and message size limits.
func (pr *problems) limits(c Config) {
	if c.CacheSize < 0 {
		pr.bad("cacheSize %d: negative", c.CacheSize)
	}
	if c.CacheBytes < 0 {
		pr.bad("cacheBytes %d: negative", c.CacheBytes)
	}
	if c.Timeout < 0 {
		pr.bad("timeout %s: negative", c.Timeout)
	}
	if math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		pr.bad("rateLimit %v: not a number", c.RateLimit)
	}
	if c.RateBurst < 0 {
		pr.bad("rateBurst %d: negative", c.RateBurst)
	}
	if c.UDPSize < dns.MinMsgSize || c.UDPSize > 4096 {
		pr.bad("udpSize %d: out of range (512..4096)", c.UDPSize)
	}
}

// validLabel reports whether l is a host label: 1 to 63 letters, digits,
// hyphens and underscores (DHCP clients send those), not starting or
// ending with a hyphen.
func validLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// validDomain reports whether the fqdn d is one or more host labels.
func validDomain(d string) bool {
	if d == "." || len(d) > 253 || !strings.HasSuffix(d, ".") {
		return false
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(d, "."), ".") {
		if !validLabel(l) {
			return false
		}
	}
	return true
}
