// Package nat is the userspace NAT router: connection tracking, masquerade, port forwards and ARP.
//
// It is a library the dataplane engine calls per frame. It does no I/O, it
// never allocates per packet, and all its state is either per Worker
// (scratch buffers, ARP pending queue, outbox, fragment table, counters)
// or shared through the Router (configuration snapshot, connection table,
// NAT mappings, ARP cache) with no global lock on the lookup path.
//
// # Wiring
//
//	r, err := nat.New(cfg)                 // once
//	w := r.NewWorker(ruleSet.Worker(i))    // one per worker goroutine
//	// per received frame (now in Unix nanoseconds, read once per batch):
//	res := w.Handle(now, inPort, pkt)      // or w.Process(now, inPort, pkt, &f) with f from a successful frame.Parse
//	                                       // (and w.Prefetch(inPort, pkt) D frames earlier: see Prefetching)
//	switch res.Action {
//	case routing.Forward, routing.Reply: transmit res.Frame on port res.Port
//	case routing.Deliver:               transmit res.Frame on the host port res.Port
//	case routing.ToHost:                deliver res.Frame to the host port, or drop it without one
//	case routing.Queued, routing.Consumed, routing.Drop: nothing (count res.Reason for Drop)
//	}
//	for port, b, ok := w.Output(); ok; port, b, ok = w.Output() { transmit b on port }
//	// after every batch, and every few ms while w.Waiting():
//	w.Tick(now); then drain w.Output() again
//
// The engine must:
//   - Forward: send res.Frame (the received bytes, rewritten in place:
//     Ethernet addresses, IP addresses, ports, TTL, checksums) on
//     res.Port. It is the same length as the received frame, or shorter:
//     the first fragment of a packet larger than the egress MTU, whose
//     other fragments come out of Output.
//   - Reply: send res.Frame, a frame the worker generated (ARP reply, ICMP
//     echo reply, ICMP time exceeded, fragmentation needed, port
//     unreachable, TCP RST), on res.Port (the port the frame came from).
//     It stays valid until the worker's next Process, Handle or Tick.
//   - Queued: nothing; the frame was copied into the worker's ARP pending
//     queue and comes out of Output once its next hop is resolved.
//   - Consumed: nothing (ARP learned, ARP for another host).
//   - Deliver (with Config.Host): send res.Frame, unchanged, on the host
//     port: TCP, UDP and fragments for the LAN address, which the input
//     chain accepted. The box's own stack behind the host port has the
//     LAN address and MAC; its connections come in from the host port
//     with the LAN address as their source, are masqueraded (through the
//     output chain) and their replies are Forwarded to the host port.
//   - ToHost: what the router does not serve: broadcasts and multicasts
//     (the bridge floods them to the host port already), DHCP replies on
//     the WAN (the DHCP client reads its own packet socket), TCP/UDP for
//     the WAN address or without Config.Host. Drop it; it is not counted
//     as a router drop.
//   - Drop: discard; Result.Reason says why (Stats.Drops counts them).
//   - After each Process/Handle/Tick call, drain Output: ARP requests and
//     frames released from the pending queue, each for a port. Frames
//     from Output stay valid until the next Process, Handle or Tick.
//   - Call Tick after every batch and, while Waiting reports queued
//     frames, at least every few milliseconds: a frame queued by one
//     worker is released by that worker, even when another worker received
//     the ARP reply. Tick also sweeps a slice of the connection table.
//
// Only untagged frames are handled (VLAN-tagged ones are dropped); the
// engine strips nothing and adds nothing.
//
// # Prefetching
//
// With a big connection table, each lookup waits for two dependent
// memory reads (the key's index slot, then its entry), most of the cost
// of an established packet. The engine hides them by working a block of
// frames as a pipeline: before processing frame i of the block it calls
// Prefetch for frame i+D, with the port it will pass to Process for that
// frame, having prefetched frames 0 to D-1 before the first one. D = 8
// (BenchmarkForwardBlock); it must exceed 4, see below.
//
//	for j := range min(D, n) { w.Prefetch(port, frames[j]) }
//	for i := range n {
//		if i+D < n { w.Prefetch(port, frames[i+D]) }
//		parse frames[i]; res := w.Process(now, port, frames[i], &f); ...
//	}
//
// A reader that yields one frame at a time (afpacket's Block.Next) keeps
// the last D frames it read in a ring, prefetches each frame as it reads
// it and processes it D frames later, then processes the rest at the end
// of the block.
//
// Prefetch parses just enough of a frame to compute its connection key
// and asks for the cache lines of the key's index slots; four Prefetch
// calls later it reads those slots and asks for the lines of the entry
// they point to. The fetches of several frames overlap, and Process finds
// what it needs in the cache. Prefetch takes no lock, changes no shared
// state, ignores frames the router would not look up and does not
// allocate; a frame prefetched but not processed (or a frame to the
// bridge) costs only the prefetch. The last four frames of a block get
// their slots prefetched but not their entries.
//
// # Addresses and neighbours
//
// The LAN and WAN addresses belong to the dataplane: it answers ARP for
// them (and learns the requester), answers ICMP echo to either address
// (the input chain is consulted for echo requests), resolves next hops
// with its own ARP and routes everything off the LAN to the WAN gateway
// (or directly to WAN on-link hosts). The ARP cache is shared: buckets of
// four entries read lock-free (seqlocks); a confirmed entry is used
// without probing for NeighReachable seconds, then used while it is probed
// by unicast once a second, and given up after NeighProbes unanswered
// probes. Unsolicited ARP replies only update existing entries, and an
// ARP that claims a resolved neighbour's address for another MAC is not
// taken while the MAC it has answers (it is counted, arp_conflict, and
// that MAC probed); a full bucket never gives up the gateway's entry or a
// neighbour the router sent to lately. Frames for
// unresolved next hops wait in a bounded per-worker queue; ARP requests
// go out at most once per second per neighbour, and those that resolve a
// new address (broadcast) ARPRate per second in all, so that resolving
// many unknown addresses (a LAN host scanning the WAN's subnet; a port
// forward exposes one LAN address) never holds up the probes of known
// neighbours; a queued frame is dropped (neigh_failed) after NeighProbes
// seconds. An incomplete entry never takes the slot of a neighbour that
// ARP or traffic confirmed within five minutes, and at most a quarter of
// the table is incomplete at once (the gateway's apart): past either the
// frame is dropped (neigh_limit). The WAN address may be left unset and supplied later with
// SetWAN (the DHCP client hook; DHCP replies reach the host as ToHost).
// A point-to-point WAN (Config.WANPeerMAC: a PPPoE session, framed by the
// caller) has no neighbours: every frame to the WAN goes to the peer's
// MAC, the WAN address may be a /32 and the gateway is the peer's
// address, on no subnet of ours.
//
// # Connection tracking
//
// Connections are keyed by their 5-tuple as they arrive, in both
// directions, plus the side they arrive on. The table has a fixed
// capacity: MaxConns entries, each a 64-byte hot part (keys, state,
// deadline, counters: one aligned cache line, all an established packet
// reads and writes) and a 24-byte cold part (incarnation, stripes,
// creation time, kind), plus about 26 bytes of index per entry and the
// NAT port maps (BenchmarkTableMemory measures the whole; the figure is in
// docs/dataplane.md); it is allocated and touched in New (on Linux
// in transparent huge pages if the kernel has them) and never allocates
// afterwards. The index is split into stripes
// (up to 4096), each a lock and an open-addressing hash table; a lookup
// locks only the stripe of its key, so workers contend only when they hit
// the same stripe. Counters (packets and IP bytes per direction) change
// under the stripe lock of their direction; state and deadline are
// atomics.
//
// States and timeouts follow Linux (see Timeouts): TCP SYN_SENT 120 s,
// SYN_RECV 60 s, ESTABLISHED 5 days, FIN_WAIT 120 s, CLOSE_WAIT 60 s,
// LAST_ACK 30 s, TIME_WAIT 120 s, CLOSE 10 s; UDP 30 s until a reply,
// then 180 s; ICMP echo 30 s; other protocols 600 s. Only a TCP SYN opens
// a TCP connection (no mid-stream pickup); a SYN on a connection in
// TIME_WAIT or CLOSE reopens it. Windows are not tracked, but each
// direction's highest acknowledgment and last window are, so that a RST
// ends a connection only at the receiver's RCV.NXT; one elsewhere in its
// window is passed on (the receiver answers with a challenge ACK) and one
// outside it is dropped (rst_out_of_window), as RFC 5961 and Linux do.
//
// Expired entries stop matching at once and are deleted by Tick, which
// sweeps SweepBatch slots per call, by a lookup that meets them, or by an
// insert that needs room; forwarding never stops for it.
//
// A connection is assured, as Linux has it, once TCP reached ESTABLISHED
// or another protocol has traffic 2 s or more after its first
// reply; the others are what a flood makes, and they are capped: at most
// MaxInbound of them opened from the WAN (past it a new one takes the
// place of the oldest, compared among 16 of them), at most MaxPerRemote
// per WAN address and MaxPerHost per LAN host (past those a source
// recycles its own, else is refused: source_limit; the counts are kept in
// buckets of a keyed hash per side). When the table is full, an insert
// looks at the next 16 slots from a rotating cursor (the next 1008 when
// those hold nothing it may delete) and deletes the first expired entry
// there, else the lowest of: unassured from the WAN,
// unreplied from the LAN or TCP in TIME_WAIT or CLOSE, replied but not
// assured; closest to expiry first. An assured connection that is not
// closed is never evicted: when the window holds nothing else, the new
// connection is dropped (table_full). New connections take a free slot at
// random, so the live entries are spread over the table wherever the
// cursor looks.
//
// Router.Conns lists connections with a Filter, paged by table position;
// DeleteConn and DeleteConns delete them.
//
// # Translation
//
// LAN to WAN connections are masqueraded to the WAN address with
// endpoint-independent mapping (RFC 4787): a LAN address and port (or
// ICMP echo identifier) keeps one NAT port for every destination while
// any of its connections lives. The LAN port is kept when free, else a
// free port of [PortMin, PortMax] is taken from a random start. Filtering
// is address-and-port dependent: only replies of known connections and
// port forwards come in. Other IP protocols (GRE, ESP, ...) are
// masqueraded by address only, one LAN host per remote address at a time.
// ICMP messages other than echo and the errors below are not forwarded.
//
// Port forwards send new TCP/UDP connections to the WAN address to a LAN
// host. A LAN host connecting to a forwarded port on the WAN address
// (hairpin) reaches the LAN host too, masqueraded to the WAN address so
// the answer comes back through the router.
//
// The forward chain of the rule set decides each new connection (addresses
// after DNAT, before SNAT; Key.CtState = new); established packets are
// not looked up. Reject answers with a TCP RST (from the destination) or
// an ICMP port unreachable.
//
// Forwarded packets get their TTL decremented; at TTL 1 the box answers
// time exceeded. A packet bigger than the egress MTU with DF set gets
// fragmentation needed (type 3 code 4, with the MTU); without DF the box
// fragments it after translation (RFC 1812 §4.2.2.7; a fragment into
// smaller fragments of the same datagram, later ones with only the
// options that have the copied flag): the first fragment is the Result,
// the others wait in the outbox. TCP SYNs get their
// MSS clamped to the smaller MTU minus 40 (Config.MSSClamp). ICMP errors
// (the box's own are rate-limited to ICMPRate per second) are never
// generated about ICMP errors or later fragments.
//
// ICMP errors about tracked connections (destination unreachable
// including fragmentation needed, time exceeded, parameter problem) are
// translated: outer destination, outer source when the error comes from
// the peer itself, and the quoted header's addresses, ports or echo
// identifier, with the quoted IP and transport checksums and the ICMP
// checksum updated.
//
// IPv4 fragments: the first fragment is translated like any packet and
// recorded (per worker, FragEntries entries, FragTimeout seconds); later
// fragments are matched by source, destination, protocol and IP ID and
// get the same addresses. Later fragments arriving before their first,
// and overlapping fragments, are dropped (fragment). The engine's fanout
// (if any) must keep a datagram's fragments on one worker, as the
// kernel's flow hash does.
//
// All checksums are updated incrementally (RFC 1624); a zero UDP checksum
// stays zero. Incoming IPv4 header checksums are verified (a bad one is
// dropped); transport checksums are not, and an incremental update keeps
// a bad one bad, so a corrupted packet is never made valid. ICMP errors
// and echo requests to the box have their ICMP checksum verified.
//
// # IPv6
//
// Without Config.IPv6, IPv6 is dropped in NAT mode, by policy
// (ReasonIPv6): hosts without an IPv6 router fall back to IPv4 at once.
// With it, every IPv6 frame (from the LAN, the WAN and the host port) goes
// to package route6, which routes it untranslated between the delegated
// LAN prefixes and the WAN behind its own stateful firewall, answers
// neighbour discovery for the box's addresses and resolves next hops with
// its own bounded neighbour cache. Its Results mean what nat's do; its
// drops are counted here as ReasonIPv6 and by reason in route6's Stats;
// Output and Waiting include its frames and Tick ticks it.
//
// Malformed frames (truncated headers, bad IHL or lengths, impossible
// fragments) are counted (Stats.Malformed by parse error) and dropped
// before anything is changed; nothing is forwarded half-translated.
package nat
