// SPDX-License-Identifier: GPL-2.0
//
// What the routed flows, NAT (IPv4) and IPv6, share: how a frame's L4
// header keys its flow, the checks an established connection's frames
// pass (struct fwd's), and the Ethernet rewrite.

#pragma once

#include "abi.h"
#include "parse.h"

// key_ports reads a routed flow's ports from the L4 header at l4: TCP's
// and UDP's, or an echo's identifier, as sport for a request (type req of
// ICMP protocol icmp) and as dport for a reply (type rep). It returns 0,
// PUNT_ICMP + 1 for an ICMP message other than an echo, or PUNT_EXT + 1
// for another protocol: no flow of either has such a key.
static __always_inline int key_ports(const __u8 *b, __u32 l4, __u8 proto, __u8 icmp, __u8 req, __u8 rep,
				     __be16 *sport, __be16 *dport)
{
	__be16 s = 0, d = 0;
	if (proto == IPPROTO_TCP_ || proto == IPPROTO_UDP_) {
		__builtin_memcpy(&s, &b[l4], 2);
		__builtin_memcpy(&d, &b[l4 + 2], 2);
	} else if (proto == icmp) {
		if (b[l4] == req)
			__builtin_memcpy(&s, &b[l4 + 4], 2);
		else if (b[l4] == rep)
			__builtin_memcpy(&d, &b[l4 + 4], 2);
		else
			return PUNT_ICMP + 1;
	} else {
		return PUNT_EXT + 1;
	}
	*sport = s;
	*dport = d;
	return 0;
}

// fwd_mac_ok: the frame is to the router's MAC on the flow's ingress side
// and, when the flow checks it, from the flow's source.
static __always_inline int fwd_mac_ok(const __u8 *b, const struct fwd *f)
{
	return mac_eq(b, f->in_dmac) && !(f->flags & NAT_CHECK_SMAC && !mac_eq(&b[6], f->in_smac));
}

// tcp_established_ok: the flags of a packet of an established connection
// that the slow path would forward without a state change
// (frame.TCP.ValidFlags without SYN, FIN, RST).
static __always_inline int tcp_established_ok(__u8 flags)
{
	__u8 f = flags & ~(TCP_PSH | TCP_ECE | TCP_CWR);
	return f == TCP_ACK || f == (TCP_ACK | TCP_URG);
}

// fwd_l4_ok checks the L4 header at l4 as an established connection's
// (TCP) or an echo of the flow's type (ICMP protocol icmp): 0, else the
// punt reason + 1.
static __always_inline int fwd_l4_ok(const __u8 *b, __u32 l4, __u8 proto, __u8 icmp, const struct fwd *f)
{
	if (proto == IPPROTO_TCP_ && !tcp_established_ok(b[l4 + 13]))
		return PUNT_TCP + 1;
	if (proto == icmp && b[l4] != f->icmp_type)
		return PUNT_ICMP + 1;
	return 0;
}

// fwd_vlan_ok: the frame arrives as the flow's frames do: untagged, or
// with the kernel-stripped 802.1Q tag of its VLAN (a tagged WAN).
static __always_inline int fwd_vlan_ok(const struct pkt *p, const struct fwd *f)
{
	if (!p->vlan_present)
		return f->in_vid == 0;
	return f->in_vid != 0 && p->vlan_proto == bpf_htons(ETH_P_8021Q) && (p->vlan_tci & 0x0fff) == f->in_vid;
}

// fwd_mtu_ok: the frame fits both ports' MTUs.
static __always_inline int fwd_mtu_ok(const struct pkt *p, const struct fwd *f)
{
	return p->len <= f->max_frame && p->iplen <= f->max_ip;
}

// fwd_macs gives the frame the next hop's and the router's MACs.
static __always_inline void fwd_macs(__u8 *b, const struct fwd *f)
{
	mac_cpy(b, f->dmac);
	mac_cpy(&b[6], f->smac);
}
