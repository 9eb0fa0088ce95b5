package config

import "net/netip"

// DNSServer is the LAN's DNS forwarder and cache on the router's LAN
// address (UDP and TCP 53; never on the WAN side).
type DNSServer struct {
	// Enabled runs the server; defaults as DHCPServer.Enabled.
	Enabled *bool `json:"enabled"`
	// Domain is the local domain: LAN devices are <hostname>.<domain>,
	// and the DHCP server hands it out. Default "lan".
	Domain string `json:"domain"`
	// Upstreams are the DNS servers asked for everything else. Default:
	// those of the WAN DHCP lease; with a static WAN address and none
	// here, only local names are answered.
	Upstreams []netip.Addr `json:"upstreams,omitempty"`
	// CacheSize bounds the cached answers, 0..1000000. Default 10000.
	CacheSize int `json:"cacheSize"`
}

// IsEnabled reports whether the server runs.
func (d *DNSServer) IsEnabled() bool { return d.Enabled != nil && *d.Enabled }

// Defaults of the DNS server.
const (
	DefaultDomain       = "lan"
	DefaultDNSCacheSize = 10000
)

// Limits of the DNS server.
const (
	maxDNSCache  = 1000000
	maxUpstreams = 8
)

// applyDefaults fills the defaults; on says whether the router services
// run by default (NAT mode).
func (d *DNSServer) applyDefaults(on bool) {
	if d.Enabled == nil {
		d.Enabled = ptr(on)
	}
	if d.Domain == "" {
		d.Domain = DefaultDomain
	}
	if d.CacheSize == 0 {
		d.CacheSize = DefaultDNSCacheSize
	}
}

func (v *validator) dns() {
	_, router := v.lanPrefix()
	n := &v.c.DNS
	if n.Domain != "" && !isDomain(n.Domain) {
		v.add("dns.domain", "%q is not a domain name like \"lan\" or \"home.arpa\"", n.Domain)
	}
	if n.CacheSize < 0 || n.CacheSize > maxDNSCache {
		v.add("dns.cacheSize", "%d out of range 0..%d", n.CacheSize, maxDNSCache)
	}
	if len(n.Upstreams) > maxUpstreams {
		v.add("dns.upstreams", "%d servers, at most %d", len(n.Upstreams), maxUpstreams)
	}
	for i, u := range n.Upstreams {
		at := index("dns.upstreams", i)
		switch {
		case !u.IsValid():
			v.add(at, "missing; want a DNS server's address like \"9.9.9.9\"")
		case u.IsUnspecified() || u.IsLoopback() || u.IsMulticast() || u.IsLinkLocalUnicast():
			v.add(at, "%s is not a DNS server's address", u)
		case router.IsValid() && u == router:
			v.add(at, "%s is the router itself", u)
		case u.Is6() && !u.Is4In6():
			v.add(at, "%s is an IPv6 address: the box's own stack reaches the WAN over IPv4 only (its IPv6 is routed for the LAN's hosts); give an IPv4 address", u)
		}
	}
}
