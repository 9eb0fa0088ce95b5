// Package route6 is the NAT-mode router's IPv6 path: routed (untranslated) forwarding between the LAN's delegated /64s and the WAN with a stateful firewall, ICMPv6 per RFC 4890 and its own neighbour discovery.
//
// Like nat it is a library the dataplane worker calls per frame: no I/O,
// no allocation per packet, per-worker scratch, queue and counters, and
// shared tables (connections, neighbours) in fixed arrays of 4-entry
// buckets, each with its own lock, allocated by New. The NAT worker hands
// it every IPv6 frame (nat.Config.IPv6) and passes its Result and Output
// on to the engine with nat's meaning.
//
// # Addresses and neighbours
//
// The box's addresses per side (Port.Addrs: a link-local one first, then
// globals; on the WAN also those below) are answered by the dataplane: neighbour solicitations with a
// solicited advertisement (router flag on the LAN; a DAD probe is answered
// to all nodes), echo requests with replies. Other packets to them go to
// the host from the LAN (the box's stack: DNS, DHCPv6, the RA daemon's RS,
// and unicast NAs, which the router learns from and delivers: the stack
// shares the router's MAC and addresses and resolves LAN hosts too), from
// the WAN only DHCPv6 to port 546 (the client reads its own packet socket);
// the rest of the WAN's is dropped. Multicast (RS, MLD, DHCPv6) goes to the
// host. NDP messages are checked as RFC 4861 7.1 says (hop limit 255, code
// 0, length, checksum, option lengths) or dropped (ndp_invalid).
//
// # WAN addresses
//
// Besides its link-local address, the box's WAN has the addresses of
// SetWANAddressing (wanaddr.go): SLAAC addresses in the /64s the WAN's
// router advertisements offer with the A flag (RFC 4862 5.5.3: not
// link-local, preferred lifetime not above valid, the two-hour rule for
// valid lifetimes of known prefixes), whose interface identifiers are RFC
// 7217's (SHA-256 of the prefix, the interface's name, a DAD counter and
// a secret kept across restarts), and the DHCPv6 client's IA_NA
// addresses with their lease's lifetimes. Every one is tentative until
// duplicate address detection passes (RFC 4862 5.4): one NS from the
// unspecified address to its solicited-node group without a link-layer
// option, then one second (RetransTimer) in which an NA for it, or
// another node's probe for it, makes it a duplicate. A tentative address
// is not answered for, not used as a source and not accepted (packets
// to it are not the box's). A duplicate SLAAC address is replaced by the
// next DAD counter's, up to IDGEN_RETRIES (3) times, then the prefix is
// given up; a duplicate IA_NA address is the DHCPv6 client's to decline
// (WANEvent). Past its preferred lifetime an address is deprecated (still
// answered for, the error source only without a preferred one), past its
// valid lifetime gone. The link-local address is probed too when the
// router starts, but used at once (the next hop must be resolved and the
// DHCPv6 client sends from it): a conflict is reported, not acted on.
// Once it passed, the WAN sends up to three router solicitations four
// seconds apart until an advertisement comes (unicast ones are taken
// too). Workers only record what NDP tells them and send the probes from
// Tick, without allocating; Maintain (the engine's monitor, every 250 ms)
// runs the timers and publishes the addresses in use.
//
// The WAN next hop is Config.Gateway, or the source of the WAN's router
// advertisements for their router lifetime. Next hops are resolved with NS
// to the solicited-node group (at most one a second per neighbour); a
// confirmed entry is used for 30 s, then while it is re-solicited, and
// given up after 3 unanswered NS. Frames wait for resolution in a bounded
// per-worker queue (Limits.Pending) at most 3 s (neigh_failed). NS source
// link-layer addresses and solicited NAs fill the cache; unsolicited NAs
// update existing entries, and one from the LAN for an address in a LAN
// prefix makes a stale entry (RFC 9131: a host announcing a new address
// is reachable at once; its first use solicits it).
//
// # Forwarding
//
// A transit packet is checked in this order:
//   - link-local source or destination: never forwarded (link_local);
//   - extension headers: Hop-by-Hop and Routing headers are dropped
//     (ext_header; RFC 9098 documents how often they are, and routing
//     headers are source routing), Destination Options, AH and ESP pass;
//   - fragments are dropped (fragment): the firewall cannot tell a later
//     fragment's connection (an atomic fragment, offset 0 without M, is
//     not a fragment and passes);
//   - anti-spoofing (BCP 38): from the LAN the source must be in a LAN
//     prefix, from the WAN it must be in neither a LAN nor a delegated
//     prefix (martian);
//   - the route: LAN to WAN unless the destination is on the LAN (LAN to
//     LAN is the switch's, no_route) or in a delegated prefix that is not
//     on the LAN (unreachable, no route: no loop back to the ISP, RFC 7084
//     WPD-5); WAN to LAN only for the LAN prefixes; no gateway: unreachable;
//   - hop limit 1 or 0: time exceeded; larger than the egress MTU: packet
//     too big with the MTU (IPv6 routers never fragment; TCP's MSS is not
//     clamped, hosts find the path MTU from these). The box's errors
//     quote as much as fits in 1280 bytes, come from a global address of
//     the side (else of the LAN, else link-local) and are limited to
//     ICMPRate a second per worker;
//   - the stateful firewall (below); then the hop limit is decremented and
//     the Ethernet addresses rewritten.
//
// # Firewall
//
// Connections are tracked by LAN and WAN endpoint and protocol, without
// translation, with Linux conntrack's timeouts: TCP from a SYN (SYN_SENT
// 120 s, established 5 days, after a FIN 120 s, after an RST 10 s; TCP
// without SYN and without a connection is invalid), UDP 30 s until a reply
// and 180 s after, echo 30 s, other protocols 600 s. From the LAN a new
// connection opens unless the rule set's forward chain drops it; from the
// WAN only when a forward rule accepts it (an `ip6 daddr … tcp dport 22
// accept` rule; the chain's policy does not count). Packets of known
// connections pass without a rule lookup. A full bucket gives up its
// unreplied entry closest to expiry, else the new connection is dropped
// (table_full).
//
// ICMPv6 in transit (RFC 4890 4.3): destination unreachable, packet too
// big, time exceeded and parameter problem pass when the packet they quote
// belongs to a known connection (icmp_unrelated otherwise); echo requests
// pass outbound and inbound (RFC 4890 4.3.1: they must not be dropped
// outright; to unknown addresses within the scan limits); echo replies
// only of known echoes; everything else (NDP, MLD, router renumbering,
// node information, unknown types) is dropped (icmp_policy).
//
// # Scans
//
// A WAN host scanning the LAN's /64 sends to addresses nobody has: each
// would cost an incomplete entry, its NS and a queued frame. A new
// connection from the WAN (an echo request, or what a forward rule
// accepts) to an address without a resolved entry is therefore admitted
// within ScanLimits: per source address and per source /64 (per worker:
// one scanner cannot use up other sources' budget) and in total
// (scan_source, scan_total); its resolution takes a way of the cache only
// from incomplete entries or from resolved ones unconfirmed for
// idleForget, never from a neighbour in use, within a cap of a quarter of
// the cache and a rate of NS (neigh_limit), and its frames take at most
// half the queue. Packets of such a connection resolve the same way
// until the LAN answers. Known connections and known neighbours are never
// limited by any of this, and neither is the box's own traffic.
//
// Frames that frame.Parse rejects (truncated headers, extension chains
// that run off the end, bad fragments) never get here: the NAT worker
// counts them as malformed. Counters: Stats.Drops by Reason (the errors
// the box answered included), Stats.Actions.
//
// # Listing
//
// EachConn, Conns and Neighbours are for the dashboard, not the hot path:
// they walk the tables a bucket at a time, each bucket's lock held only
// to copy its four entries. Neighbours are incomplete (solicited), reachable
// (confirmed in the last 30 s) or stale (still used while re-solicited).
//
// # Fast path
//
// The dataplane's in-kernel fast path may take over a direction of an
// established connection (offload.go): Offloadable says whether forward
// would route its packets (addresses, prefixes, gateway), its connection
// is TCP established or UDP or echo replied, with a timeout of at least
// MinOffloadTimeout, and its next hop was confirmed within 30 s; it
// returns the egress, the MACs and the MTU. The fast path leaves TCP
// SYN, FIN and RST, hop limit 1, oversized packets and everything but
// echo in ICMPv6 to Process. Offloaded carries what it forwarded into the
// connection (packets, deadline), CountOffloaded into Stats.Actions;
// NeighbourFresh tells it when a next hop needs the router's NS again
// (and, past half the reachable time, has a worker's Tick probe it with a
// unicast NS, so that an answering next hop never goes stale under the
// fast path's traffic), and OnChange when SetConfig or SetPrefixes
// changed the routing.
package route6
