// SPDX-License-Identifier: GPL-2.0
//
// e1kbox fast path: forwards the frames of established flows that the
// userspace dataplane installed in the flow maps (NAT connections, routed
// IPv6 connections and bridged unicast MAC pairs), in the kernel, and leaves every other frame
// to the AF_PACKET rings. Three programs share one classifier:
//
//   fp_filter  socket filter on the dataplane's RX ring sockets: keeps the
//              frames the fast path forwards out of the rings (it runs at
//              the packet tap, before tcx), and tells fp_tcx its decision
//              through skb->cb and a per-CPU handshake word;
//   fp_tcx     tcx ingress: rewrites and redirects those frames; every
//              other frame goes on to the next tcx program (ingressdrop);
//   fp_xdp     generic XDP (runs before the taps, so no filter is needed):
//              the same for untagged frames.
//
// A frame is forwarded only when it is one the slow path would forward
// unchanged in every respect the flow does not fix: anything else (TCP
// SYN/FIN/RST, fragments, IP options, TTL <= 1, bad IPv4 header checksum,
// too big for the egress MTU, ICMP other than echo, inner VLAN tags,
// malformed lengths, unknown flows; for routed IPv6 also any extension
// header, link-local and multicast addresses and padded frames) is punted
// to the slow path. The
// checksum arithmetic mirrors package frame's incremental updates step by
// step, so both paths write the same bytes.
//
// Go generates fastpath_bpfel.{go,o} from this file (go generate, see
// gen.go); the objects are committed.

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TCX_NEXT -1
#define TC_ACT_REDIRECT 7
#define XDP_PASS_ 2
#define XDP_REDIRECT_ 4
#define BPF_F_INGRESS_ 1

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86dd
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88a8

#define IPPROTO_ICMP_ 1
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define IPPROTO_ICMPV6_ 58

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_PSH 0x08
#define TCP_ACK 0x10
#define TCP_URG 0x20
#define TCP_ECE 0x40
#define TCP_CWR 0x80

// HDR_MAX is how much of a frame the classifier reads: Ethernet, IPv6
// and a TCP header without options.
#define HDR_MAX 80
#define L3 14

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

// nat_val is what a NAT flow's frames become.
struct nat_val {
	__u8 dmac[6];	 // next hop
	__u8 smac[6];	 // the router's MAC on the egress side
	__u8 in_dmac[6]; // the router's MAC on the ingress side
	__u8 in_smac[6]; // the source's MAC, checked when flags & NAT_CHECK_SMAC
	__be32 saddr;	 // translated addresses and ports (ICMP: the
	__be32 daddr;	 // echo identifier in sport for requests,
	__be16 sport;	 // dport for replies)
	__be16 dport;
	__u32 out_ifindex;
	__u32 slot;	   // stats index
	__u16 max_frame;   // longest frame in and out (MTU + 14)
	__u16 max_ip;	   // longest IP packet on the egress side
	__u8 flags;	   // NAT_*
	__u8 icmp_type;	   // the echo type of this direction
	__u8 tcp_seen;	   // written by the program: it tracked a frame
	__u8 wscale;	   // TCP: the sender's window scale shift
	__u32 ack;	   // highest TCP ack of this direction: the router's at PutNAT, then the program's
	__u32 win;	   // its last window (unscaled): the router's at PutNAT, then the program's
};

#define NAT_CHECK_SMAC 1

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
	__u8 pad[2];
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct nat_key);
	__type(value, struct nat_val);
} nat_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct r6_key);
	__type(value, struct r6_val);
} r6_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct br_key);
	__type(value, struct br_val);
} br_pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct micro_key);
	__type(value, struct micro_val);
} br_micro SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct live);
} live SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NUM_PUNTS);
	__type(key, __u32);
	__type(value, __u64);
} punts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct handshake);
} hs SEC(".maps");

// pkt is the start of a frame, copied to the stack, and its metadata.
struct pkt {
	__u8 b[HDR_MAX + 24]; // the slack keeps fp_xdp's load length provably inside
	__u32 len;     // frame bytes (after a tag the kernel holds in metadata)
	__u32 ifindex;
	__u16 vlan_tci;
	__u16 vlan_proto;
	__u8 vlan_present;
	__u8 l4;       // L4 offset (IPv4 34, IPv6 54)
	__u16 iplen;   // IP packet length
};

