// SPDX-License-Identifier: GPL-2.0
//
// Routed IPv6 flows (route6's established connections): the classifier's
// lookup and checks, and the rewrite (MACs and hop limit).

#pragma once

#include "abi.h"
#include "parse.h"
#include "routed.h"
#include "ppp.h"

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
// a unicast MAC, or one of a PPPoE WAN's session: load_ppp). A frame it cannot key (another next header, ICMPv6
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
	int r = key_ports(b, 54, proto, IPPROTO_ICMPV6_, ICMPV6_ECHO_REQUEST_, ICMPV6_ECHO_REPLY_, &k.sport, &k.dport);
	if (r) {
		c->r6why = r;
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
	r = ipv6_ok(p);
	if (r)
		return r;
	// route6 forwards the IP packet without what follows it: a padded
	// frame is the slow path's, which trims it.
	if (p->len != L3 + p->iplen)
		return PUNT_IP + 1;
	if (!fwd_vlan_ok(p, &v->fwd))
		return PUNT_VLAN + 1;
	if (!fwd_ppp_ok(p, &v->fwd))
		return PUNT_PPPOE + 1;
	if (!fwd_mac_ok(b, &v->fwd))
		return PUNT_MAC + 1;
	if (b[L3 + 7] <= 1)
		return PUNT_TTL + 1;
	r = fwd_l4_ok(b, 54, proto, IPPROTO_ICMPV6_, &v->fwd);
	if (r)
		return r;
	if (!fwd_mtu_ok(p, &v->fwd))
		return PUNT_MTU + 1;
	c->kind = KIND_R6;
	c->r6 = v;
	return 0;
}

// r6_rewrite is route6's forwarding of a frame of an established
// connection: the hop limit decremented (frame.DecTTL), the next hop's
// and the router's MACs. It returns the number of bytes to store back.
static __always_inline int r6_rewrite(struct pkt *p, struct r6_val *v)
{
	__u8 *b = p->b;
	b[L3 + 7] -= 1;
	fwd_macs(b, &v->fwd);
	return L3 + 8;
}
