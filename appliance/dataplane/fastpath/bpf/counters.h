// SPDX-License-Identifier: GPL-2.0
//
// Counters: why frames went to the slow path (the punts map) and each
// flow's packets, bytes and last packet (the stats array).

#pragma once

#include "abi.h"

static __always_inline void count_punt(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&punts, &why);
	if (n)
		*n += 1;
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