// cls is what the classifier decided for a frame.
struct cls {
	int kind; // KIND_*
	struct nat_val *nat;
	struct br_val *br;
	struct r6_val *r6;
	__u32 slot2; // the microflow's stats slot (0: none)
	int r6why;   // why no IPv6 flow was looked up (punt + 1), 0: looked up
};

#define KIND_SLOW 0
#define KIND_NAT 1
#define KIND_BRIDGE 2
#define KIND_R6 3

static __always_inline void count_punt(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&punts, &why);
	if (n)
		*n += 1;
}

static __always_inline __u16 be16(const __u8 *p) { return (__u16)p[0] << 8 | p[1]; }
static __always_inline __u32 be32(const __u8 *p)
{
	return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3];
}
static __always_inline void put16(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}
static __always_inline void put32(__u8 *p, __u32 v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

// fold is frame.fold64: a one's complement accumulator folded to 16 bits.
static __always_inline __u32 fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

// upd16 is frame.Update16.
static __always_inline __u16 upd16(__u16 csum, __u16 from, __u16 to)
{
	__u32 s = (__u32)(__u16)~csum + (__u16)~from + to;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~(__u16)s;
}

// upd32 is frame.Update32.
static __always_inline __u16 upd32(__u16 csum, __u32 from, __u32 to)
{
	__u64 s = (__u64)(__u16)~csum + (__u16)~(__u16)(from >> 16) + (__u16)~(__u16)from + (to >> 16) + (to & 0xffff);
	return ~(__u16)fold(s);
}

// updb4 and updb2 are frame.UpdateBytes for 4 and 2 bytes.
static __always_inline __u16 updb4(__u16 csum, __u32 from, __u32 to)
{
	__u32 sf = fold((__u64)(from >> 16) + (from & 0xffff));
	__u32 s = (__u32)(__u16)~csum + (__u16)~(__u16)sf;
	__u16 init = s + (s >> 16);
	return ~(__u16)fold((__u64)init + (to >> 16) + (to & 0xffff));
}

static __always_inline __u16 updb2(__u16 csum, __u16 from, __u16 to)
{
	__u32 s = (__u32)(__u16)~csum + (__u16)~from;
	__u16 init = s + (s >> 16);
	return ~(__u16)fold((__u64)init + to);
}

// ipv4_ok checks an IPv4 header without options as frame.Parse and the
// NAT do (nat true: also TTL and the header checksum) and records the L4
// offset and the IP length.
static __always_inline int ipv4_ok(struct pkt *p, int nat)
{
	__u8 *b = p->b;
	if (b[L3] != 0x45)
		return PUNT_IP + 1;
	__u16 tot = be16(&b[L3 + 2]);
	if (tot < 20 || tot > p->len - L3)
		return PUNT_IP + 1;
	if (be16(&b[L3 + 6]) & 0x3fff)
		return PUNT_FRAG + 1;
	p->l4 = L3 + 20;
	p->iplen = tot;
	if (!nat)
		return 0;
	if (b[L3 + 8] <= 1)
		return PUNT_TTL + 1;
	__u32 s = 0;
#pragma unroll
	for (int i = 0; i < 20; i += 2)
		s += be16(&b[L3 + i]);
	if (fold(s) != 0xffff)
		return PUNT_CSUM + 1;
	return 0;
}

// l4_ok checks the transport header as frame.Parse does (the part of it
// that the classifier reads must be in p->b).
static __always_inline int l4_ok(struct pkt *p, __u8 proto, int v6)
{
	__u8 *b = p->b;
	__u32 rem = p->iplen - (p->l4 - L3);
	__u32 l4 = p->l4;
	if (proto == IPPROTO_TCP_) {
		if (rem < 20 || l4 + 20 > HDR_MAX)
			return PUNT_IP + 1;
		__u8 doff = b[l4 + 12] >> 4;
		if (doff < 5 || (__u32)doff * 4 > rem)
			return PUNT_IP + 1;
	} else if (proto == IPPROTO_UDP_) {
		if (rem < 8 || l4 + 8 > HDR_MAX)
			return PUNT_IP + 1;
		__u16 ul = be16(&b[l4 + 4]);
		if (ul < 8 || ul > rem)
			return PUNT_IP + 1;
	} else if ((proto == IPPROTO_ICMP_ && !v6) || (proto == IPPROTO_ICMPV6_ && v6)) {
		if (rem < 8 || l4 + 8 > HDR_MAX)
			return PUNT_IP + 1;
	}
	return 0;
}

// ipv6_ok checks an IPv6 header without extension headers as frame.Parse
// does.
static __always_inline int ipv6_ok(struct pkt *p)
{
	__u8 *b = p->b;
	if (b[L3] >> 4 != 6)
		return PUNT_IP + 1;
	__u32 plen = be16(&b[L3 + 4]);
	if (40 + plen > p->len - L3)
		return PUNT_IP + 1;
	switch (b[L3 + 6]) {
	case 0: case 43: case 44: case 51: case 59: case 60:
		return PUNT_IP + 1; // extension headers: the slow path walks them
	}
	p->l4 = L3 + 40;
	p->iplen = 40 + plen;
	return l4_ok(p, b[L3 + 6], 1);
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

static __always_inline void mac_cpy(__u8 *d, const __u8 *s)
{
#pragma unroll
	for (int i = 0; i < 6; i++)
		d[i] = s[i];
}

// wire is the frame's length on the wire: with the outer tag the kernel
// holds in metadata.
static __always_inline __u32 wire(const struct pkt *p) { return p->len + (p->vlan_present ? 4 : 0); }

// nat_tcp_ok: the flags of a packet of an established connection that
// the slow path would forward without a state change (frame.TCP.ValidFlags
// without SYN, FIN, RST).
static __always_inline int nat_tcp_ok(__u8 flags)
{
	__u8 f = flags & ~(TCP_PSH | TCP_ECE | TCP_CWR);
	return f == TCP_ACK || f == (TCP_ACK | TCP_URG);
}

// classify_nat looks p up as a NAT flow (an untagged IPv4 frame): the
// lookup comes first, so that a frame of no NAT flow goes on to the
// bridge's pairs whatever its TTL or checksum.
static __always_inline int classify_nat(struct pkt *p, struct cls *c)
{
	__u8 *b = p->b;
	if (b[L3] != 0x45)
		return PUNT_MISS + 1; // options or not IPv4: never a NAT flow's
	__u8 proto = b[L3 + 9];
	struct nat_key k = {};
	k.ifindex = p->ifindex;
	__builtin_memcpy(&k.saddr, &b[L3 + 12], 4);
	__builtin_memcpy(&k.daddr, &b[L3 + 16], 4);
	k.proto = proto;
	if (proto == IPPROTO_TCP_ || proto == IPPROTO_UDP_) {
		__builtin_memcpy(&k.sport, &b[34], 2);
		__builtin_memcpy(&k.dport, &b[36], 2);
	} else if (proto == IPPROTO_ICMP_) {
		if (b[34] == 8)
			__builtin_memcpy(&k.sport, &b[38], 2);
		else if (b[34] == 0)
			__builtin_memcpy(&k.dport, &b[38], 2);
		else
			return PUNT_MISS + 1;
	} else {
		return PUNT_MISS + 1;
	}
	struct nat_val *v = bpf_map_lookup_elem(&nat_flows, &k);
	if (!v)
		return PUNT_MISS + 1;
	int r = ipv4_ok(p, 1);
	if (r)
		return r;
	r = l4_ok(p, proto, 0);
	if (r)
		return r;
	if (!mac_eq(b, v->in_dmac) || (v->flags & NAT_CHECK_SMAC && !mac_eq(&b[6], v->in_smac)))
		return PUNT_MAC + 1;
	if (proto == IPPROTO_TCP_ && !nat_tcp_ok(b[34 + 13]))
		return PUNT_TCP + 1;
	if (proto == IPPROTO_ICMP_ && b[34] != v->icmp_type)
		return PUNT_ICMP + 1;
	if (proto == IPPROTO_ICMP_) {
		// An identifier change that makes the checksum zero:
		// frame.SetICMPEchoID then sums the whole message, which is
		// the slow path's job. Decided here, so that the filter never
		// keeps out of the rings a frame nat_rewrite refuses.
		__u16 from = be16(&b[38]);
		__u16 to = bpf_ntohs(b[34] == 8 ? v->sport : v->dport);
		if (from != to && updb2(be16(&b[36]), from, to) == 0)
			return PUNT_CSUM + 1;
	}
	if (p->len > v->max_frame || p->iplen > v->max_ip)
		return PUNT_MTU + 1;
	c->kind = KIND_NAT;
	c->nat = v;
	return 0;
}

// v6_scoped: a link-local (fe80::/10), multicast (ff00::/8) or
// unspecified address, which route6 never forwards.
static __always_inline int v6_scoped(const __u8 *a)
{
	if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80))
		return 1;
	__u8 z = 0;
#pragma unroll
	for (int i = 0; i < 16; i++)
		z |= a[i];
	return z == 0;
}

