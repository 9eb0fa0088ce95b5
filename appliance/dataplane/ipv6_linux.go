package dataplane

import (
	"net/netip"
	"time"

	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/dataplane/routing"
)

// IPv6 is the NAT router's IPv6 router (NAT.IPv6), nil without one.
func (e *Engine) IPv6() *route6.Router { return e.natp.v6 }

// IPv6Stats is the IPv6 router's state: its prefixes, next hop, tables
// and counters (frames by action, drops and the errors it answered by
// reason, see package route6).
type IPv6Stats struct {
	LAN       []netip.Prefix `json:"lan"`
	Delegated []netip.Prefix `json:"delegated"`
	Gateway   string         `json:"gateway,omitempty"`
	// LANAddrs and WANAddrs are the box's addresses in use on each side
	// (the link-local one first; tentative and duplicate WAN addresses
	// are not).
	LANAddrs   []netip.Addr      `json:"lanAddrs"`
	WANAddrs   []netip.Addr      `json:"wanAddrs"`
	Conns      int               `json:"conns"`
	Neighbours int               `json:"neighbours"`
	Actions    map[string]uint64 `json:"actions"`
	Drops      map[string]uint64 `json:"drops"`
	Errors     uint64            `json:"icmpErrors"` // ICMPv6 errors the box sent
	NS         uint64            `json:"ns"`         // neighbour solicitations sent
	NA         uint64            `json:"na"`         // neighbour advertisements sent
	RS         uint64            `json:"rs"`         // router solicitations sent on the WAN
	// DADFailures counts the WAN addresses found to be duplicates.
	DADFailures uint64 `json:"dadFailures"`
}

func (e *Engine) ipv6Stats(now time.Time) *IPv6Stats {
	v6 := e.IPv6()
	if v6 == nil {
		return nil
	}
	c, st := v6.Config(), v6.Stats()
	s := &IPv6Stats{LAN: c.LANPrefixes, Delegated: c.Delegated, LANAddrs: v6.Addrs(route6.LAN), WANAddrs: v6.Addrs(route6.WAN),
		Conns: v6.ConnCount(now.UnixNano()), Neighbours: len(v6.Neighbours(now.UnixNano())), Actions: map[string]uint64{},
		Drops: map[string]uint64{}, Errors: st.Errors, NS: st.NS, NA: st.NA, RS: st.RS, DADFailures: st.DADFailures}
	if gw, ok := v6.Gateway(now.UnixNano()); ok {
		s.Gateway = gw.String()
	}
	for a, n := range st.Actions {
		if n != 0 {
			s.Actions[routing.Action(a).String()] = n
		}
	}
	for r, n := range st.Drops {
		if n != 0 {
			s.Drops[route6.Reason(r).String()] = n
		}
	}
	return s
}
