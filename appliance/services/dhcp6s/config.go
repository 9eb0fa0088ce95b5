package dhcp6s

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Defaults applied to zero Config fields, and RFC 8415's bounds.
const (
	DefaultInfoRefresh = 1800 * time.Second
	MinInfoRefresh     = 600 * time.Second // IRT_MINIMUM, RFC 8415 section 7.6
	DefaultRate        = 100               // messages a second from all clients
	DefaultClientRate  = 5                 // messages a second from one client address
)

// Config configures a Server.
type Config struct {
	// Interface is the LAN interface the server listens on (the host
	// port, where the box's stack is on the LAN).
	Interface string
	// DUID is the Server Identifier; nil means a DUID-LL of the
	// interface's MAC (stable while the MAC is).
	DUID dhcpv6.DUID
	// DNS servers and search domains answered; empty leaves the option
	// out.
	DNS     []netip.Addr
	Domains []string
	// InfoRefresh is the Information Refresh Time: how long a client may
	// use the answer before it asks again. 0 means DefaultInfoRefresh;
	// at least MinInfoRefresh.
	InfoRefresh time.Duration
	// Rate and ClientRate are the messages a second admitted from all
	// clients and from one client address (bursts of twice that); 0
	// means DefaultRate and DefaultClientRate.
	Rate, ClientRate float64
}

// answers is what the server answers with, immutable once built.
type answers struct {
	duid    dhcpv6.DUID
	dns     []net.IP
	domains []string
	irt     time.Duration
}

// check validates the DNS and refresh settings and fills the defaults.
func (c *Config) check() error {
	if c.Interface == "" {
		return errors.New("no interface")
	}
	if c.InfoRefresh == 0 {
		c.InfoRefresh = DefaultInfoRefresh
	}
	if c.InfoRefresh < MinInfoRefresh || c.InfoRefresh > math.MaxUint32*time.Second {
		return fmt.Errorf("information refresh time %v is not %v to 2^32-1 s", c.InfoRefresh, MinInfoRefresh)
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.ClientRate == 0 {
		c.ClientRate = DefaultClientRate
	}
	if !(c.Rate > 0 && c.ClientRate > 0) || math.IsInf(c.Rate, 0) || math.IsInf(c.ClientRate, 0) {
		return fmt.Errorf("rates %v and %v are not positive numbers", c.Rate, c.ClientRate)
	}
	return checkDNS(c.DNS, c.Domains)
}

// checkDNS checks DNS servers (IPv6 unicast) and search domains (names
// the Domain Search List can encode).
func checkDNS(dns []netip.Addr, domains []string) error {
	for _, a := range dns {
		if !a.Is6() || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "" {
			return fmt.Errorf("DNS server %v is not an IPv6 unicast address", a)
		}
	}
	for _, d := range domains {
		if !domainName(d) {
			return fmt.Errorf("search domain %q is not a domain name (labels of 1 to 63 bytes, at most 253 in all)", d)
		}
	}
	return nil
}

// domainName says whether d, with or without its final dot, is labels of
// 1 to 63 bytes, at most 253 bytes in all: what a Domain Search List
// (RFC 1035 section 3.1 encoding) can carry.
func domainName(d string) bool {
	d = strings.TrimSuffix(d, ".")
	if d == "" || len(d) > 253 {
		return false
	}
	for l := range strings.SplitSeq(d, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
	}
	return true
}

func newAnswers(duid dhcpv6.DUID, dns []netip.Addr, domains []string, irt time.Duration) *answers {
	a := &answers{duid: duid, domains: slices.Clone(domains), irt: irt}
	for _, d := range dns {
		a.dns = append(a.dns, d.AsSlice())
	}
	return a
}
