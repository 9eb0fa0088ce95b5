// SPDX-License-Identifier: GPL-2.0
//
// NAT (IPv4) flows: the classifier's lookup and checks, the header
// rewrite (package nat's emit) and the TCP acknowledgment tracking.

#pragma once

#include <bpf/bpf_endian.h>
#include "abi.h"
#include "csum.h"
#include "parse.h"
#include "routed.h"
#include "ppp.h"

// nat_echo_id is the identifier a NAT flow gives the echo in b.
static __always_inline __u16 nat_echo_id(const __u8 *b, const struct nat_val *v)
{
	return bpf_ntohs(b[34] == ICMP_ECHO_ ? v->sport : v->dport);
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
	if (key_ports(b, 34, proto, IPPROTO_ICMP_, ICMP_ECHO_, ICMP_ECHOREPLY_, &k.sport, &k.dport))
		return PUNT_MISS + 1;
	struct nat_val *v = bpf_map_lookup_elem(&nat_flows, &k);
	if (!v)
		return PUNT_MISS + 1;
	int r = ipv4_ok(p, 1);
	if (r)
		return r;
	r = l4_ok(p, proto, 0);
	if (r)
		return r;
	if (!fwd_vlan_ok(p, &v->fwd))
		return PUNT_VLAN + 1;
	if (!fwd_ppp_ok(p, &v->fwd))
		return PUNT_PPPOE + 1;
	if (!fwd_mac_ok(b, &v->fwd))
		return PUNT_MAC + 1;
	r = fwd_l4_ok(b, 34, proto, IPPROTO_ICMP_, &v->fwd);
	if (r)
		return r;
	if (proto == IPPROTO_ICMP_) {
		// An identifier change that makes the checksum zero:
		// frame.SetICMPEchoID then sums the whole message, which is
		// the slow path's job. Decided here, so that the filter never
		// keeps out of the rings a frame nat_rewrite refuses.
		__u16 from = be16(&b[38]);
		__u16 to = nat_echo_id(b, v);
		if (from != to && updb2(be16(&b[36]), from, to) == 0)
			return PUNT_CSUM + 1;
	}
	if (!fwd_mtu_ok(p, &v->fwd))
		return PUNT_MTU + 1;
	c->kind = KIND_NAT;
	c->nat = v;
	return 0;
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
#pragma unroll
	for (int i = 0; i < 2; i++) {
		__u32 old = be32(&b[L3 + 12 + 4 * i]);
		__u32 nw = bpf_ntohl(i == 0 ? v->saddr : v->daddr);
		if (old == nw)
			continue;
		if (pseudo)
			l4s = l4_upd4(l4s, old, nw, udp);
		ipc = upd32(ipc, old, nw);
		put32(&b[L3 + 12 + 4 * i], nw);
	}
	if (proto == IPPROTO_ICMP_) {
		__u16 from = be16(&b[38]);
		__u16 to = nat_echo_id(b, v);
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
			l4s = l4_upd2(l4s, from, to, udp);
			put16(&b[34 + 2 * i], to);
		}
	}
	put16(&b[l4c], l4s);
	// TTL is the high byte of the word it shares with the protocol.
	__u16 word = be16(&b[L3 + 8]);
	ipc = upd16(ipc, word, word - 0x100);
	b[L3 + 8] -= 1;
	put16(&b[L3 + 10], ipc);
	fwd_macs(b, &v->fwd);
	return hdr;
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
