package router

import (
	"net/netip"

	"e1kbox/appliance/services/dhcp6c"
)

// What the router hands the dataplane's IPv6 router: the box's own
// addresses on the LAN and its addressing on the WAN.

// BoxAddr is one of the box's own IPv6 addresses on the LAN, BoxLANAddr
// of a routed /64 (with its prefix length): preferred in the current /64,
// deprecated in one being renumbered away (kept while the /64 is routed,
// so hosts that still use it reach the box's DNS there).
type BoxAddr struct {
	Prefix     netip.Prefix
	Deprecated bool
}

// BoxLANAddr is the box's address in a LAN /64: its ::1.
func BoxLANAddr(lan netip.Prefix) netip.Prefix {
	a := lan.Masked().Addr().As16()
	a[15] = 1
	return netip.PrefixFrom(netip.AddrFrom16(a), lan.Bits())
}

// WANAddressing is the box's IPv6 WAN addressing (ipv6.wanAddress), for
// route6.SetWANAddressing: SLAAC with RFC 7217's secret and the WAN
// interface's name, the DHCPv6 lease's IA_NA addresses, and how to decline
// one that DAD finds on another node (it must not block).
type WANAddressing struct {
	SLAAC     bool
	Secret    []byte
	Interface string
	DHCPv6    bool // the lease's addresses are used
	Leased    []dhcp6c.Address
	Decline   func(netip.Addr)
}
