// SPDX-License-Identifier: GPL-2.0
//
// Parsing: the start of a frame read into the stack (struct pkt), the
// classifier's verdict (struct cls), byte access and the header checks
// that accept exactly what package frame parses.

#pragma once

#include "abi.h"
#include "csum.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86dd
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88a8
#define ETH_P_PPP_SES 0x8864
#define PPP_IP 0x0021
#define PPP_IPV6 0x0057
#define PPPOE_HLEN 8 // the PPPoE session header and the PPP protocol

#define IPPROTO_ICMP_ 1
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define IPPROTO_ICMPV6_ 58

// The echo types of ICMP and ICMPv6.
#define ICMP_ECHO_ 8
#define ICMP_ECHOREPLY_ 0
#define ICMPV6_ECHO_REQUEST_ 128
#define ICMPV6_ECHO_REPLY_ 129

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
	__u8 ppp;      // a PPPoE session frame of IPv4 or IPv6: b and len are the frame without its 8 bytes (load_ppp)
	__u16 ppp_sid; // its session
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
static __always_inline __u32 wire(const struct pkt *p)
{
	return p->len + (p->vlan_present ? 4 : 0) + (p->ppp ? PPPOE_HLEN : 0);
}

// load_len is how much of a frame of len bytes, at least 34, the
// classifier reads: up to HDR_MAX.
static __always_inline __u32 load_len(__u32 len)
{
	__u32 n = len > HDR_MAX ? HDR_MAX : len;
	// n is 34..HDR_MAX; the mask keeps the verifier's bound on it
	// (34..97, inside p->b) whatever registers clang picks.
	__u32 extra = n - 34;
	asm volatile("%0 &= 0x3f" : "+r"(extra));
	return 34 + extra;
}

// load_ppp reads a PPPoE session frame of IPv4 or IPv6 (RFC 2516:
// version and type 0x11, code 0, a length that ends the frame, PPP
// protocol 0x0021 or 0x0057) into p as the untagged IP frame the slow
// path makes of it (pppoeIn): the MACs, EtherType IPv4 or IPv6, then the
// IP packet, read from after the PPPoE header; p->ppp and p->ppp_sid say
// what it was. Any other PPPoE frame stays as it is (no flow matches its
// EtherType). A frame padded beyond its PPPoE length stays too: the slow
// path cuts the padding.
static __always_inline int load_ppp(struct __sk_buff *skb, struct pkt *p)
{
	__u8 *b = p->b;
	__u16 proto = be16(&b[20]);
	if (b[14] != 0x11 || b[15] != 0 || (proto != PPP_IP && proto != PPP_IPV6) || p->len != 20 + (__u32)be16(&b[18]))
		return 0;
	__u32 len = p->len - PPPOE_HLEN;
	if (len < 34)
		return 0;
	p->ppp_sid = be16(&b[16]);
	// load_len(len) - 12 bytes from the PPP protocol on: 22..85, which
	// fit in b after the MACs and end inside the frame.
	if (bpf_skb_load_bytes(skb, 20, &b[12], load_len(len) - 12) < 0)
		return -1;
	put16(&b[12], proto == PPP_IP ? ETH_P_IP : ETH_P_IPV6);
	p->len = len;
	p->ppp = 1;
	return 0;
}

// load_skb reads the start of an skb into p.
static __always_inline int load_skb(struct __sk_buff *skb, struct pkt *p)
{
	p->len = skb->len;
	p->ifindex = skb->ifindex;
	p->vlan_present = skb->vlan_present;
	p->vlan_tci = skb->vlan_tci;
	p->vlan_proto = skb->vlan_proto;
	if (p->len < 34 || bpf_skb_load_bytes(skb, 0, p->b, load_len(p->len)) < 0)
		return -1;
	if (be16(&p->b[12]) == ETH_P_PPP_SES)
		return load_ppp(skb, p);
	return 0;
}

// load_xdp reads the start of an XDP frame into p (generic XDP cannot
// see a tag the NIC stripped: p has none).
static __always_inline int load_xdp(struct xdp_md *ctx, struct pkt *p)
{
	p->len = ctx->data_end - ctx->data;
	p->ifindex = ctx->ingress_ifindex;
	if (p->len < 34 || bpf_xdp_load_bytes(ctx, 0, p->b, load_len(p->len)) < 0)
		return -1;
	return 0;
}
