package config

import (
	"fmt"
	"net/netip"
)

// The checks that span sections: port names and interfaces are unique
// across the data ports and the host port, the box's addresses on all of
// them must not clash (the same address twice, or overlapping subnets on
// different segments, like a LAN address inside the WAN subnet), and the
// router services need the host port.

// name checks a port name (a data port's or the host port's) and records
// it; a name used twice is an error at its second use.
func (v *validator) name(at, name string) {
	if msg := validName(name); msg != "" {
		v.add(at, "%s", msg)
		return
	}
	if first, dup := v.names[name]; dup {
		v.add(at, "duplicate port name %q (already at %s)", name, first)
		return
	}
	v.names[name] = at
}

// ifname checks an interface name (a data port's or the host port's TAP
// device) and records it; it reports whether the name is valid and used
// once so far.
func (v *validator) ifname(at, name string) bool {
	if msg := validIfname(name); msg != "" {
		v.add(at, "%s", msg)
		return false
	}
	if first, dup := v.ifaces[name]; dup {
		v.add(at, "interface %q is already used at %s", name, first)
		return false
	}
	v.ifaces[name] = at
	return true
}

// segment names the L2 segment a port's addresses live on: addresses on
// different segments must not overlap.
func (v *validator) segment(p *Port) string {
	switch {
	case v.c.Mode != ModeNAT:
		return "bridge"
	case p.IsEnabled() && p.Role == RoleWAN:
		return "wan"
	case p.IsEnabled() && p.Role == RoleLAN:
		return "lan"
	}
	return "port " + p.Name
}

type addrUse struct {
	path, segment string
	p             netip.Prefix
}

// addresses checks the box's addresses on the data ports and the host
// port, each on its own and against the others.
func (v *validator) addresses() {
	var all []addrUse
	check := func(at, segment string, list []netip.Prefix) {
		for i, p := range list {
			a := index(at, i)
			if msg := checkPrefix(p); msg != "" {
				v.add(a, "%s", msg)
				continue
			}
			if msg := conflict(all, segment, p); msg != "" {
				v.add(a, "%s", msg)
			}
			all = append(all, addrUse{a, segment, p})
		}
	}
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		at := index("ports", i) + ".addresses"
		if (v.c.Mode == ModeBridge || v.c.Mode == "") && len(p.Addresses) > 0 {
			v.add(at, "bridge mode forwards transparently and gives data ports no addresses; put the box's address on hostPort.addresses")
			continue
		}
		check(at, v.segment(p), p.Addresses)
	}
	if h := v.c.HostPort; h != nil {
		seg := "bridge"
		if v.c.Mode == ModeNAT {
			seg = "lan"
		}
		check("hostPort.addresses", seg, h.Addresses)
	}
}

// conflict describes the first clash of p with the addresses in use: the
// same address twice, or overlapping subnets on different segments.
func conflict(used []addrUse, segment string, p netip.Prefix) string {
	for _, o := range used {
		switch {
		case o.p.Addr() == p.Addr():
			return fmt.Sprintf("address %s is already used at %s", p.Addr(), o.path)
		case o.segment != segment && o.p.Overlaps(p):
			return fmt.Sprintf("%s overlaps %s at %s, which is on another segment (%s, not %s)", p, o.p, o.path, o.segment, segment)
		}
	}
	return ""
}

// checkPrefix checks an interface address with its prefix length.
func checkPrefix(p netip.Prefix) string {
	a := p.Addr()
	switch {
	case !p.IsValid():
		return "missing; want an address with a prefix length like \"192.168.1.1/24\""
	case a.Is4In6():
		return fmt.Sprintf("%s: write IPv4 addresses as IPv4 (%s/%d)", p, a.Unmap(), p.Bits()-96)
	case p.Bits() == 0:
		return fmt.Sprintf("%s: prefix length /0 is not a subnet; want e.g. /24", p)
	case a.IsUnspecified() || a.IsLoopback() || a.IsMulticast():
		return fmt.Sprintf("%s is not a host address (unspecified, loopback or multicast)", p)
	case a.Is4() && p.Bits() < 31:
		if a == p.Masked().Addr() {
			return fmt.Sprintf("%s is the network address of %s; use a host address like %s", a, p.Masked(), p.Masked().Addr().Next())
		}
		if a == lastAddr(p) {
			return fmt.Sprintf("%s is the broadcast address of %s", a, p.Masked())
		}
	}
	return ""
}

// servicesHostPort checks that the router services that run on the host
// port (the DHCP and DNS servers, the IPv6 router advertisements) have
// one. NAT mode.
func (v *validator) servicesHostPort() {
	c := v.c
	if (c.DHCP.IsEnabled() || c.DNS.IsEnabled()) && c.HostPort == nil {
		v.add("hostPort", "the router's DHCP and DNS servers run on the host port; add \"hostPort\": {}")
	}
	if c.IPv6.IsEnabled() && c.HostPort == nil {
		v.add("ipv6.enabled", "the router advertisements come from the box's stack on the host port; add \"hostPort\": {} or turn IPv6 off")
	}
}
