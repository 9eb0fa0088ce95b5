// SPDX-License-Identifier: GPL-2.0
//
// The maps and the types they hold: the interface the Go side shares
// (bpf2go generates its types from these structs; Load sizes the maps).
// A change here is a change of the Go side's fastpath* types.

#pragma once

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

// Why a frame went to the slow path (index of the punts map).
enum punt {
	PUNT_MISS,	// no flow
	PUNT_ETHER,	// not IPv4/IPv6, an inner VLAN tag, a group or zero source
	PUNT_IP,	// IP options, bad version, length or L4 header
	PUNT_FRAG,	// a fragment
	PUNT_TTL,	// TTL <= 1
	PUNT_CSUM,	// bad IPv4 header checksum, or an ICMP checksum that needs the slow path
	PUNT_TCP,	// TCP flags other than ACK (PSH, URG, ECE, CWR), or no ACK
	PUNT_MTU,	// too big for the ingress or egress MTU
	PUNT_MAC,	// not the MAC the flow expects
	PUNT_ICMP,	// ICMP other than an echo of the flow's type
	PUNT_VLAN,	// a VLAN change XDP cannot make
	PUNT_REINJECT,	// the filter kept it out of the ring, then the flow changed: sent back to ingress
	PUNT_RING,	// the filter gave it to the ring, then a flow appeared: left to the ring
	PUNT_ERR,	// a helper failed (frame dropped by the tcx program)
	PUNT_EXT,	// IPv6: a next header other than TCP, UDP or ICMPv6 (extension headers)
	PUNT_SCOPE,	// IPv6: a link-local, multicast or unspecified address
	PUNT_PPPOE,	// a PPPoE frame of another session or protocol, or a flow of a session no longer current
	NUM_PUNTS,
};

