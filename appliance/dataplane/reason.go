package dataplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
)

// Drop says why the dataplane dropped a frame. The parser's reasons
// (frame.Reason) come first with the same values; the dataplane's own
// follow.
type Drop uint8

// The dataplane's drop reasons after the parser's.
const (
	DropOversize   Drop = Drop(frame.NumReasons) + iota // longer than the ingress or egress port's MTU allows
	DropBadSource                                       // multicast or zero source MAC
	DropLinkLocal                                       // 01:80:c2:00:00:0x (STP, LACP, 802.1X, ...): never forwarded
	DropLocal                                           // destination learned on the ingress port (filtered)
	DropPortDown                                        // destination port's link is down
	DropRule                                            // a rule (or policy) said drop
	DropReject                                          // a rule said reject (the answer is counted in RejectsSent)
	DropTxFull                                          // the out port's TX ring stayed full
	DropVLAN                                            // a VLAN the ingress (or unicast egress) VLAN-aware port does not carry
	DropLoop                                            // a loop probe of this engine came back, or the port is blocked by a loop
	DropWANLink                                         // NAT mode, a tagged WAN: a frame on the WAN port untagged or of another VLAN
	DropPPPoE                                           // a PPPoE WAN: a frame that is neither PPPoE discovery nor of the session
	DropPPPoEDown                                       // a PPPoE WAN: a frame to the WAN with no session up, or not IP (ARP)
	DropPPPoEQueue                                      // a PPPoE WAN: the client's control frame queue was full
	// DropNATHost (NAT mode): a frame for the router's own address that
	// the router does not serve (it answers ARP and ping only; the box's
	// services are on the host port's address), or for the box from the
	// WAN, where it has no services.
	DropNATHost
	// DropNAT is the first of the router's reasons: DropNAT+Drop(r) for
	// nat.Reason r (see NATDrop).
	DropNAT
)

// NumDrops is the number of reasons.
const NumDrops = DropNAT + Drop(nat.NumReasons)

// NATDrop returns the drop reason of the router's reason r.
func NATDrop(r nat.Reason) Drop { return DropNAT + Drop(r) }

var dropNames = [NumDrops]string{
	DropOversize:   "oversize",
	DropBadSource:  "bad_source",
	DropLinkLocal:  "link_local",
	DropLocal:      "local",
	DropPortDown:   "port_down",
	DropRule:       "rule_drop",
	DropReject:     "rule_reject",
	DropTxFull:     "tx_full",
	DropVLAN:       "vlan",
	DropLoop:       "loop",
	DropWANLink:    "wan_link",
	DropPPPoE:      "wan_pppoe",
	DropPPPoEDown:  "pppoe_down",
	DropPPPoEQueue: "pppoe_queue",
	DropNATHost:    "nat_host",
}

// String returns a snake_case name usable as a metrics label.
func (d Drop) String() string {
	switch {
	case d < Drop(frame.NumReasons):
		return frame.Reason(d).String()
	case d >= DropNAT && d < NumDrops:
		return "nat_" + nat.Reason(d-DropNAT).String()
	case d < NumDrops:
		return dropNames[d]
	}
	return "drop(" + strconv.Itoa(int(d)) + ")"
}

// Drops counts dropped frames by reason. In JSON it is an object from
// reason name to count, without reasons that never happened (and without
// "none").
type Drops [NumDrops]uint64

// Total is the sum over all reasons.
func (d *Drops) Total() uint64 {
	var n uint64
	for _, v := range d {
		n += v
	}
	return n
}

// MarshalJSON implements json.Marshaler.
func (d Drops) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for r, v := range d {
		if v == 0 || r == 0 {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%d", Drop(r).String(), v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Drops) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*d = Drops{}
	for name, v := range m {
		found := false
		for r := Drop(1); r < NumDrops; r++ {
			if r.String() == name {
				d[r] = v
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("unknown drop reason %q", name)
		}
	}
	return nil
}
