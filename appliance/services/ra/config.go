package ra

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Timers and limits (RFC 4861 section 10, RFC 9096 section 3.3).
const (
	DefaultMaxInterval = 600 * time.Second
	maxInitialInterval = 16 * time.Second
	maxInitialRAs      = 3
	minDelayBetweenRAs = 3 * time.Second
	maxRADelay         = 500 * time.Millisecond
	preferredLimit     = 2700 * time.Second
	validLimit         = 5400 * time.Second
)

// Config says what the RAs announce on which interface.
type Config struct {
	// Interface is the LAN interface (with a link-local address).
	Interface string
	// MAC is announced as the source link-layer address; empty means the
	// interface's.
	MAC net.HardwareAddr
	// MTU is the MTU option; 0 leaves it out.
	MTU int
	// DNS servers (RDNSS) and search domains (DNSSL); empty leaves them out.
	DNS     []netip.Addr
	Domains []string
	// OtherConfig sets the O flag (RFC 4861 4.2): a stateless DHCPv6
	// server on the link answers Information-requests (RFC 8415 6.1).
	OtherConfig bool
	// MaxInterval between unsolicited RAs: 4 s to 1800 s, 0 means 600 s.
	// MinInterval is a third of it.
	MaxInterval time.Duration
	// RouterLifetime while a prefix is valid: 0 means 3 × MaxInterval.
	RouterLifetime time.Duration
}

func (cfg *Config) check() error {
	if cfg.Interface == "" {
		return errors.New("no interface")
	}
	if cfg.MAC != nil && len(cfg.MAC) != 6 {
		return fmt.Errorf("MAC %q is not a 6-byte Ethernet address", cfg.MAC)
	}
	if cfg.MTU != 0 && (cfg.MTU < 1280 || cfg.MTU > 65535) {
		return fmt.Errorf("MTU %d is not 1280 to 65535", cfg.MTU)
	}
	if cfg.MaxInterval == 0 {
		cfg.MaxInterval = DefaultMaxInterval
	}
	if cfg.MaxInterval < 4*time.Second || cfg.MaxInterval > 1800*time.Second {
		return fmt.Errorf("max interval %v is not 4 s to 1800 s", cfg.MaxInterval)
	}
	if cfg.RouterLifetime == 0 {
		cfg.RouterLifetime = 3 * cfg.MaxInterval
	}
	if cfg.RouterLifetime < cfg.MaxInterval || cfg.RouterLifetime > 9000*time.Second {
		return fmt.Errorf("router lifetime %v is not max interval to 9000 s", cfg.RouterLifetime)
	}
	for _, a := range cfg.DNS {
		if !a.Is6() || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("DNS server %v is not an IPv6 unicast address", a)
		}
	}
	for _, d := range cfg.Domains {
		if d == "" || len(d) > 253 {
			return fmt.Errorf("search domain %q is not a domain name", d)
		}
	}
	return nil
}

// Prefix is a prefix announced for SLAAC (a /64) and until when it may be
// used.
type Prefix struct {
	Prefix    netip.Prefix
	Preferred time.Time
	Valid     time.Time
}

// Subnet is the /64 number id of a delegated prefix: the LAN's prefix. It
// fails if the delegation is longer than /64 or has no subnet id.
func Subnet(delegated netip.Prefix, id uint64) (netip.Prefix, error) {
	bits := delegated.Bits()
	if !delegated.Addr().Is6() || bits < 0 || bits > 64 {
		return netip.Prefix{}, fmt.Errorf("delegated prefix %v is not an IPv6 prefix of /64 or shorter", delegated)
	}
	if bits < 64 && id >= 1<<(64-bits) || bits == 64 && id != 0 {
		return netip.Prefix{}, fmt.Errorf("subnet id %d does not fit in %v", id, delegated)
	}
	a := delegated.Masked().Addr().As16()
	for i := 0; i < 8; i++ {
		a[7-i] |= byte(id >> (8 * i))
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), 64), nil
}
