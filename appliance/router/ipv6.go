package router

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/dhcp6s"
	"e1kbox/appliance/services/ra"
)

// ipv6Services are the router's IPv6 services in NAT mode (ipv6.enabled):
// the WAN's DHCPv6 client asking for a delegated prefix (none with a
// static ipv6.prefix, which stands for a delegation) and, as
// ipv6.wanAddress says, an address for the box (applyWAN6 hands it and
// SLAAC to the IPv6 router, which runs DAD), and on the box's
// stack (the host port) the LAN's router advertisement daemon and the
// stateless DHCPv6 server (ipv6.dhcpServer). A delegation gives the LAN
// its first /64 and the box its ::1 there: the IPv6 router (through
// OnPrefixes) routes the /64 and answers for the address, the host
// port's kernel interface gets the address, the DNS forwarder listens on
// it, and the daemon announces the /64 with the box's address as DNS
// server (the ISP's servers and domains while the box's DNS is off); a
// new delegation deprecates the old /64, whose box address stays
// (deprecated) while it is routed. Guarded by Router.mu; the client's
// changes come through its slot.
type ipv6Services struct {
	// client is bound to the interface, MAC, prefix length and static
	// prefix, and whether it asks for an address.
	client leaseClient[*dhcp6c.Client, *dhcp6c.Lease]
	ra     running[*ra.Server]
	raAt   string // interface and MTU
	dhcp   running[*dhcp6s.Server]
	dhcpAt string        // interface
	lease  *dhcp6c.Lease // the DHCPv6 client's
	static *dhcp6c.Lease // the delegation a static prefix stands for
	box    []BoxAddr     // the box's LAN addresses, the current /64's first
	secret []byte        // RFC 7217's secret for the WAN's SLAAC addresses
	// paused is what the client stopped while the PPPoE session was down
	// was bound to besides the session (its lease kept for the next);
	// pppMTU is the last session's MTU (ipv6_pppoe.go).
	paused string
	pppMTU int
}

// v6Refresh is how often the announced lifetimes follow the client's
// renewals (which change no binding and call no onChange).
const v6Refresh = 30 * time.Second

// refreshIPv6 follows the DHCPv6 client's renewed lifetimes and renews
// a static prefix's.
func (r *Router) refreshIPv6() {
	r.mu.Lock()
	defer r.mu.Unlock()
	refresh := false
	if r.v6.client.on && r.v6.lease != nil {
		// A client not bound yet (a new PPPoE session's soliciting) keeps
		// the lease it was given; an expiry comes through onChange.
		if cur := r.v6.client.s.Current(); cur != nil {
			r.v6.lease = cur
		}
		refresh = true
	}
	if r.cfg != nil && ipv6On(r.cfg) && r.cfg.IPv6.HasStaticPrefix() {
		r.v6.static = staticLease(r.cfg.IPv6.Prefix, time.Now())
		refresh = true
	}
	if refresh {
		r.applyDelegation()
	}
}

// lease6Changed takes a DHCPv6 lease of client run gen; one of a client
// stopped since is dropped.
func (r *Router) lease6Changed(gen uint64, l *dhcp6c.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen == r.v6.client.gen {
		r.v6.lease = l
		r.applyDelegation()
	}
}

// applyIPv6 starts the DHCPv6 client and the RA daemon, or restarts what
// is bound to something that changed.
func (r *Router) applyIPv6() error {
	p, mac, err := r.wanPort()
	if err != nil {
		r.stopIPv6()
		return err
	}
	v := &r.v6
	if v.secret == nil {
		v.secret = slaacSecret(r.opts.State, r.log)
	}
	static := r.cfg.IPv6.HasStaticPrefix()
	v.static = nil
	if static {
		// A static prefix is the delegation; the client runs only to ask
		// for an address (ipv6.wanAddress dhcpv6).
		v.static = staticLease(r.cfg.IPv6.Prefix, time.Now())
	}
	vlan := wanVLAN(r.cfg)
	base := wanAt(p, mac, vlan) + " " + strconv.Itoa(r.cfg.IPv6.PrefixLength) + " " + strconv.FormatBool(static)
	cfg := dhcp6c.Config{Interface: p.Interface, MAC: mac, StateDir: r.opts.State,
		PrefixLength: r.cfg.IPv6.PrefixLength, Address: r.cfg.IPv6.WANIANA(), NoPrefix: static, VLAN: vlan}
	// New options (nat.wan.dhcpv6) restart the client like a change of
	// IA_NA: the delegation stays.
	at := base + " " + strconv.FormatBool(r.cfg.IPv6.WANIANA()) + " " + r.dhcp6Options(&cfg)
	// Over PPPoE, the client runs in the session up; a new one restarts
	// it with the delegation kept.
	session, up := "", true
	if r.cfg.IsPPPoE() {
		session, up = r.pppoeDHCP6(&cfg)
		at += " " + session
	}
	switch {
	case static && !r.cfg.IPv6.WANIANA():
		r.stopClient6()
	case !up:
		r.pauseClient6(base)
	case !v.client.on || v.client.at != at:
		// Asking for an address or no longer restarts the client with the
		// same DUID and lease file: the delegation stays (the new client
		// confirms it with a Rebind).
		keep := v.lease
		if !(v.client.on && strings.HasPrefix(v.client.at, base+" ") || !v.client.on && v.paused == base) {
			keep = nil
		}
		r.stopClient6()
		v.lease = keep
		c, err := dhcp6c.New(cfg, r.log.With("service", "wan-dhcpv6"))
		if err != nil {
			return err
		}
		v.client.begin(c, at, c.Run, r.log, "wan-dhcpv6")
	}
	mtu := r.lanMTU()
	raAt := HostInterface(r.cfg) + " " + strconv.Itoa(mtu)
	if !v.ra.on || v.raAt != raAt {
		v.ra.stop()
		s, err := ra.New(ra.Config{Interface: HostInterface(r.cfg), MTU: mtu}, r.log.With("service", "ra"))
		if err != nil {
			return err
		}
		v.raAt = raAt
		v.ra.start(s, s.Serve, r.log, "ra")
	}
	if err := r.applyDHCP6(); err != nil {
		return err
	}
	r.applyDelegation()
	return nil
}

