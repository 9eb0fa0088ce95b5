package offload

import (
	"fmt"

	"e1kbox/appliance/dataplane/fastpath"
)

// NAT flows over a PPPoE WAN: the program frames them in the session the
// manager told it of (fastpath.Program.SetPPPoE) and forwards the flows
// of that session only, so that a new session, or none, takes the old
// session's flows off the fast path with the map write, before the
// manager evicts them. Routed IPv6 flows stay on the rings on a PPPoE
// WAN (the program frames IPv4 only).

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
// PPPoE WAN. ok is false for a flow the fast path cannot take there: an
// IPv6 one, or any while no session is up.
func (m *Manager) pppRoute(set Settings, v6 bool) (sid uint16, ok bool) {
	on, sid, _ := set.WANPPPoE()
	if !on {
		return 0, true
	}
	m.syncPPPoE(set)
	if v6 || sid == 0 || m.ppp.sid != sid || m.prog.Mode() == fastpath.ModeXDP {
		return 0, false
	}
	return sid, true
}
