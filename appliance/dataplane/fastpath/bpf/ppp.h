// SPDX-License-Identifier: GPL-2.0
//
// Routed flows (NAT and IPv6) over a PPPoE WAN (RFC 2516): the session
// check and, in tcx,
// taking the 8-byte session header off the frames from the WAN and
// putting it on the frames to it, as the slow path's pppoeIn and
// pppoeEmit do (appliance/dataplane/wanlink_pppoe.go).

#pragma once

#include <bpf/bpf_endian.h>
#include "abi.h"
#include "parse.h"

#define BPF_ADJ_ROOM_MAC_ 1

// fwd_ppp_ok: the frame p arrives as the flow's frames do, in the WAN
// link's PPPoE session from the AC or outside any session, and a flow of
// a session is one of the session now (the wan_ppp map), to its AC.
static __always_inline int fwd_ppp_ok(const struct pkt *p, const struct fwd *f)
{
	if (!(f->flags & (FWD_PPP_IN | FWD_PPP_OUT)))
		return !p->ppp;
	if (!p->ppp != !(f->flags & FWD_PPP_IN))
		return 0;
	__u32 zero = 0;
	struct ppp_session *w = bpf_map_lookup_elem(&wan_ppp, &zero);
	if (!w || w->sid == 0 || w->sid != f->ppp_sid)
		return 0;
	if (p->ppp)
		return p->ppp_sid == w->sid && mac_eq(&p->b[6], w->ac);
	return mac_eq(f->dmac, w->ac);
}

// ppp_pop takes the PPPoE session header (and the WAN link's tag, which
// the kernel holds in metadata) off the skb of frame p: the frame becomes
// the MACs, EtherType IPv4 or IPv6 (p->b's, from load_ppp) and the IP
// packet. bpf_skb_adjust_room, which cuts bytes after the MAC header,
// takes only IPv4 and IPv6 skbs, and the skb is a PPPoE one; the VLAN
// helpers make it IP: a tag pushed twice puts the first into the frame
// (the skb's protocol becomes 802.1Q), its inner EtherType is set to the
// IP version's, and popping it makes the skb IPv4 or IPv6 with the
// session header after the MAC header.
static __always_inline int ppp_pop(struct __sk_buff *skb, const struct pkt *p)
{
	if (p->vlan_present && bpf_skb_vlan_pop(skb) < 0)
		return -1;
	if (bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), 0) < 0 ||
	    bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), 0) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, 16, &p->b[12], 2, 0) < 0)
		return -1;
	if (bpf_skb_vlan_pop(skb) < 0 || bpf_skb_vlan_pop(skb) < 0)
		return -1;
	return bpf_skb_adjust_room(skb, -PPPOE_HLEN, BPF_ADJ_ROOM_MAC_, 0) < 0 ? -1 : 0;
}

// ppp_push puts the session header of flow f in front of the IP packet
// of the skb, whose first n bytes are p->b (rewritten): MACs, EtherType
// PPPoE session, version and type 0x11, code 0, the session, the length
// (the IP packet, as the slow path counts it, and the PPP protocol), PPP
// protocol IPv4 or IPv6 (as p->b's EtherType), then the rest of p->b.
static __always_inline int ppp_push(struct __sk_buff *skb, const struct pkt *p, const struct fwd *f, int n)
{
	if (bpf_skb_change_head(skb, PPPOE_HLEN, 0) < 0)
		return -1;
	__u8 h[22];
	mac_cpy(h, p->b);
	mac_cpy(&h[6], &p->b[6]);
	put16(&h[12], ETH_P_PPP_SES);
	h[14] = 0x11;
	h[15] = 0;
	put16(&h[16], f->ppp_sid);
	put16(&h[18], p->len - L3 + 2);
	put16(&h[20], be16(&p->b[12]) == ETH_P_IPV6 ? PPP_IPV6 : PPP_IP);
	if (bpf_skb_store_bytes(skb, 0, h, sizeof(h), 0) < 0)
		return -1;
	__u32 rest = n - L3;
	if (rest > HDR_MAX - L3)
		return -1;
	return bpf_skb_store_bytes(skb, L3 + PPPOE_HLEN, &p->b[L3], rest, 0) < 0 ? -1 : 0;
}
