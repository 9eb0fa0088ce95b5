package route6

import (
	"strconv"
	"sync/atomic"

	"e1kbox/appliance/dataplane/routing"
)

// Result is what Process decided for one frame: what the engine does with
// it (routing.Action) and, for a drop or an error answered, why.
type Result = routing.Result[Reason]

// Reason says why a frame was dropped; it indexes Stats.Drops.
type Reason uint8

// Drop reasons.
const (
	ReasonNone          Reason = iota
	ReasonOff                  // no configuration (IPv6 not set up)
	ReasonMalformed            // inconsistent lengths, a truncated transport header
	ReasonUnknownPort          // neither the LAN nor the WAN port
	ReasonVLAN                 // VLAN-tagged
	ReasonNotForUs             // another MAC, or an address the box does not serve
	ReasonMartian              // impossible source for the side (spoofed, multicast, loopback)
	ReasonLinkLocal            // link-local source or destination: never forwarded
	ReasonExtHeader            // Hop-by-Hop or Routing header (the extension header policy)
	ReasonFragment             // a fragment: not forwarded (the fragment policy)
	ReasonNoRoute              // no route: LAN to LAN, delegated but not on the LAN, no gateway (unreachable sent)
	ReasonHopLimit             // hop limit exhausted (time exceeded sent)
	ReasonTooBig               // larger than the egress MTU (packet too big sent)
	ReasonICMPPolicy           // an ICMPv6 type that is not forwarded (RFC 4890: NDP, MLD, unknown)
	ReasonICMPUnrelated        // an ICMPv6 error about no known connection
	ReasonFirewall             // a new connection from the WAN without an allow rule
	ReasonRule                 // the forward chain dropped a new connection
	ReasonInvalid              // TCP that is not a SYN and of no known connection
	ReasonTableFull            // connection table bucket full of live connections
	ReasonQueueFull            // the neighbour queue is full
	ReasonNeighFailed          // the next hop did not answer neighbour solicitations
	ReasonNDP                  // an invalid neighbour discovery message (RFC 4861 7.1)
	ReasonScanSource           // a new connection from the WAN to an unknown LAN address over its source's rate (ScanLimits)
	ReasonScanTotal            // the same over all sources' rate
	ReasonNeighLimit           // no neighbour entry may be made: the unknown addresses' cap or NS rate, or a bucket of entries in use
	NumReasons
)

var reasonNames = [NumReasons]string{
	"none", "off", "malformed", "unknown_port", "vlan", "not_for_us", "martian", "link_local", "ext_header",
	"fragment", "no_route", "hop_limit", "too_big", "icmp_policy", "icmp_unrelated", "firewall", "rule_drop",
	"invalid", "table_full", "queue_full", "neigh_failed", "ndp_invalid", "scan_source",
	"scan_total", "neigh_limit",
}

// String returns a snake_case name usable as a metrics label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

func drop(r Reason) Result { return Result{Action: routing.Drop, Reason: r} }

// Stats counts a worker's (or, summed, the router's) frames.
type Stats struct {
	Actions [routing.NumActions]uint64
	Drops   [NumReasons]uint64
	Errors  uint64 // ICMPv6 errors the box sent
	NS, NA  uint64 // neighbour solicitations sent (DAD probes included), advertisements sent
	RS      uint64 // router solicitations sent on the WAN
	// DADFailures counts the WAN addresses DAD found to be duplicates.
	DADFailures uint64
}

// counters are a worker's Stats, written by it alone.
type counters struct {
	actions [routing.NumActions]atomic.Uint64
	drops   [NumReasons]atomic.Uint64
	errors  atomic.Uint64
	ns, na  atomic.Uint64
	rs      atomic.Uint64
}

func (c *counters) count(res *Result) {
	c.actions[res.Action].Add(1)
	if res.Reason != ReasonNone { // drops, and the errors answered
		c.drops[res.Reason].Add(1)
	}
}

func (c *counters) add(s *Stats) {
	routing.AddCounts(s.Actions[:], c.actions[:])
	routing.AddCounts(s.Drops[:], c.drops[:])
	s.Errors += c.errors.Load()
	s.NS += c.ns.Load()
	s.NA += c.na.Load()
	s.RS += c.rs.Load()
}
