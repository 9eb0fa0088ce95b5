// SPDX-License-Identifier: GPL-2.0
//
// e1kbox fast path: forwards the frames of established flows that the
// userspace dataplane installed in the flow maps (NAT connections, routed
// IPv6 connections and bridged unicast MAC pairs), in the kernel, and
// leaves every other frame to the AF_PACKET rings. Three programs share
// one classifier:
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
// to the slow path. The checksum arithmetic mirrors package frame's
// incremental updates step by step, so both paths write the same bytes.
//
// This file is the one compilation unit: the programs and the classifier
// that tries the flow kinds in turn. The headers it includes hold the
// parts, each inlined (static __always_inline) into the programs:
//
//   abi.h       the maps and their types, shared with Go
//   parse.h     the frame on the stack, byte access, header checks
//   csum.h      the checksum arithmetic of package frame
//   counters.h  the punt and per-flow counters
//   routed.h    what NAT and routed IPv6 flows share
//   nat.h       NAT flows: classify, rewrite, TCP tracking
//   ppp.h       routed flows over a PPPoE WAN: the session, its header
//   ipv6.h      routed IPv6 flows: classify, rewrite
//   bridge.h    bridged MAC pairs and microflows, VLAN egress
//
// Go generates fastpath_bpfel.{go,o} from it (go generate, see gen.go);
// the objects are committed.

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "abi.h"
#include "counters.h"
#include "parse.h"
#include "nat.h"
#include "ipv6.h"
#include "bridge.h"

#define TCX_NEXT -1
#define TC_ACT_REDIRECT 7
#define XDP_PASS_ 2
#define XDP_REDIRECT_ 4
#define BPF_F_INGRESS_ 1

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
	// Routed flows: untagged, or a tagged WAN's (fwd_vlan_ok).
	int routable = !p->vlan_present || p->vlan_proto == bpf_htons(ETH_P_8021Q);
	// A PPPoE WAN's IP (load_ppp) is only a routed flow's.
	if (p->ppp && (!routable || b[0] & 1))
		return PUNT_MISS + 1;
	if (routable && et == ETH_P_IP && !(b[0] & 1) && (!l || l->nat)) {
		int r = classify_nat(p, c);
		if (r != PUNT_MISS + 1 || p->ppp)
			return r;
	}
	c->r6why = 0;
	if (routable && et == ETH_P_IPV6 && !(b[0] & 1) && (!l || l->r6)) {
		int r = classify_r6(p, c);
		if (r != PUNT_MISS + 1)
			return r;
	}
	if (p->ppp)
		return c->r6why ? c->r6why : PUNT_MISS + 1;
	if (b[0] & 1)
		return c->r6why ? c->r6why : PUNT_MISS + 1;
	int r = classify_bridge(p, c);
	if (r == PUNT_MISS + 1 && c->r6why)
		return c->r6why;
	return r;
}

// routed_rewrite rewrites the headers of a routed flow's frame (c->kind
// KIND_NAT or KIND_R6) and points *f at the flow's forwarding. It returns
// the number of bytes to store back, 0 to punt.
static __always_inline int routed_rewrite(struct pkt *p, struct cls *c, struct fwd **f)
{
	if (c->kind == KIND_NAT) {
		*f = &c->nat->fwd;
		return nat_rewrite(p, c->nat);
	}
	*f = &c->r6->fwd;
	return r6_rewrite(p, c->r6);
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
	if (c.kind == KIND_BRIDGE) {
		struct br_val *v = c.br;
		if (bridge_egress(skb, &p, v) < 0) {
			count_punt(PUNT_ERR);
			return 2; // TC_ACT_SHOT
		}
		count_flow(v->slot, w, p.iplen);
		if (c.slot2)
			count_flow(c.slot2, w, p.iplen);
		return bpf_redirect(v->out_ifindex, 0);
	}
	// A routed flow, NAT or IPv6.
	struct fwd *f;
	int n = routed_rewrite(&p, &c, &f);
	if (n == 0 || n > HDR_MAX) {
		if (said == 1)
			return bpf_redirect(skb->ifindex, BPF_F_INGRESS_);
		count_punt(PUNT_CSUM);
		return TCX_NEXT;
	}
	// The WAN link's PPPoE session header and tag (the tag in the
	// skb's metadata): off the frames from the WAN, onto those to it.
	if (p.ppp && ppp_pop(skb, &p) < 0) {
		count_punt(PUNT_ERR);
		return 2; // TC_ACT_SHOT
	}
	int err;
	if (f->flags & FWD_PPP_OUT)
		err = ppp_push(skb, &p, f, n);
	else
		err = bpf_skb_store_bytes(skb, 0, p.b, n, 0);
	if (err < 0) {
		count_punt(PUNT_ERR);
		return 2; // TC_ACT_SHOT
	}
	if ((p.vlan_present && !p.ppp && bpf_skb_vlan_pop(skb) < 0) ||
	    (f->out_tci && bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), f->out_tci) < 0)) {
		count_punt(PUNT_ERR);
		return 2; // TC_ACT_SHOT
	}
	if (c.kind == KIND_NAT && !tracked)
		nat_track(&p, c.nat);
	count_flow(f->slot, w, p.iplen);
	return bpf_redirect(f->out_ifindex, 0);
}

SEC("xdp")
int fp_xdp(struct xdp_md *ctx)
{
	struct pkt p = {};
	struct cls c = {};
	if (load_xdp(ctx, &p) < 0)
		return XDP_PASS_;
	int r = classify(&p, &c);
	if (r) {
		count_punt(r - 1);
		return XDP_PASS_;
	}
	if (c.kind == KIND_BRIDGE) {
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
	// A routed flow, NAT or IPv6.
	struct fwd *f;
	int n = routed_rewrite(&p, &c, &f);
	if (n == 0 || n > HDR_MAX) {
		count_punt(PUNT_CSUM);
		return XDP_PASS_;
	}
	if (f->out_tci) { // a tag XDP cannot push
		count_punt(PUNT_VLAN);
		return XDP_PASS_;
	}
	if (f->flags & FWD_PPP_OUT) { // a PPPoE header this program does not push
		count_punt(PUNT_PPPOE);
		return XDP_PASS_;
	}
	if (bpf_xdp_store_bytes(ctx, 0, p.b, n) < 0) {
		count_punt(PUNT_ERR);
		return XDP_PASS_;
	}
	if (c.kind == KIND_NAT)
		nat_track(&p, c.nat);
	count_flow(f->slot, p.len, p.iplen);
	return bpf_redirect(f->out_ifindex, 0);
}

char __license[] SEC("license") = "GPL";