// classify_r6 looks p up as a routed IPv6 flow (an untagged IPv6 frame to
// a unicast MAC). A frame it cannot key (another next header, ICMPv6
// other than echo, a scoped address) or whose key it does not know goes
// on to the bridge's pairs; c->r6why keeps why, for the punt count when no
// pair takes it either.
static __always_inline int classify_r6(struct pkt *p, struct cls *c)
{
	__u8 *b = p->b;
	if (p->len < L3 + 40 + 8 || b[L3] >> 4 != 6)
		return PUNT_MISS + 1;
	__u8 proto = b[L3 + 6];
	struct r6_key k = {};
	k.ifindex = p->ifindex;
	k.proto = proto;
	if (proto == IPPROTO_TCP_ || proto == IPPROTO_UDP_) {
		__builtin_memcpy(&k.sport, &b[54], 2);
		__builtin_memcpy(&k.dport, &b[56], 2);
	} else if (proto == IPPROTO_ICMPV6_) {
		if (b[54] == 128)
			__builtin_memcpy(&k.sport, &b[58], 2);
		else if (b[54] == 129)
			__builtin_memcpy(&k.dport, &b[58], 2);
		else {
			c->r6why = PUNT_ICMP + 1;
			return PUNT_MISS + 1;
		}
	} else {
		c->r6why = PUNT_EXT + 1;
		return PUNT_MISS + 1;
	}
	if (v6_scoped(&b[L3 + 8]) || v6_scoped(&b[L3 + 24])) {
		c->r6why = PUNT_SCOPE + 1;
		return PUNT_MISS + 1;
	}
	__builtin_memcpy(k.saddr, &b[L3 + 8], 16);
	__builtin_memcpy(k.daddr, &b[L3 + 24], 16);
	struct r6_val *v = bpf_map_lookup_elem(&r6_flows, &k);
	if (!v)
		return PUNT_MISS + 1;
	int r = ipv6_ok(p);
	if (r)
		return r;
	// route6 forwards the IP packet without what follows it: a padded
	// frame is the slow path's, which trims it.
	if (p->len != L3 + p->iplen)
		return PUNT_IP + 1;
	if (!mac_eq(b, v->in_dmac) || (v->flags & NAT_CHECK_SMAC && !mac_eq(&b[6], v->in_smac)))
		return PUNT_MAC + 1;
	if (b[L3 + 7] <= 1)
		return PUNT_TTL + 1;
	if (proto == IPPROTO_TCP_ && !nat_tcp_ok(b[54 + 13]))
		return PUNT_TCP + 1;
	if (proto == IPPROTO_ICMPV6_ && b[54] != v->icmp_type)
		return PUNT_ICMP + 1;
	if (p->len > v->max_frame || p->iplen > v->max_ip)
		return PUNT_MTU + 1;
	c->kind = KIND_R6;
	c->r6 = v;
	return 0;
}

