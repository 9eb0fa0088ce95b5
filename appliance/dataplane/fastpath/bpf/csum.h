// SPDX-License-Identifier: GPL-2.0
//
// The Internet checksum's arithmetic, as package frame does it step by
// step (fold64, Update16, Update32, UpdateBytes), so that the fast path
// and the slow path write the same bytes.

#pragma once

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

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

// l4_upd4 and l4_upd2 are updb4 and updb2 of an L4 checksum: a UDP
// checksum of zero (the sender computed none) stays zero, and an update
// never makes one zero (0xffff stands for it).
static __always_inline __u16 l4_upd4(__u16 csum, __u32 from, __u32 to, int udp)
{
	if (udp && csum == 0)
		return 0;
	csum = updb4(csum, from, to);
	return udp && csum == 0 ? 0xffff : csum;
}

static __always_inline __u16 l4_upd2(__u16 csum, __u16 from, __u16 to, int udp)
{
	if (udp && csum == 0)
		return 0;
	csum = updb2(csum, from, to);
	return udp && csum == 0 ? 0xffff : csum;
}
