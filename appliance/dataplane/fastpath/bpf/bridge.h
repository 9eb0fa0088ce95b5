// SPDX-License-Identifier: GPL-2.0
//
// Bridged MAC pairs and their microflows: the classifier's lookup and
// the VLAN egress.

#pragma once

#include <bpf/bpf_endian.h>
#include "abi.h"
#include "parse.h"

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