// classify_bridge looks p up as a bridged MAC pair (and microflow).
static __always_inline int classify_bridge(struct pkt *p, struct cls *c)
{
	__u8 *b = p->b;
	struct br_key k = {};
	k.ifindex = p->ifindex;
	if (p->vlan_present) {
		k.vid = p->vlan_tci & 0x0fff;
		if (k.vid == 0x0fff)
			return PUNT_ETHER + 1;
		if (p->vlan_proto == bpf_htons(ETH_P_8021Q))
			k.tagged = BR_TAG_8021Q;
		else if (p->vlan_proto == bpf_htons(ETH_P_8021AD))
			k.tagged = BR_TAG_8021AD;
		else
			return PUNT_ETHER + 1;
	}
	mac_cpy(k.dmac, b);
	mac_cpy(k.smac, &b[6]);
	struct br_val *v = bpf_map_lookup_elem(&br_pairs, &k);
	if (!v)
		return PUNT_MISS + 1;
	__u16 et = be16(&b[12]);
	int r;
	if (et == ETH_P_IP) {
		r = ipv4_ok(p, 0);
		if (!r)
			r = l4_ok(p, b[L3 + 9], 0);
	} else if (et == ETH_P_IPV6) {
		r = ipv6_ok(p);
	} else {
		r = PUNT_ETHER + 1;
	}
	if (r)
		return r;
	if (wire(p) > v->max_wire)
		return PUNT_MTU + 1;
	c->slot2 = 0;
	if (!v->l2only) {
		struct micro_key m = {};
		m.pair = v->slot;
		m.ethertype = et;
		__u8 proto;
		if (et == ETH_P_IP) {
			proto = b[L3 + 9];
			__builtin_memcpy(m.saddr, &b[L3 + 12], 4);
			__builtin_memcpy(m.daddr, &b[L3 + 16], 4);
		} else {
			proto = b[L3 + 6];
			__builtin_memcpy(m.saddr, &b[L3 + 8], 16);
			__builtin_memcpy(m.daddr, &b[L3 + 24], 16);
		}
		if (proto != IPPROTO_TCP_ && proto != IPPROTO_UDP_)
			return PUNT_MISS + 1;
		m.proto = proto;
		__u32 l4 = p->l4;
		if (l4 + 4 > HDR_MAX)
			return PUNT_IP + 1;
		__builtin_memcpy(&m.sport, &b[l4], 2);
		__builtin_memcpy(&m.dport, &b[l4 + 2], 2);
		struct micro_val *mv = bpf_map_lookup_elem(&br_micro, &m);
		if (!mv)
			return PUNT_MISS + 1;
		c->slot2 = mv->slot;
	}
	c->kind = KIND_BRIDGE;
	c->br = v;
	return 0;
}

