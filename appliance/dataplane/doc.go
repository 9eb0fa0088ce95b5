// Package dataplane is e1kbox's userspace bridge and NAT router engine: per-ring workers that forward frames between AF_PACKET ports and a TAP host port.
//
// # Worker model
//
// Every RX ring has one worker goroutine: one per data port, or one per
// PACKET_FANOUT_HASH member when Port.Workers > 1, plus one for the host
// port. A worker locks its OS thread and pins it with SchedSetaffinity to
// the CPU that tuning.CPUPlan.WorkerCPU gives its interface (the plan that
// also places the port's IRQs; fanout members take the following CPUs of
// the plan). Per batch — one TPACKET_V3 block, or up to 64 frames read
// from the TAP — it loads the configuration snapshot (an immutable
// *settings behind an atomic.Pointer, replaced by Apply) and the link
// states once, reads the clock once, handles every frame, hands the RX
// block back, calls Flush once on each TX ring it filled, and publishes its
// counters. Per frame: frame.Parse (ParseWithTag for a tag the kernel
// stripped), FDB learn of the source and lookup of the destination (or
// flood), one rules lookup per output copy (the worker's rules.Worker with
// its flow cache), and a copy into the output's TX ring. The per-frame path
// allocates nothing (TestZeroAllocs) and takes no lock.
//
// Counters are the worker's own plain fields, stored once per batch into a
// padded block of atomics that Snapshot sums; a worker that panics is
// recovered, counted (WorkerStats.Panics, LastPanic with its stack) and
// restarted on the same pinned thread after a backoff of 100 ms doubling to
// 5 s. Close closes the RX rings and the TAP, which wakes every worker, and
// waits up to 3 s for them.
//
// # TX ownership
//
// Every TX ring has exactly one owner, so no TX path is shared between
// goroutines and nothing on the hot path is locked across ports: each
// worker opens its own TX-only AF_PACKET socket (NoRX, QDISC_BYPASS) on
// every other data port, and uses the TX ring of its own RX socket only for
// reject answers, which leave through the ingress port. The alternatives
// were a TX ring per port shared under a lock (contention and a lock on the
// hot path), or handing frames to the out port's worker through queues (a
// second copy and a cross-core hand-off per frame). The cost of per-pair
// sockets is memory: workers × (ports − 1) TX rings of DefaultTxFrames
// (512) slots, about 0.8 MiB each at MTU 1500 and 6 MiB at 9000. The
// kernel serializes the sockets of one port on the NIC's queue; frames of
// one flow come from one RX ring, so their order holds.
//
// The host port is a TAP device (package hostport): the kernel's frames
// are read from the TAP descriptor and frames for the kernel are written to
// it. Each worker stages its frames for the host port in its own small
// buffer (hostStage) and writes them, one write(2) per frame, when it
// flushes its batch; the kernel keeps each write whole, so the descriptor
// needs no lock of ours. An AF_PACKET ring cannot stand in here: bound to
// the TAP, its TX side would send frames out of the TAP, to the descriptor,
// not into the kernel. The host port's MAC is a static FDB entry.
//
// # Bridging
//
// Group and unknown-unicast destinations are flooded to every other port
// (not to ports with NoFlood or a link down) and never back out of the
// ingress port; a destination learned on the ingress port is filtered
// (DropLocal). Frames with a group or zero source, and 802.1D link-local
// destinations (01:80:c2:00:00:0x), are dropped. VLAN tags are kept: the
// FDB is keyed by MAC and outer VLAN id (Bridge.SharedVLAN keys by MAC
// only), and a tag the kernel stripped into tp_vlan_tci is written back
// with AppendTagged. Lengths follow the kernel's rule for each side's MTU
// (MTU+14 bytes, MTU+18 with an 802.1Q outer tag); longer frames are
// dropped as oversize, per output copy. Frames the parser rejects are
// dropped by the parser's reason. A port whose link goes down loses its
// learned entries.
//
// # Rules
//
// Every copy of a forwarded frame is looked up with Key.OutPort set to its
// output port: a flood is decided per output port, so "oif" rules apply to
// floods too (per-rule counters then count each copy). Frames between
// data ports use chain forward, frames to the host port chain input, frames
// from it chain output. Bridge mode tracks no connections: Key.CtState is
// always untracked. A reject drops the copy and, once per frame, answers
// on the ingress port with a TCP RST or an ICMP/ICMPv6 port unreachable
// (buildReject; never for group destinations, ICMP errors, RSTs or later
// fragments); the rules package's limiter turns rejects over its rate into
// drops.
//
// # NAT mode
//
// In NAT mode (Config.Mode = ModeNAT) one data port has RoleWAN and the
// others RoleLAN. The LAN ports and the host port form the LAN segment: a
// learning bridge among themselves (FDB, floods, rules per copy, as in
// bridge mode), never bridged to the WAN port. The router (package nat,
// one nat.Worker per engine worker, sharing the rule workers) owns two
// MACs: the WAN port's interface MAC and, on the LAN, the first LAN
// port's interface MAC (NAT.WANMAC/LANMAC override them). Which frames
// the router gets:
//
//   - every frame received on the WAN port (nothing there is bridged);
//   - on the LAN segment, unicast frames whose destination is the
//     router's LAN MAC, instead of being bridged;
//   - on the LAN segment, broadcast and multicast ARP too, after it was
//     bridged (ARP requests for the router's LAN address, gratuitous
//     ARP); other group frames (DHCP, IPv6 neighbour discovery) are only
//     bridged.
//
// Everything else on the LAN segment, including all traffic to the host
// port's own MAC (the box's management address, an ordinary host on the
// LAN subnet), is bridged. So a LAN host reaches the internet through the
// router's MAC and the box's services through the host port's MAC; the
// box itself may route through the router (a frame from the host port to
// the router's MAC is a LAN frame like any other).
//
// The router names the LAN side by the first LAN port's id (what rules
// see as iif/oif of routed LAN traffic) and the WAN side by the WAN
// port's. The engine carries out its Results: Forward to the WAN port,
// or to the LAN segment, where the frame's destination MAC picks the port
// through the FDB and an unknown destination floods the segment (the
// ingress port included: a routed frame may leave where it came in);
// Reply (ARP and echo replies, ICMP errors, RSTs) on the ingress port;
// ToHost counts a drop (nat_host): group frames reached the host port
// through the bridge already, and unicast ToHost frames are for the
// router's own addresses, which serve ARP and ping only (management is
// on the host port's address; the WAN has no services). Drops count by
// the router's reason (NATDrop: nat_table_full, nat_malformed, ...).
// After every Process the worker drains the router's outbox (ARP
// requests, frames released from its ARP queue) the same way. Every batch
// and every idle tick ends with the router's Tick, and a worker whose
// router holds frames waiting for ARP polls every natTickInterval (2 ms)
// instead of pollTimeout, since the ARP reply may reach another worker.
// Snapshot adds NATStats and the router's drop counts. Apply hands the
// router's new settings to nat.Router.Update: connections survive (except
// those through a WAN address that changed); a new table size, new MACs
// or roles need a restart. Conns, DeleteConn(s) and Neighbours serve the
// API.
//
// The kernel of the box must not answer for routed traffic: the router's
// addresses live only in the dataplane (the data ports carry no kernel
// address; the appliance's tuning plan sets forwarding=0, arp_ignore=8
// and rp_filter=1 on them). Nor should it spend cycles on the data ports'
// frames at all: each data port gets a tcx ingress program that drops
// every frame after the packet taps, i.e. once the rings have it
// (package ingressdrop; PortStats.KernelDrop). Without it, every frame to
// the router's MAC went through ip_rcv, a route lookup and ip_error,
// which allocated and RCU-freed a dst per frame to drop it: 18 % of the
// receive CPU in the netns bench (e1kbox NAT 0.64 → 0.80 Mpps). Where tcx
// is missing the port runs without it and says why.
//
// # FDB concurrency
//
// The FDB (package bridge) is a fixed array of 7-way buckets, each guarded
// by a sequence word (seqlock). A lookup reads a bucket's keys and the
// matching value with atomic loads and retries if the sequence changed: it
// never writes shared memory. Learning a known MAC on the same port is the
// same read; the last-seen time is rewritten at most once a second. Only a
// new MAC, a move, or a refresh locks the MAC's bucket (the sequence word
// doubles as the lock), so workers only ever contend on one bucket. The
// capacity is fixed at New; when it (or a bucket) is full, the oldest
// dynamic entry of the bucket is evicted, or with Bridge.Refuse the new MAC
// is not learned.
package dataplane
