package config

import (
	"net/netip"
	"slices"
)

// Time configures the NTP client that keeps the box's clock.
type Time struct {
	// Servers are NTP servers (names or addresses). Default: gokrazy's
	// pool, 0-3.gokrazy.pool.ntp.org.
	Servers []string `json:"servers,omitempty"`
	// FromDHCP also asks the NTP servers of the WAN DHCP lease (option
	// 42), first. Default true.
	FromDHCP *bool `json:"fromDHCP"`
}

// DefaultNTPServers are the NTP servers of Time.Servers by default:
// gokrazy's pool, as its own ntp program uses.
var DefaultNTPServers = []string{"0.gokrazy.pool.ntp.org", "1.gokrazy.pool.ntp.org", "2.gokrazy.pool.ntp.org", "3.gokrazy.pool.ntp.org"}

// maxNTPServers bounds Time.Servers.
const maxNTPServers = 8

func (t *Time) applyDefaults() {
	if t.Servers == nil {
		t.Servers = slices.Clone(DefaultNTPServers)
	}
	if t.FromDHCP == nil {
		t.FromDHCP = ptr(true)
	}
}

func (v *validator) time() {
	servers := v.c.Time.Servers
	if len(servers) > maxNTPServers {
		v.add("time.servers", "%d servers, at most %d", len(servers), maxNTPServers)
	}
	for i, s := range servers {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil && !isDomain(s):
			v.add(index("time.servers", i), "%q is neither an address nor a host name", s)
		case err == nil && a.Is6() && !a.Is4In6():
			v.add(index("time.servers", i), "%s is an IPv6 address: the box's own stack reaches the WAN over IPv4 only; give an IPv4 address or a host name", s)
		}
	}
}