// classify decides whether the fast path forwards p: 0 when it does (c
// says how), else the punt reason + 1.
static __always_inline int classify(struct pkt *p, struct cls *c)
{
	__u8 *b = p->b;
	c->kind = KIND_SLOW;
	if (p->len < 34)
		return PUNT_ETHER + 1;
	// A group or zero source: the slow path drops it.
	if (b[6] & 1 || !(b[6] | b[7] | b[8] | b[9] | b[10] | b[11]))
		return PUNT_ETHER + 1;
	__u16 et = be16(&b[12]);
	if (et == ETH_P_8021Q || et == ETH_P_8021AD)
		return PUNT_ETHER + 1;
	__u32 zero = 0;
	struct live *l = bpf_map_lookup_elem(&live, &zero);
	if (!p->vlan_present && et == ETH_P_IP && !(b[0] & 1) && (!l || l->nat)) {
		int r = classify_nat(p, c);
		if (r != PUNT_MISS + 1)
			return r;
	}
	c->r6why = 0;
	if (!p->vlan_present && et == ETH_P_IPV6 && !(b[0] & 1) && (!l || l->r6)) {
		int r = classify_r6(p, c);
		if (r != PUNT_MISS + 1)
			return r;
	}
	if (b[0] & 1)
		return c->r6why ? c->r6why : PUNT_MISS + 1;
	int r = classify_bridge(p, c);
	if (r == PUNT_MISS + 1 && c->r6why)
		return c->r6why;
	return r;
}

static __always_inline void count_flow(__u32 slot, __u32 bytes, __u32 l3)
{
	if (slot >= nslots)
		return;
	__u32 i = bpf_get_smp_processor_id() * nslots + slot;
	struct flow_stats *s = bpf_map_lookup_elem(&stats, &i);
	if (!s)
		return;
	s->packets += 1;
	s->bytes += bytes;
	s->l3bytes += l3;
	// The coarse clock (CLOCK_MONOTONIC at the last tick) is enough for
	// idle times and deadlines in seconds, and reads no clock source:
	// bpf_ktime_get_ns was 2 % of the receive CPU's busy time in the
	// bench's NAT row (docs/dataplane.md, Measured).
	s->last = bpf_ktime_get_coarse_ns();
}

