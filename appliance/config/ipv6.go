package config

import "net/netip"

// IPv6 routes IPv6 in NAT mode without translation: the WAN asks the ISP
// for a prefix by DHCPv6 prefix delegation (or has a static one), the LAN gets its first /64 by
// router advertisements (SLAAC) from the box's stack on the host port, and
// a stateful firewall admits from the WAN only replies and what forward
// rules accept. Without a delegation nothing is announced or routed.
type IPv6 struct {
	// Enabled runs it. Default: on in NAT mode, off in bridge mode.
	Enabled *bool `json:"enabled"`
	// PrefixLength is the delegation size asked for (a hint: the ISP may
	// delegate another), 48 to 64. Default: 56.
	PrefixLength int `json:"prefixLength,omitempty"`
	// Prefix is a static delegated prefix, /48 to /64, for an ISP that
	// routes a fixed one to the box: set, the DHCPv6 client does not run
	// and the LAN gets its first /64 as from a delegation. Default: none
	// (the prefix comes by DHCPv6).
	Prefix netip.Prefix `json:"prefix,omitzero"`
	// Gateway is the WAN next hop, link-local or global. Default: none
	// (the source of the WAN's router advertisements).
	Gateway netip.Addr `json:"gateway,omitzero"`
	// DHCPServer runs the LAN's stateless DHCPv6 server (RFC 8415 6.1:
	// DNS servers and search domains to hosts that ask, no addresses) and
	// sets the O flag in the RAs. Ignored while IPv6 is off. Default: as
	// Enabled.
	DHCPServer *bool `json:"dhcpServer"`
	// WANAddress is how the box gets its own global WAN address: auto
	// (SLAAC where the ISP's router advertisements allow it, and an IA_NA
	// address asked for with the delegation; either may be absent), slaac,
	// dhcpv6, or off (the link-local address only). With a static prefix
	// auto is SLAAC only and dhcpv6 runs the DHCPv6 client for the
	// address alone. Default auto.
	WANAddress WANAddress `json:"wanAddress,omitempty"`
}

// WANSLAAC says whether the box forms SLAAC addresses on the WAN.
func (s *IPv6) WANSLAAC() bool {
	return s.WANAddress == WANAddressAuto || s.WANAddress == WANAddressSLAAC || s.WANAddress == ""
}

// WANIANA says whether the DHCPv6 client asks for an address (IA_NA): for
// auto beside a delegated prefix, and for dhcpv6.
func (s *IPv6) WANIANA() bool {
	return s.WANAddress == WANAddressDHCPv6 || (s.WANAddress == WANAddressAuto || s.WANAddress == "") && !s.HasStaticPrefix()
}

// HasStaticPrefix reports whether the prefix is static (ipv6.prefix)
// rather than delegated by DHCPv6.
func (s *IPv6) HasStaticPrefix() bool { return s.Prefix.IsValid() }

// IsEnabled reports whether IPv6 is routed.
func (s *IPv6) IsEnabled() bool { return s.Enabled != nil && *s.Enabled }

// DHCPServerOn reports whether the stateless DHCPv6 server runs: IPv6 is
// routed and dhcpServer is not false.
func (s *IPv6) DHCPServerOn() bool { return s.IsEnabled() && (s.DHCPServer == nil || *s.DHCPServer) }

// WANAddress selects the box's own global WAN addresses.
type WANAddress string

// The WAN address settings (see IPv6.WANAddress).
const (
	WANAddressAuto   WANAddress = "auto"
	WANAddressSLAAC  WANAddress = "slaac"
	WANAddressDHCPv6 WANAddress = "dhcpv6"
	WANAddressOff    WANAddress = "off"
)

// DefaultIPv6PrefixLength is the delegation asked for: a /56, what RFC
// 6177 suggests ISPs give a home.
const DefaultIPv6PrefixLength = 56

// applyDefaults fills the defaults; on says whether the router services
// run by default (NAT mode).
func (s *IPv6) applyDefaults(on bool) {
	if s.Enabled == nil {
		s.Enabled = ptr(on)
	}
	if s.DHCPServer == nil {
		s.DHCPServer = ptr(*s.Enabled)
	}
	if s.PrefixLength == 0 {
		s.PrefixLength = DefaultIPv6PrefixLength
	}
	if s.WANAddress == "" {
		s.WANAddress = WANAddressAuto
	}
}

// ipv6 checks the delegation asked for, the WAN address setting, the
// static prefix and the WAN's IPv6 next hop.
func (v *validator) ipv6() {
	s := &v.c.IPv6
	if n := s.PrefixLength; n != 0 && (n < 48 || n > 64) {
		v.add("ipv6.prefixLength", "%d is not a delegated prefix length of 48 to 64", n)
	}
	switch s.WANAddress {
	case WANAddressAuto, WANAddressSLAAC, WANAddressDHCPv6, WANAddressOff, "":
	default:
		v.add("ipv6.wanAddress", "want auto, slaac, dhcpv6 or off, got %q", s.WANAddress)
	}
	if p := s.Prefix; p.IsValid() {
		a := p.Addr()
		switch {
		case !a.Is6() || a.Is4In6():
			v.add("ipv6.prefix", "%s is not an IPv6 prefix", p)
		case p.Bits() < 48 || p.Bits() > 64:
			v.add("ipv6.prefix", "%s: /%d is not a delegated prefix length of 48 to 64", p, p.Bits())
		case !a.IsGlobalUnicast():
			v.add("ipv6.prefix", "%s is not a global unicast prefix", p)
		case p != p.Masked():
			v.add("ipv6.prefix", "%s has bits set after its /%d; want %s", p, p.Bits(), p.Masked())
		}
	}
	if g := s.Gateway; g.IsValid() {
		switch {
		case !g.Is6() || g.Is4In6():
			v.add("ipv6.gateway", "%s is not an IPv6 address", g)
		case g.Zone() != "":
			v.add("ipv6.gateway", "%s: no zone; the next hop is on the WAN port", g)
		case g.IsMulticast():
			v.add("ipv6.gateway", "%s is a multicast address; want the ISP router's link-local or global address", g)
		case !g.IsLinkLocalUnicast() && !g.IsGlobalUnicast():
			v.add("ipv6.gateway", "%s is not a unicast address; want the ISP router's link-local or global address", g)
		case s.Prefix.IsValid() && s.Prefix.Masked().Contains(g):
			v.add("ipv6.gateway", "%s is inside ipv6.prefix %s, which is routed to the LAN; the next hop is on the WAN", g, s.Prefix.Masked())
		}
	}
}
