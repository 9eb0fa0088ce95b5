package webui

import (
	"net/netip"
	"time"
)

// DHCPv6 states of IPv6Status.DHCPv6.
const (
	DHCPv6Bound      = "bound"      // a delegation is held (renewing and rebinding it included)
	DHCPv6Requesting = "requesting" // soliciting or requesting a delegation, none held
	DHCPv6None       = "none"       // no DHCPv6 client runs
)

// ConnKindRouted is the Kind of an IPv6 connection: routed, not
// translated (its Src and Dst are the addresses on the wire, NATSrc and
// NATDst are unset). Such connections have ID 0: they are listed, not
// deleted.
const ConnKindRouted = "routed"

// IPv6Status is the router's IPv6 side (RouterStatus.IPv6, nil while the
// router routes no IPv6): the WAN's DHCPv6 prefix delegation, the LAN's
// /64s, the box's own addresses and the WAN's next hop.
type IPv6Status struct {
	// DHCPv6 is DHCPv6Bound, DHCPv6Requesting or DHCPv6None; ClientState
	// is the client's RFC 8415 state (soliciting, requesting, bound,
	// renewing, rebinding), empty without a client.
	DHCPv6      string `json:"dhcpv6"`
	ClientState string `json:"dhcpv6_client,omitempty"`
	// Server is the DHCPv6 server of the lease (its link-local address).
	Server netip.Addr `json:"server,omitzero"`
	// T1 and T2 are when the lease is renewed and rebound.
	T1 time.Time `json:"t1,omitzero"`
	T2 time.Time `json:"t2,omitzero"`
	// Delegated are the prefixes the ISP delegated, with their lifetimes.
	Delegated []IPv6Prefix `json:"delegated"`
	// LAN are the LAN's /64s: the one announced now first, then the
	// deprecated ones of earlier delegations that are still valid.
	LAN []IPv6Prefix `json:"lan"`
	// WANAddresses are the box's own WAN addresses, link-local first,
	// with where each comes from and its state; LANAddresses its LAN
	// addresses, link-local first.
	WANAddresses []WANAddress `json:"wan_addresses"`
	LANAddresses []netip.Addr `json:"lan_addresses"`
	// Gateway is the WAN next hop in use (configured, or learnt from the
	// ISP's router advertisements); invalid while there is none.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// DNS are the lease's name servers (option 23).
	DNS []netip.Addr `json:"dns"`
}

// Origins of a WANAddress.
const (
	WANAddrLinkLocal = "link-local" // from the WAN MAC (modified EUI-64)
	WANAddrSLAAC     = "slaac"      // the ISP's router advertisements' prefix, an RFC 7217 identifier
	WANAddrDHCPv6    = "dhcpv6"     // the DHCPv6 client's IA_NA
)

// States of a WANAddress.
const (
	WANAddrTentative  = "tentative"  // duplicate address detection runs: not yet used or answered for
	WANAddrPreferred  = "preferred"  // in use
	WANAddrDeprecated = "deprecated" // past its preferred lifetime: answered for, used for nothing new
	WANAddrDuplicate  = "duplicate"  // another node on the WAN has it: never used (declined, if from DHCPv6)
)

// WANAddress is one of the box's own WAN addresses.
type WANAddress struct {
	Address netip.Addr `json:"address"`
	// Origin is WANAddrLinkLocal, WANAddrSLAAC or WANAddrDHCPv6; State is
	// WANAddrTentative, WANAddrPreferred, WANAddrDeprecated or
	// WANAddrDuplicate.
	Origin string `json:"origin"`
	State  string `json:"state"`
	// Preferred and Valid are when its lifetimes end; unset, never (the
	// link-local address, an infinite lifetime).
	Preferred time.Time `json:"preferred,omitzero"`
	Valid     time.Time `json:"valid,omitzero"`
	// Prefix is the /64 a SLAAC address is in, as the ISP announced it.
	Prefix netip.Prefix `json:"prefix,omitzero"`
}

// IPv6Prefix is a prefix and until when it may be used: after Preferred
// it is deprecated (no new addresses or connections), after Valid gone.
type IPv6Prefix struct {
	Prefix    netip.Prefix `json:"prefix"`
	Preferred time.Time    `json:"preferred,omitzero"`
	Valid     time.Time    `json:"valid,omitzero"`
	// Deprecated: a LAN /64 of an earlier delegation, no longer
	// announced as preferred.
	Deprecated bool `json:"deprecated,omitempty"`
}

// IPv6Counters are the IPv6 router's tables and counters (Snapshot.IPv6,
// nil without an IPv6 router).
type IPv6Counters struct {
	// Forwarded counts the frames routed between the LAN and the WAN.
	Forwarded uint64 `json:"forwarded"`
	// Drops are the IPv6 router's drops by reason (package route6's
	// names: firewall, martian, no_route, ...), the ICMPv6 errors the box
	// answered included.
	Drops []DropStat `json:"drops"`
	// Conns are the live connections of the IPv6 firewall, Neighbours the
	// entries of its neighbour cache.
	Conns      int `json:"conns"`
	Neighbours int `json:"neighbours"`
	// DADFailures counts the box's WAN addresses that duplicate address
	// detection found on another node.
	DADFailures uint64 `json:"dad_failures"`
}

// fillNilIPv6 makes the lists of st empty rather than null in JSON.
func fillNilIPv6(st *IPv6Status) {
	if st == nil {
		return
	}
	st.Delegated, st.LAN, st.WANAddresses = nonNil(st.Delegated), nonNil(st.LAN), nonNil(st.WANAddresses)
	st.LANAddresses, st.DNS = nonNil(st.LANAddresses), nonNil(st.DNS)
}