// nat_rewrite translates the headers in p->b as package nat's emit does:
// addresses, ports or echo identifier (each with its checksums, in the
// same order), TTL, MACs. It returns the number of bytes to store back, 0
// to punt.
static __always_inline int nat_rewrite(struct pkt *p, struct nat_val *v)
{
	__u8 *b = p->b;
	__u8 proto = b[L3 + 9];
	__u32 l4c; // offset of the L4 checksum
	int hdr;
	if (proto == IPPROTO_TCP_) {
		l4c = 34 + 16;
		hdr = 34 + 20;
	} else if (proto == IPPROTO_UDP_) {
		l4c = 34 + 6;
		hdr = 34 + 8;
	} else {
		l4c = 34 + 2;
		hdr = 34 + 8;
	}
	__u16 ipc = be16(&b[L3 + 10]);
	__u16 l4s = be16(&b[l4c]);
	int pseudo = proto != IPPROTO_ICMP_;
	int udp = proto == IPPROTO_UDP_;
	__u32 old, nw;

	old = be32(&b[L3 + 12]);
	nw = bpf_ntohl(v->saddr);
	if (old != nw) {
		if (pseudo && !(udp && l4s == 0)) {
			l4s = updb4(l4s, old, nw);
			if (udp && l4s == 0)
				l4s = 0xffff;
		}
		ipc = upd32(ipc, old, nw);
		put32(&b[L3 + 12], nw);
	}
	old = be32(&b[L3 + 16]);
	nw = bpf_ntohl(v->daddr);
	if (old != nw) {
		if (pseudo && !(udp && l4s == 0)) {
			l4s = updb4(l4s, old, nw);
			if (udp && l4s == 0)
				l4s = 0xffff;
		}
		ipc = upd32(ipc, old, nw);
		put32(&b[L3 + 16], nw);
	}
	if (proto == IPPROTO_ICMP_) {
		__u16 from = be16(&b[38]);
		__u16 to = bpf_ntohs(b[34] == 8 ? v->sport : v->dport);
		if (from != to) {
			l4s = updb2(l4s, from, to);
			// frame.SetICMPEchoID fixes a zero result by summing
			// the whole message: the slow path's job.
			if (l4s == 0)
				return 0;
			put16(&b[38], to);
		}
	} else {
#pragma unroll
		for (int i = 0; i < 2; i++) {
			__u16 from = be16(&b[34 + 2 * i]);
			__u16 to = bpf_ntohs(i == 0 ? v->sport : v->dport);
			if (from == to)
				continue;
			if (!(udp && l4s == 0)) {
				l4s = updb2(l4s, from, to);
				if (udp && l4s == 0)
					l4s = 0xffff;
			}
			put16(&b[34 + 2 * i], to);
		}
	}
	put16(&b[l4c], l4s);
	// TTL is the high byte of the word it shares with the protocol.
	__u16 word = be16(&b[L3 + 8]);
	ipc = upd16(ipc, word, word - 0x100);
	b[L3 + 8] -= 1;
	put16(&b[L3 + 10], ipc);
	mac_cpy(b, v->dmac);
	mac_cpy(&b[6], v->smac);
	return hdr;
}

// r6_rewrite is route6's forwarding of a frame of an established
// connection: the hop limit decremented (frame.DecTTL), the next hop's
// and the router's MACs. It returns the number of bytes to store back.
static __always_inline int r6_rewrite(struct pkt *p, struct r6_val *v)
{
	__u8 *b = p->b;
	b[L3 + 7] -= 1;
	mac_cpy(b, v->dmac);
	mac_cpy(&b[6], v->smac);
	return L3 + 8;
}

// nat_track records a TCP packet's acknowledgment and window (package
// nat's tcpTrack) for the slow path, which judges RSTs by them.
static __always_inline void nat_track(struct pkt *p, struct nat_val *v)
{
	__u8 *b = p->b;
	if (b[L3 + 9] != IPPROTO_TCP_)
		return;
	// As the router's tcpTrack (ackAhead): the first acknowledgment, or
	// a later one no further ahead than twice the sender's window (at
	// least ACK_ADVANCE). v->ack and v->win start at the router's
	// (PutNAT), so the two track as one.
	__u32 ack = be32(&b[34 + 8]);
	__u32 d = ack - v->ack;
	__u32 bound = (v->win << (v->wscale & 15)) * 2;
	if (bound < ACK_ADVANCE)
		bound = ACK_ADVANCE;
	if (v->ack == 0 || ((__s32)d > 0 && d <= bound))
		v->ack = ack;
	v->win = be16(&b[34 + 14]);
	v->tcp_seen = 1;
}