// applyDHCP6 starts the stateless DHCPv6 server on the host port when
// ipv6.dhcpServer is on (restarted when the interface changes) or stops
// it, and sets the RAs' O flag to match.
func (r *Router) applyDHCP6() error {
	v := &r.v6
	at := HostInterface(r.cfg)
	switch {
	case !r.cfg.IPv6.DHCPServerOn():
		v.dhcp.stop()
		v.dhcpAt = ""
	case !v.dhcp.on || v.dhcpAt != at:
		v.dhcp.stop()
		dns, domains := r.v6DNS()
		s, err := dhcp6s.New(dhcp6s.Config{Interface: at, DNS: dns, Domains: domains}, r.log.With("service", "dhcpv6"))
		if err != nil {
			v.ra.s.SetOtherConfig(false)
			return err
		}
		v.dhcpAt = at
		v.dhcp.start(s, s.Serve, r.log, "dhcpv6")
	}
	v.ra.s.SetOtherConfig(v.dhcp.on)
	return nil
}

// v6DNS is what the LAN is told about DNS over IPv6 (RDNSS/DNSSL, DHCPv6):
// while the box's DNS forwarder runs, the box's preferred LAN address and
// the local domain; otherwise the ISP's servers and domains from DHCPv6.
func (r *Router) v6DNS() ([]netip.Addr, []string) {
	if r.dns.on {
		for _, b := range r.v6.box {
			if !b.Deprecated {
				return []netip.Addr{b.Prefix.Addr()}, []string{r.cfg.DNS.Domain}
			}
		}
		return nil, []string{r.cfg.DNS.Domain}
	}
	if l := r.v6.lease; l != nil {
		return l.DNS, l.Domains
	}
	return nil, nil
}

// delegation is the lease whose prefixes the LAN gets: the static
// prefix's, else the DHCPv6 client's.
func (v *ipv6Services) delegation() *dhcp6c.Lease {
	if v.static != nil {
		return v.static
	}
	return v.lease
}

// lanMTU is the smallest configured LAN port MTU, and on a PPPoE WAN the
// session's (the last one's) if smaller; 0 when none is set.
func (r *Router) lanMTU() int {
	mtu := 0
	for _, p := range r.cfg.LANPorts() {
		if p.MTU >= 1280 && (mtu == 0 || p.MTU < mtu) {
			mtu = p.MTU
		}
	}
	if s := r.v6.pppMTU; r.cfg.IsPPPoE() && s >= 1280 && (mtu == 0 || s < mtu) {
		mtu = s
	}
	return mtu
}

