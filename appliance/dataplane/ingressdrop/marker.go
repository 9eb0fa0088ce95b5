package ingressdrop

// The marker tag AttachDemote's program puts in front of every frame it
// hands to the ring bound to MarkerTPID: an 802.1Q tag of VLAN 4095, which
// IEEE 802.1Q reserves (a frame's own tag of VLAN 4095 follows it).
const (
	MarkerTPID = 0x8100
	MarkerTCI  = 0x0fff
	// MarkerLen is the marker's length in the frame.
	MarkerLen = 4
)

// Unmark strips the marker tag from a frame read from a ring behind
// AttachDemote's program: it returns the frame as it came in (its own
// tags in place, in b's memory, which it moves) and true, or b and false
// when b carries no marker.
func Unmark(b []byte) ([]byte, bool) {
	if len(b) < 12+MarkerLen+2 || b[12] != MarkerTPID>>8 || b[13] != MarkerTPID&0xff ||
		b[14]&0x0f != MarkerTCI>>8 || b[15] != MarkerTCI&0xff {
		return b, false
	}
	copy(b[MarkerLen:MarkerLen+12], b[:12])
	return b[MarkerLen:], true
}

// The WAN clients' replies over a VLAN. For a WAN on VLAN v (Attach and
// AttachDemote with v), both programs take the 802.1Q tag off a client's
// reply of VLAN v (bpf_skb_vlan_pop), set skb->mark to ReplyMark(v) and
// demote it, so that the clients' sockets, bound to IPv4 and IPv6, get
// it untagged; their filters pass only frames with that mark (package
// dhcpclient), so an untagged reply, which the demote hands to the IPv4
// and IPv6 rings as it is, or one of another VLAN, never reaches them.
// No other code on a data port sets a mark.
const (
	// ReplyMarkBase is the mark of a WAN client's reply of a VLAN, ORed
	// with the VLAN's ID.
	ReplyMarkBase = 0xe1b0_0000
	// ReplyMarkMask selects the base of a mark.
	ReplyMarkMask = 0xffff_f000
)

// ReplyMark is the mark of a WAN client's reply of VLAN vid (1..4094).
func ReplyMark(vid uint16) uint32 { return ReplyMarkBase | uint32(vid&0x0fff) }
