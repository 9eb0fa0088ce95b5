// SPDX-License-Identifier: GPL-2.0
//
// What the routed flows, NAT (IPv4) and IPv6, share: the checks an
// established connection's frames pass.

#pragma once

#include "parse.h"

// nat_tcp_ok: the flags of a packet of an established connection that
// the slow path would forward without a state change (frame.TCP.ValidFlags
// without SYN, FIN, RST).
static __always_inline int nat_tcp_ok(__u8 flags)
{
	__u8 f = flags & ~(TCP_PSH | TCP_ECE | TCP_CWR);
	return f == TCP_ACK || f == (TCP_ACK | TCP_URG);
}