// load reads the start of an skb into p.
static __always_inline int load_skb(struct __sk_buff *skb, struct pkt *p)
{
	p->len = skb->len;
	p->ifindex = skb->ifindex;
	p->vlan_present = skb->vlan_present;
	p->vlan_tci = skb->vlan_tci;
	p->vlan_proto = skb->vlan_proto;
	__u32 n = p->len;
	if (n > HDR_MAX)
		n = HDR_MAX;
	if (n < 34)
		return -1;
	// n is 34..HDR_MAX; the mask keeps the verifier's bound on it
	// (34..97, inside p->b) whatever registers clang picks, as in fp_xdp.
	__u32 extra = n - 34;
	asm volatile("%0 &= 0x3f" : "+r"(extra));
	if (bpf_skb_load_bytes(skb, 0, p->b, 34 + extra) < 0)
		return -1;
	return 0;
}

SEC("socket")
int fp_filter(struct __sk_buff *skb)
{
	struct pkt p = {};
	struct cls c = {};
	__u32 zero = 0;
	struct handshake *h = bpf_map_lookup_elem(&hs, &zero);
	if (!h)
		return skb->len; // cannot tell fp_tcx: the ring takes it
	__u32 fast = 0;
	if (load_skb(skb, &p) == 0) {
		int r = classify(&p, &c);
		if (r == 0)
			fast = 1;
		else
			count_punt(r - 1); // fp_tcx follows this decision without classifying again
	}
	if (fast) {
		// fp_tcx acts on this copy: the flow as it was when the frame
		// was kept out of the rings (a flow changed or removed in
		// between is a change after this frame, as in the slow path).
		h->kind = c.kind;
		h->iplen = p.iplen;
		h->slot2 = 0;
		if (c.kind == KIND_NAT) {
			__builtin_memcpy(&h->v.nat, c.nat, sizeof(struct nat_val));
			nat_track(&p, c.nat);
		} else if (c.kind == KIND_R6) {
			__builtin_memcpy(&h->v.r6, c.r6, sizeof(struct r6_val));
		} else {
			__builtin_memcpy(&h->v.br, c.br, sizeof(struct br_val));
			h->slot2 = c.slot2;
		}
	}
	h->seq += 1;
	h->fast = fast;
	skb->cb[0] = h->seq;
	skb->cb[1] = h->seq ^ HS_MAGIC;
	return fast ? 0 : skb->len;
}

// filter_said is the socket filter's decision for this skb: 1 fast (*hp
// then holds its classification), 0 slow, -1 when no filter ran on it.
static __always_inline int filter_said(struct __sk_buff *skb, struct handshake **hp)
{
	__u32 zero = 0;
	struct handshake *h = bpf_map_lookup_elem(&hs, &zero);
	if (!h || skb->cb[0] != h->seq || skb->cb[1] != (h->seq ^ HS_MAGIC))
		return -1;
	*hp = h;
	return h->fast;
}

// bridge_egress applies the pair's VLAN egress to the skb.
static __always_inline int bridge_egress(struct __sk_buff *skb, struct pkt *p, struct br_val *v)
{
	if (v->egress == BR_EGRESS_UNTAG) {
		if (p->vlan_present && bpf_skb_vlan_pop(skb) < 0)
			return -1;
	} else if (v->egress == BR_EGRESS_TAG) {
		__u16 tci = (p->vlan_present ? (p->vlan_tci & 0xf000) : 0) | v->vid;
		if (!(p->vlan_present && p->vlan_proto == bpf_htons(ETH_P_8021Q) && p->vlan_tci == tci)) {
			if (p->vlan_present && bpf_skb_vlan_pop(skb) < 0)
				return -1;
			if (bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), tci) < 0)
				return -1;
		}
	}
	return 0;
}

