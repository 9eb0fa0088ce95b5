// Package fastpath is the dataplane's in-kernel fast path: BPF programs that forward the frames of established flows the userspace dataplane installed, and their flow and counter maps.
//
// The pattern is MikroTik's FastTrack and the kernel's flowtable: the
// userspace dataplane decides every new flow on its AF_PACKET path (rules,
// conntrack, FDB, neighbours) and, once a NAT connection or a routed IPv6
// connection (package route6) is established or a bridged unicast MAC
// pair (or, under rules that look past the MACs, a bridged 5-tuple) has
// an accept verdict, installs it here: PutNAT, PutIPv6, PutPair,
// PutMicro. A BPF program then rewrites such frames (Ethernet addresses,
// IPv4 addresses, ports or echo identifier, TTL or hop limit, checksums,
// VLAN tag) and redirects them to the egress port inside the kernel, with
// no ring, copy or syscall. Everything else goes to the rings, as before:
// TCP SYN, FIN and RST, fragments, IP options, TTL 1, bad IPv4 header
// checksums, frames too big for the egress MTU, ICMP other than echo,
// inner VLAN tags, malformed lengths and every frame no flow matches (the
// Punt reasons). The classifier accepts exactly the frames package frame
// parses, and its checksum updates repeat package frame's incremental
// ones step by step, so the fast path and the slow path write the same
// bytes (TestRewriteMatchesSlowPath runs both on the same frames).
//
// A routed IPv6 flow (IPv6Key: ingress port, addresses, protocol, ports
// or echo identifier) is one direction of a route6 connection: its frames
// get the next hop's and the router's MACs and one hop less, which no
// checksum covers (TestRewriteMatchesRoute6). Left to route6: any next
// header but TCP, UDP and ICMPv6, so every extension header
// (PuntExtHeader), link-local, multicast and unspecified addresses
// (PuntScope), hop limit 1 or 0, frames longer than the IPv6 packet
// (route6 trims them) and the NAT flows' other reasons. An IPv6 frame of
// no routed flow is looked up as a bridged pair, so link-local and other
// bridged IPv6 traffic is unaffected.
//
// Two hooks, chosen at Load (Mode):
//
//   - tcx (ModeTCX): a tcx ingress program, attached ahead of the port's
//     other tcx programs (ingressdrop). AF_PACKET taps see a frame before
//     tcx ingress runs, so a socket filter (FilterFD, attached to every RX
//     ring socket) reads the same flow map and keeps the fast path's
//     frames out of the rings before they are copied. The filter records
//     its decision in skb->cb together with a per-CPU sequence number,
//     and, for a frame it keeps out, a copy of the flow it classified the
//     frame as (and tracks its TCP acknowledgment). The tcx program
//     follows the decision: a frame the filter gave to a ring is never
//     also forwarded, and one it kept out is rewritten and redirected by
//     that copy without being classified again (the frame was the flow's
//     when the filter saw it: a flow changed or removed in between is a
//     change after it, as on the slow path). The classifier refuses what
//     the rewrite would (an echo whose checksum the new identifier makes
//     zero), so a frame kept out of the rings is never refused by tcx;
//     one tcx cannot read is sent back to the port's ingress. Without a
//     filter's decision (no ring on the port) tcx classifies the frame
//     itself.
//   - generic XDP (ModeXDP): runs before the taps, so it needs no filter.
//     It cannot see a VLAN tag the NIC stripped into the skb's metadata
//     (generic XDP has no access to it), so it treats tagged traffic as
//     untagged: use it only where no tagged frames arrive or the NIC's
//     rx-vlan-hw-parse is off. It makes no VLAN changes (such pairs stay on
//     the slow path).
//
// The NAT and IPv6 flow maps are looked up only once a flow of their
// kind has been put (the live map, opened by PutNAT and PutIPv6 and never
// closed): a bridge's frames go straight to the pairs.
//
// Counters flow back through the stats array indexed by a flow's slot,
// with a part for each CPU: packets, wire bytes, IP bytes and the time of
// the last packet (bpf_ktime_get_coarse_ns: CLOCK_MONOTONIC at the last
// tick). The array is mapped into the process (BPF_F_MMAPABLE), so a
// StatsReader reads it without a syscall. Read them and keep
// the differences; a slot's counters are zeroed when it is given to a new
// flow (ResetStats). A TCP NAT flow also keeps the highest acknowledgment
// (starting from the router's, NATFlow.Ack) and the last window it
// forwarded (NATTrack), which conntrack needs to judge a later RST.
//
// The programs need CONFIG_BPF_SYSCALL, tcx (CONFIG_NET_XGRESS, Linux
// 6.6+) or generic XDP, bpf_skb_vlan_push/pop and bpf_xdp_load_bytes
// (5.18+). They use no kfuncs, callbacks or tail calls, so they also run
// without a BPF JIT (the gokrazy kernel has none: the interpreter runs
// them). KernelReport says what the running kernel offers.
//
// The C source is bpf/fastpath.c, the one compilation unit, and the
// headers it includes, one for each concern (bpf/fastpath.c lists them);
// fastpath_bpfel.{go,o} are generated from it with Debian's clang (go
// generate) and committed.
package fastpath