// applyDelegation gives the router and the RA daemon what the lease
// delegates: the first prefix's first /64 on the LAN.
func (r *Router) applyDelegation() {
	v := &r.v6
	r.applyWAN6()
	var lan []ra.Prefix
	var delegated []netip.Prefix
	if l := v.delegation(); l != nil && len(l.Prefixes) > 0 {
		d := l.Prefixes[0]
		if p, err := ra.Subnet(d.Prefix, 0); err == nil {
			lan = append(lan, ra.Prefix{Prefix: p, Preferred: d.Preferred, Valid: d.Valid})
		} else {
			r.log.Warn("IPv6: the delegation has no /64 for the LAN", "prefix", d.Prefix, "err", err)
		}
		for _, p := range l.Prefixes {
			delegated = append(delegated, p.Prefix)
		}
	}
	if !v.ra.on {
		return
	}
	s := v.ra.s
	if err := s.SetPrefixes(lan); err != nil {
		r.log.Warn("IPv6: prefixes not announced", "err", err)
	}
	// Routed: the current /64 and the deprecated ones while hosts still
	// have addresses in them; the box has its ::1 in each.
	cur, dep := s.Prefixes()
	var routed []netip.Prefix
	var box []BoxAddr
	now := time.Now()
	for _, p := range slices.Concat(cur, dep) {
		if now.Before(p.Valid) && !slices.Contains(routed, p.Prefix) {
			routed = append(routed, p.Prefix)
			current := slices.ContainsFunc(cur, func(c ra.Prefix) bool { return c.Prefix == p.Prefix })
			box = append(box, BoxAddr{Prefix: BoxLANAddr(p.Prefix), Deprecated: !current})
		}
	}
	changed := !slices.Equal(v.box, box)
	v.box = box
	// The address first (route6, the host port), then the DNS forwarder
	// on it, then the announcements.
	if r.opts.OnPrefixes != nil {
		r.opts.OnPrefixes(routed, delegated, box)
	}
	if changed && r.dns.on {
		if err := r.applyDNS(); err != nil {
			r.log.Warn("IPv6: the DNS forwarder does not follow the box's addresses", "box", box, "err", err)
		}
	}
	dns, domains := r.v6DNS()
	if err := s.SetDNS(dns, domains); err != nil {
		r.log.Warn("IPv6: DNS not announced", "err", err)
	}
	if v.dhcp.on {
		if err := v.dhcp.s.SetDNS(dns, domains); err != nil {
			r.log.Warn("IPv6: DNS not served by DHCPv6", "err", err)
		}
	}
}

// applyWAN6 gives the IPv6 router the box's WAN addressing as
// ipv6.wanAddress says: SLAAC, and the lease's IA_NA addresses (declined
// through the client when DAD finds them on another node).
func (r *Router) applyWAN6() {
	v := &r.v6
	if r.opts.OnWAN6 == nil {
		return
	}
	w := WANAddressing{SLAAC: r.cfg.IPv6.WANSLAAC(), Secret: v.secret, DHCPv6: r.cfg.IPv6.WANIANA(), Decline: r.declineWAN6}
	if p := r.cfg.WANPort(); p != nil {
		w.Interface = p.Interface
	}
	if l := v.lease; l != nil && w.DHCPv6 {
		w.Leased = l.Addrs
	}
	r.opts.OnWAN6(w)
}

// declineWAN6 has the running DHCPv6 client decline a; it does not block
// (the IPv6 router calls it from the dataplane's monitor).
func (r *Router) declineWAN6(a netip.Addr) {
	if l := r.live.Load(); l != nil && l.DHCP6 != nil {
		l.DHCP6.Decline(a)
	}
}

// staticLifetime is the valid lifetime of a static prefix, renewed every
// v6Refresh (preferred: half of it), so that a prefix changed in the
// config is routed and deprecated no longer than a delegation's would be.
const staticLifetime = 2 * time.Hour

// staticLease is the delegation a static prefix (ipv6.prefix) stands for
// at now.
func staticLease(p netip.Prefix, now time.Time) *dhcp6c.Lease {
	return &dhcp6c.Lease{Prefixes: []dhcp6c.Prefix{{Prefix: p.Masked(),
		Preferred: now.Add(staticLifetime / 2), Valid: now.Add(staticLifetime)}}, Obtained: now}
}

// stopIPv6 stops the IPv6 services; nothing is routed or announced, and
// the box has no LAN IPv6 address.
func (r *Router) stopIPv6() {
	r.stopClient6()
	r.v6.dhcp.stop()
	r.v6.dhcpAt = ""
	r.v6.ra.stop()
	r.v6.raAt = ""
	had := len(r.v6.box) > 0
	r.v6.box = nil
	r.v6.static = nil
	if r.opts.OnPrefixes != nil {
		r.opts.OnPrefixes(nil, nil, nil)
	}
	if r.opts.OnWAN6 != nil {
		r.opts.OnWAN6(WANAddressing{})
	}
	if had && r.dns.on {
		if err := r.applyDNS(); err != nil {
			r.log.Warn("IPv6 off: the DNS forwarder keeps its IPv6 addresses", "err", err)
		}
	}
}

func (r *Router) stopClient6() {
	if r.v6.client.end() || r.v6.paused != "" {
		r.v6.lease = nil
	}
	r.v6.paused = ""
}

// ipv6On says whether cfg routes IPv6.
func ipv6On(cfg *config.Config) bool { return cfg.Mode == config.ModeNAT && cfg.IPv6.IsEnabled() }
