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
