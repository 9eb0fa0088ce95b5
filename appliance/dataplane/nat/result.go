package nat

import (
	"strconv"

	"e1kbox/appliance/dataplane/routing"
)

// Result is what Process decided for one frame: what the engine does with
// it (routing.Action) and, for a drop, why.
type Result = routing.Result[Reason]

// Reason says why a frame was dropped; it indexes Stats.Drops.
type Reason uint8

// Drop reasons.
const (
	ReasonNone        Reason = iota
	ReasonMalformed          // frame.Parse failed (Stats.Malformed breaks it down) or an inconsistent header
	ReasonBadChecksum        // IPv4 header (or a verified ICMP) checksum is wrong
	ReasonUnknownPort        // the frame came from a port that is neither LAN nor WAN
	ReasonVLAN               // VLAN-tagged frame: NAT ports are untagged
	ReasonNotForUs           // unicast to another MAC, or to an IP the router does not serve
	ReasonEtherType          // neither IPv4 nor ARP
	ReasonIPv6               // IPv6 is dropped in NAT mode (package policy)
	ReasonMartian            // impossible source address for the side it came from
	ReasonNoRoute            // no route: LAN to LAN, WAN unconfigured, no gateway
	ReasonTTL                // TTL expired (time exceeded sent unless rate-limited)
	ReasonTooBig             // larger than the egress MTU (fragmentation needed sent when DF)
	ReasonRule               // the forward or input chain dropped it
	ReasonReject             // the forward chain rejected it (RST/unreachable sent)
	ReasonInvalid            // conntrack: not a valid packet of a known or new connection
	ReasonTableFull          // conntrack full and nothing evictable
	ReasonNoPorts            // no free NAT port in the range
	ReasonFragment           // later fragment without a first fragment, or overlapping
	ReasonQueueFull          // ARP pending queue or outbox full
	ReasonNeighFailed        // ARP resolution of the next hop failed
	ReasonARP                // ARP that is ignored (not for us, wrong subnet, conflict)
	ReasonRST                // a TCP RST outside the receiver's window (RFC 5961): spoofed or stale
	ReasonSourceLimit        // a new connection over its source's cap of unassured ones, or the inbound cap with nothing to replace
	ReasonARPConflict        // an ARP that claims a known neighbour's address for another MAC while the neighbour still answers
	ReasonNeighLimit         // no ARP entry may be made for the next hop: the incomplete entries' cap, or a bucket of neighbours in use
	NumReasons
)

var reasonNames = [NumReasons]string{
	"none", "malformed", "bad_checksum", "unknown_port", "vlan", "not_for_us", "ether_type", "ipv6",
	"martian", "no_route", "ttl_exceeded", "too_big", "rule_drop", "rule_reject", "invalid",
	"table_full", "no_ports", "fragment", "queue_full", "neigh_failed", "arp_ignored", "rst_out_of_window",
	"source_limit", "arp_conflict", "neigh_limit",
}

// String returns a snake_case name usable as a metrics label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

func drop(r Reason) Result { return Result{Action: routing.Drop, Reason: r} }
