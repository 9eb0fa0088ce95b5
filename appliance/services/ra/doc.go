// Package ra is the router's LAN router advertisement daemon (RFC 4861): periodic and solicited RAs with the prefixes for SLAAC, RDNSS and DNSSL (RFC 8106) and the MTU, and renumbering by deprecation (RFC 9096).
//
// Server.Serve opens an ICMPv6 socket (github.com/mdlayher/ndp) on the
// interface's link-local address, joins ff02::2 and answers router
// solicitations with a multicast RA to ff02::1 within 0.5 s (at most one
// multicast RA per 3 s, MIN_DELAY_BETWEEN_RAS), and sends unsolicited RAs
// every MinInterval to MaxInterval at random, the first three at most 16 s
// apart (MAX_INITIAL_RTR_ADVERT_INTERVAL). Solicitations with a hop limit
// other than 255, or an unspecified source with a link-layer address
// option, are dropped (RFC 4861 6.1.1).
//
// Each prefix is announced on-link and autonomous, with the lifetimes left
// of the delegation capped at 2700 s preferred and 5400 s valid (RFC 9096
// ND_PREFERRED_LIMIT and ND_VALID_LIMIT), so a LAN host stops using a
// prefix soon after the ISP takes it back. A prefix that SetPrefixes
// removes is announced with both lifetimes 0 until its old valid lifetime
// ends: hosts deprecate its addresses at once (and keep them at most two
// hours, RFC 4862 5.5.3 e). The router lifetime is 0 while no prefix is
// valid, so hosts do not route through a box without IPv6 upstream; with
// neither current nor deprecated prefixes no RA is sent at all. The O
// flag (other configuration, Config.OtherConfig and SetOtherConfig) tells
// hosts that a stateless DHCPv6 server answers on the link; the M flag is
// never set (addresses come from SLAAC only).
package ra