// nat_key is a NAT flow as it arrives: the conntrack key of one direction
// (package nat's key: ICMP echo requests carry the identifier as sport,
// replies as dport).
struct nat_key {
	__u32 ifindex;
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

// fwd is what a routed flow, NAT or IPv6, does with its frames at the
// Ethernet layer, and the bounds and checks they pass.
struct fwd {
	__u8 dmac[6];	 // next hop
	__u8 smac[6];	 // the router's MAC on the egress side
	__u8 in_dmac[6]; // the router's MAC on the ingress side
	__u8 in_smac[6]; // the source's MAC, checked when flags & NAT_CHECK_SMAC
	__u32 out_ifindex;
	__u32 slot;	 // stats index
	__u16 max_frame; // longest frame in and out (MTU + 14)
	__u16 max_ip;	 // longest IP packet on the egress side
	__u8 flags;	 // NAT_CHECK_SMAC
	__u8 icmp_type;	 // the echo type of this direction
	__u16 in_vid;	 // the 802.1Q VLAN the frames arrive tagged with (the WAN link's), 0 untagged
	__u16 out_tci;	 // the 802.1Q tag the frames leave with (the WAN link's), 0 untagged
	__u16 ppp_sid;	 // FWD_PPP_IN, FWD_PPP_OUT: the PPPoE session of the WAN link
};

// nat_val is what a NAT flow's frames become.
struct nat_val {
	struct fwd fwd;
	__be32 saddr;	// translated addresses and ports (ICMP: the
	__be32 daddr;	// echo identifier in sport for requests,
	__be16 sport;	// dport for replies)
	__be16 dport;
	__u8 tcp_seen;	// written by the program: it tracked a frame
	__u8 wscale;	// TCP: the sender's window scale shift
	__u8 pad[2];
	__u32 ack;	// highest TCP ack of this direction: the router's at PutNAT, then the program's
	__u32 win;	// its last window (unscaled): the router's at PutNAT, then the program's
};

#define NAT_CHECK_SMAC 1
// The flow's frames arrive in the WAN link's PPPoE session (fwd.ppp_sid),
// or leave in it.
#define FWD_PPP_IN 2
#define FWD_PPP_OUT 4

// ppp_session is the WAN link's PPPoE session now (the wan_ppp map; sid
// 0: none): the flows of another session are punted (ppp.h), so that a
// new session or none takes the fast path off the old one at once.
struct ppp_session {
	__u16 sid;
	__u8 ac[6]; // the access concentrator's MAC
};

// ACK_ADVANCE is nat.AckAdvance: how far past the highest acknowledgment
// one may move at least.
#define ACK_ADVANCE (1 << 16)

// r6_key is a routed IPv6 flow as it arrives: one direction of a route6
// connection (ICMPv6 echo requests carry the identifier as sport,
// replies as dport).
struct r6_key {
	__u32 ifindex;
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

// r6_val is what a routed IPv6 flow's frames become: new Ethernet
// addresses and one hop less (the hop limit is in no checksum).
struct r6_val {
	struct fwd fwd;
};

// br_key is a bridged MAC pair: ingress port, outer VLAN, destination and
// source MAC.
struct br_key {
	__u32 ifindex;
	__u16 vid;   // the outer tag's VLAN id, 0 untagged
	__u8 tagged; // BR_TAG_*: the outer tag's TPID, 0 untagged
	__u8 pad;
	__u8 dmac[6];
	__u8 smac[6];
};

#define BR_TAG_8021Q 1
#define BR_TAG_8021AD 2

struct br_val {
	__u32 out_ifindex;
	__u32 slot;	  // stats index of the pair (port counters, FDB)
	__u16 max_wire;	  // longest frame (wire bytes, outer tag included) in and out
	__u16 vid;	  // BR_EGRESS_TAG: the VLAN to tag with
	__u8 egress;	  // BR_EGRESS_*
	__u8 l2only;	  // the rules' verdict holds for every frame of the pair
	__u8 pad[2];
};

#define BR_EGRESS_ASIS 0
#define BR_EGRESS_UNTAG 1
#define BR_EGRESS_TAG 2

// micro_key is a bridged flow of a pair whose verdict depends on more
// than its MACs: the pair's stats slot and the frame's 5-tuple.
struct micro_key {
	__u32 pair;
	__u16 ethertype;
	__u8 proto;
	__u8 pad;
	__be16 sport;
	__be16 dport;
	__u8 saddr[16];
	__u8 daddr[16];
};

struct micro_val {
	__u32 slot; // stats index of the flow (rule counters)
	__u32 pad;
};

// flow_stats are one flow's counters on one CPU.
struct flow_stats {
	__u64 packets;
	__u64 bytes;	// wire bytes as received (an outer tag included)
	__u64 l3bytes;	// IP bytes
	__u64 last;	// bpf_ktime_get_coarse_ns of the last packet
};

// handshake is the socket filter's last decision on this CPU and, for
// a frame it kept out of the rings, what it classified the frame as: a
// copy of its flow's value, so that fp_tcx rewrites and redirects it
// without classifying it again.
struct handshake {
	__u32 seq;
	__u32 fast;
	__u32 kind;  // KIND_*
	__u32 slot2; // the microflow's stats slot (0: none)
	__u32 iplen;
	__u32 pad;
	union {
		struct nat_val nat;
		struct r6_val r6;
		struct br_val br;
	} v;
};

#define HS_MAGIC 0xe1cb0c5a

// MAP declares a map of type t with n entries of key k and value v.
#define MAP(t, name, n, k, v)		\
	struct {			\
		__uint(type, t);	\
		__uint(max_entries, n);	\
		__type(key, k);		\
		__type(value, v);	\
	} name SEC(".maps")

// The flow maps, which the Go side fills (PutNAT, PutIPv6, PutPair,
// PutMicro); Load sizes them.
MAP(BPF_MAP_TYPE_HASH, nat_flows, 65536, struct nat_key, struct nat_val);
MAP(BPF_MAP_TYPE_HASH, r6_flows, 16384, struct r6_key, struct r6_val);
MAP(BPF_MAP_TYPE_HASH, br_pairs, 4096, struct br_key, struct br_val);
MAP(BPF_MAP_TYPE_HASH, br_micro, 32768, struct micro_key, struct micro_val);

// stats holds every CPU's counters of every slot, CPU by CPU: CPU c's
// counters of slot s are at c * nslots + s. It is a plain array that
// userspace maps into its memory (BPF_F_MMAPABLE), so the harvest reads
// the counters without a syscall: a batch lookup of a per-CPU array
// copied them out, 1-3 ms for 8192 flows, three times a second
// (docs/dataplane.md, Measured). Each CPU writes only its own part, so
// the counts need no atomic operations. Load sizes it (nslots times the
// possible CPUs).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 102400);
	__type(key, __u32);
	__type(value, struct flow_stats);
} stats SEC(".maps");

// nslots is the number of slots, set by Load.
volatile const __u32 nslots = 102400;

// live says which flow maps have held a flow: userspace sets a kind's
// flag before its first flow and never clears it. A map that never held
// one is not looked up (an empty hash map's lookup still reads a random
// bucket), so a bridge's IPv4 and IPv6 frames go straight to the pairs.
struct live {
	__u32 nat;
	__u32 r6;
};

MAP(BPF_MAP_TYPE_ARRAY, live, 1, __u32, struct live);

MAP(BPF_MAP_TYPE_ARRAY, wan_ppp, 1, __u32, struct ppp_session);

// punts counts the frames left to the slow path, by reason (Punts).
MAP(BPF_MAP_TYPE_PERCPU_ARRAY, punts, NUM_PUNTS, __u32, __u64);

// hs is each CPU's handshake between fp_filter and fp_tcx.
MAP(BPF_MAP_TYPE_PERCPU_ARRAY, hs, 1, __u32, struct handshake);
