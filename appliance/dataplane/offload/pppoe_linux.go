package offload

import (
	"fmt"

	"e1kbox/appliance/dataplane/fastpath"
)

// Routed flows over a PPPoE WAN, NAT and IPv6: the program frames them
// in the session the manager told it of (fastpath.Program.SetPPPoE) and
// forwards the flows of that session only, so that a new session, or
// none, takes the old session's flows off the fast path with the map
// write, before the manager evicts them. A routed IPv6 flow takes the
// fast path there only while route6 treats the WAN as the point-to-point
// link it is (route6.Config.WANPointToPoint: the AC's MAC the next hop's).

// pppoeHeaderLen is the PPPoE session header and the PPP protocol.
const pppoeHeaderLen = 8

// pppSession is the PPPoE session the program was told of.
type pppSession struct {
	set bool // told at all
	sid uint16
	ac  [6]byte
}

// syncPPPoE tells the program the WAN link's PPPoE session in set (none
// when the WAN is no PPPoE link) if it changed, and evicts the NAT flows
// of another session (all of them for a new AC). It runs under the
// manager's lock.
func (m *Manager) syncPPPoE(set Settings) {
	on, sid, ac := set.WANPPPoE()
	if !on {
		sid, ac = 0, [6]byte{}
	}
	next := pppSession{set: true, sid: sid, ac: ac}
	if next == m.ppp {
		return
	}
	newAC := m.ppp.set && m.ppp.ac != ac // the flows name their session, not its AC
	if err := m.prog.SetPPPoE(sid, ac); err != nil {
		m.fail(fmt.Errorf("offload: %w", err))
		// The program still forwards the session it knows: no
		// flow over PPPoE may stay, and none is installed (m.ppp
		// stays, pppRoute refuses).
		sid = 0
	} else {
		m.ppp = next
	}
	m.evictRoutes(func(r *route) bool { return (r.pppIn || r.pppOut) && (r.ppp != sid || newAC) })
}

// pppRoute is the PPPoE session a routed flow takes under set: 0 off a
// PPPoE WAN. ok is false for a flow the fast path cannot take there: any
// while no session is up or in XDP mode, an IPv6 one while route6 does
// not route the WAN point-to-point.
func (m *Manager) pppRoute(set Settings, v6 bool) (sid uint16, ok bool) {
	on, sid, _ := set.WANPPPoE()
	if !on {
		return 0, true
	}
	m.syncPPPoE(set)
	if (v6 && !m.v6PointToPoint()) || sid == 0 || m.ppp.sid != sid || m.prog.Mode() == fastpath.ModeXDP {
		return 0, false
	}
	return sid, true
}

// v6PointToPoint reports whether route6 routes the WAN as a
// point-to-point link (a PPPoE session's, with the AC's MAC).
func (m *Manager) v6PointToPoint() bool {
	if m.o.IPv6 == nil {
		return false
	}
	c := m.o.IPv6.Config()
	return c.WANPointToPoint && c.WANPeerMAC != [6]byte{}
}