SEC("tc")
int fp_tcx(struct __sk_buff *skb)
{
	struct handshake *h = 0;
	int said = filter_said(skb, &h);
	if (said == 0)
		return TCX_NEXT; // the ring has it
	struct pkt p = {};
	struct cls c = {};
	if (load_skb(skb, &p) < 0) {
		if (said == 1) {
			count_punt(PUNT_REINJECT);
			return bpf_redirect(skb->ifindex, BPF_F_INGRESS_);
		}
		return TCX_NEXT;
	}
	int tracked = 0;
	if (said == 1 && h) {
		// Kept out of the rings: the filter classified it (and
		// tracked its TCP acknowledgment) moments ago.
		c.kind = h->kind;
		c.nat = &h->v.nat;
		c.r6 = &h->v.r6;
		c.br = &h->v.br;
		c.slot2 = h->slot2;
		p.iplen = h->iplen;
		tracked = 1;
	} else {
		int r = classify(&p, &c);
		if (r) {
			count_punt(r - 1);
			return TCX_NEXT;
		}
	}
	__u32 w = wire(&p);
	if (c.kind == KIND_NAT) {
		struct nat_val *v = c.nat;
		int n = nat_rewrite(&p, v);
		if (n == 0 || n > HDR_MAX) {
			if (said == 1)
				return bpf_redirect(skb->ifindex, BPF_F_INGRESS_);
			count_punt(PUNT_CSUM);
			return TCX_NEXT;
		}
		if (bpf_skb_store_bytes(skb, 0, p.b, n, 0) < 0) {
			count_punt(PUNT_ERR);
			return 2; // TC_ACT_SHOT
		}
		if (!tracked)
			nat_track(&p, v);
		count_flow(v->slot, w, p.iplen);
		return bpf_redirect(v->out_ifindex, 0);
	}
	if (c.kind == KIND_R6) {
		struct r6_val *v = c.r6;
		int n = r6_rewrite(&p, v);
		if (bpf_skb_store_bytes(skb, 0, p.b, n, 0) < 0) {
			count_punt(PUNT_ERR);
			return 2; // TC_ACT_SHOT
		}
		count_flow(v->slot, w, p.iplen);
		return bpf_redirect(v->out_ifindex, 0);
	}
	struct br_val *v = c.br;
	if (bridge_egress(skb, &p, v) < 0) {
		count_punt(PUNT_ERR);
		return 2;
	}
	count_flow(v->slot, w, p.iplen);
	if (c.slot2)
		count_flow(c.slot2, w, p.iplen);
	return bpf_redirect(v->out_ifindex, 0);
}

SEC("xdp")
int fp_xdp(struct xdp_md *ctx)
{
	struct pkt p = {};
	struct cls c = {};
	p.len = ctx->data_end - ctx->data;
	p.ifindex = ctx->ingress_ifindex;
	__u32 n = p.len;
	if (n > HDR_MAX)
		n = HDR_MAX;
	if (n < 34)
		return XDP_PASS_;
	// n is 34..HDR_MAX; the mask keeps the verifier's bound on it
	// (34..97, inside p.b) whatever registers clang picks.
	__u32 extra = n - 34;
	asm volatile("%0 &= 0x3f" : "+r"(extra));
	if (bpf_xdp_load_bytes(ctx, 0, p.b, 34 + extra) < 0)
		return XDP_PASS_;
	int r = classify(&p, &c);
	if (r) {
		count_punt(r - 1);
		return XDP_PASS_;
	}
	if (c.kind == KIND_NAT) {
		struct nat_val *v = c.nat;
		int m = nat_rewrite(&p, v);
		if (m == 0 || m > HDR_MAX) {
			count_punt(PUNT_CSUM);
			return XDP_PASS_;
		}
		if (bpf_xdp_store_bytes(ctx, 0, p.b, m) < 0) {
			count_punt(PUNT_ERR);
			return XDP_PASS_;
		}
		nat_track(&p, v);
		count_flow(v->slot, p.len, p.iplen);
		return bpf_redirect(v->out_ifindex, 0);
	}
	if (c.kind == KIND_R6) {
		struct r6_val *v = c.r6;
		int m = r6_rewrite(&p, v);
		if (bpf_xdp_store_bytes(ctx, 0, p.b, m) < 0) {
			count_punt(PUNT_ERR);
			return XDP_PASS_;
		}
		count_flow(v->slot, p.len, p.iplen);
		return bpf_redirect(v->out_ifindex, 0);
	}
	struct br_val *v = c.br;
	if (v->egress != BR_EGRESS_ASIS) {
		count_punt(PUNT_VLAN);
		return XDP_PASS_;
	}
	count_flow(v->slot, p.len, p.iplen);
	if (c.slot2)
		count_flow(c.slot2, p.len, p.iplen);
	return bpf_redirect(v->out_ifindex, 0);
}

char __license[] SEC("license") = "GPL";
