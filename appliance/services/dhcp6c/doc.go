// Package dhcp6c is the router's WAN DHCPv6 client: it asks for a delegated prefix (IA_PD, RFC 8415) and optionally an address (IA_NA) over a packet socket of its own.
//
// Like the DHCPv4 client (wanclient), it cannot rely on the kernel's stack:
// the WAN port belongs to the userspace dataplane. It opens an AF_PACKET
// tap on the WAN interface whose BPF filter passes only IPv6/UDP to port
// 546 and builds Ethernet, IPv6 and UDP around each message itself, from
// the link-local address derived from the router's WAN MAC (modified
// EUI-64). github.com/insomniacslk/dhcp/dhcpv6 encodes and decodes the
// messages. The socket, the framing, the run loop, the state files and
// the stats are the machinery it shares with wanclient (package
// dhcpclient); this package holds the protocol.
//
// Client.Run is the RFC 8415 client state machine (section 18):
//
//	SOLICIT    multicast to ff02::1:2, retransmitted after 1, 2, 4 … s up
//	           to 3600 s (±10 %); Advertises are collected until the first
//	           retransmission time ends (preference 255 at once), the best
//	           (highest preference, then first) with a prefix or an address
//	           wins
//	REQUEST    the Advertise's IAs to its server, 1 s doubling to 30 s, 10
//	           tries, then SOLICIT again
//	BOUND      until T1 (from the IA_PD; 0.5 × the shortest preferred
//	           lifetime when the server leaves it 0)
//	RENEW      from T1, with the server's ID, 10 s doubling to 600 s
//	REBIND     from T2 (0.8 × when 0), any server, 10 s doubling to 600 s
//	DECLINE    Client.Decline (DAD found the address on another node,
//	           RFC 8415 18.2.8): the address leaves the lease at once
//	           (onChange) and, once bound, goes to the server, 1 s
//	           doubling, 5 sends; the first Reply ends it (whatever its
//	           status), and until then no Reply brings the address back
//	expiry     when every valid lifetime has ended: onChange(old, nil),
//	           SOLICIT
//
// Asked for a prefix and an address, the client takes a prefix without
// an address: a NoAddrsAvail status in the IA_NA, or at the top of an
// Advertise or Reply that still delegates a prefix, does not cost the
// delegation (OpenWrt's reqaddress=try); the next exchanges ask for an
// address again.
//
// A Reply with NoBinding for an IA the client holds something in, in RENEW
// or REBIND, starts a SOLICIT that asks for the binding again (the binding
// is used meanwhile; NoBinding for an IA_NA asked for without an address
// is no loss); a prefix returned with valid lifetime 0 is dropped at
// once; a prefix the server stops mentioning is kept until its own valid
// lifetime ends. At start an unexpired lease from the state directory is
// confirmed with REBIND (RFC 8415 18.2.2: delegated prefixes are not
// Confirmed); an expired one, or any with Config.SolicitKept (a new
// PPPoE session), is still asked for again as a hint in the SOLICIT. The DUID (DUID-LLT, made once and kept in the state directory;
// DUID-LL of the MAC without one) and the IAID (the last four bytes of the
// MAC) are the same across restarts, so the server hands out the same
// prefix.
//
// The client does not answer neighbour solicitations for its link-local
// address: whoever owns the WAN port does (the kernel in a plain netns, the
// router's dataplane on the box).
package dhcp6c
