// Package dhcp6s is the router's stateless DHCPv6 server for the LAN (RFC 8415 section 6.1, RFC 3736): DNS servers, search domains and the information refresh time to hosts that ask, no addresses.
//
// Server.Serve opens a UDP socket bound to the LAN interface and to the
// All_DHCP_Relay_Agents_and_Servers group ff02::1:2 port 547 (joined), so
// only multicast reaches it: the server never sends a Server Unicast
// option, and RFC 8415 18.4 wants messages a client unicasts without one
// answered with UseMulticast or dropped; the kernel refuses them here
// (port unreachable) before they cost anything. github.com/insomniacslk/dhcp's
// server6 reads the socket and dhcpv6 encodes and decodes the messages.
//
// What it answers (RFC 8415 sections 16 and 18.3):
//
//	Information-request  Reply: Server Identifier, the client's Client
//	                     Identifier when it sent one, DNS Recursive Name
//	                     Server (RFC 3646) and Domain Search List when
//	                     configured, Information Refresh Time (default
//	                     1800 s, at least IRT_MINIMUM 600 s). Dropped with
//	                     an IA option or another server's identifier.
//	Solicit              Advertise with only a Status Code NoAddrsAvail,
//	                     the Server and Client Identifiers (18.3.1), and
//	                     each IA_PD back with NoPrefixAvail inside: the
//	                     client ignores it (18.2.9) and keeps SLAAC.
//	                     Dropped without a Client Identifier or with a
//	                     Server Identifier.
//	Request              (naming this server) Reply with each IA_NA/IA_TA
//	                     carrying NoAddrsAvail, each IA_PD NoPrefixAvail.
//	Renew                (naming this server) Reply with each IA NoBinding.
//	Release, Decline     (naming this server) Reply with Success and each
//	                     IA NoBinding (18.3.7, 18.3.8).
//	Confirm, Rebind      dropped: without bindings the server cannot tell
//	                     whether the addresses are on the link, and then
//	                     MUST NOT reply (18.3.3, 18.3.5).
//	Relay-forward        dropped: the server is on the LAN's link only.
//
// Messages naming another server (a second DHCPv6 server on the LAN) are
// dropped as other_server. Before anything is parsed every message passes
// two token buckets, one per client address (DefaultClientRate a second,
// bursts of twice that; at most 4096 clients tracked one by one, then
// sharing one bucket) and one for all (DefaultRate), so a flood costs the
// box at most a bounded number of parsed messages a second. Stats counts
// the messages received, the answers by message type and the drops by
// reason.
package dhcp6s
