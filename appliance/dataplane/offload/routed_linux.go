package offload

import (
	"time"

	"e1kbox/appliance/dataplane/frame"
)

// The routed flows, one direction of a NAT connection (natFlow) or of a
// routed IPv6 connection (v6Flow) each, share their route: the ports,
// the LAN station behind the source, the next hop, the idle clock and
// the marks of their connection. What the two routers decide (whether a
// connection may be offloaded, its translation, whether a next hop is
// fresh) stays with each kind.

// route is what a NAT flow and a routed IPv6 flow have alike.
type route struct {
	in, out uint16
	fromLAN bool   // its packets come from the LAN: the source is a LAN station (FDB learning)
	toLAN   bool   // they leave to the LAN: the next hop is a LAN station, on port out
	vid     uint16 // the FDB VLAN of a LAN source
	// inVID and outTCI are the WAN link's VLAN, when the flow comes from
	// a tagged WAN, and its data frames' tag, when it goes to one.
	inVID, outTCI uint16
	// pppIn and pppOut: the flow comes from, or goes to, a PPPoE WAN in
	// session ppp.
	pppIn, pppOut bool
	ppp           uint16
	srcMAC        [6]byte // the source station's
	nhMAC         [6]byte // the next hop's, the flow's destination MAC
	slot          uint32
	idle          int64 // ns without a packet before it leaves the kernel
	active        int64 // engine clock of its install or last packet
	// mark and revMark are the mark indexes of its connection by this
	// direction's key and by the other's.
	mark, revMark uint32
}

// table holds the routed flows of one kind by their key as their packets
// arrive (flows) and by the other direction's key (rev).
type table[K comparable, F any] struct {
	flows map[K]*F
	rev   map[K]*F
}

func newTable[K comparable, F any]() table[K, F] {
	return table[K, F]{flows: map[K]*F{}, rev: map[K]*F{}}
}

func (t *table[K, F]) put(k, rev K, f *F) {
	t.flows[k] = f
	t.rev[rev] = f
}

func (t *table[K, F]) remove(k, rev K, f *F) {
	delete(t.flows, k)
	if t.rev[rev] == f {
		delete(t.rev, rev)
	}
}

// evictBoth takes the flows of the connection whose packets arrive with
// key k out of table t by evict: this direction's and the other one's.
func evictBoth[K comparable, F any, P routedPtr[F]](t *table[K, F], k K, evict func(P)) {
	this, other := t.flows[k], t.rev[k]
	if this != nil {
		evict(this)
	}
	if other != nil {
		evict(other)
	}
}

// hop is a routed flow's next hop (A: its IPv4 or IPv6 address), by
// which a harvest judges it once for all its flows.
type hop[A comparable] struct {
	toLAN bool
	ip    A
	mac   [6]byte
}

// routedPtr is a routed flow record, *natFlow or *v6Flow, as the generic
// helpers (current, routed, unrouted) take it: with its route.
type routedPtr[F any] interface {
	*F
	base() *route
}

func (r *route) base() *route { return r }

// current reports whether the routed flow o offers is in table t under
// key k already (offered again while the first offer was pending). A flow
// under k that differs (its host moved or changed its MAC) leaves the
// kernel by evict.
func current[K comparable, F any, P routedPtr[F]](t *table[K, F], k K, o *offer, evict func(P)) bool {
	f, ok := t.flows[k]
	if !ok {
		return false
	}
	if r := P(f).base(); r.in == o.path.In && r.out == o.path.Out && r.srcMAC == o.pre.srcMAC && r.nhMAC == o.nhMAC {
		return true
	}
	evict(f)
	return false
}

// uses reports whether the flow goes from or to port id.
// tagDelta is the bytes a frame gains on egress: the WAN link's tag and
// PPPoE header it gets, less those it came with.
func (r *route) tagDelta() int32 {
	var d int32
	if r.outTCI != 0 {
		d += frame.VLANTagLen
	}
	if r.inVID != 0 {
		d -= frame.VLANTagLen
	}
	if r.pppOut {
		d += pppoeHeaderLen
	}
	if r.pppIn {
		d -= pppoeHeaderLen
	}
	return d
}

func (r *route) uses(id uint16) bool { return r.in == id || r.out == id }

// routeOf checks what a NAT and an IPv6 offer need alike once their
// router said it may be offloaded, to a next hop with MAC nhMAC on the
// LAN (toLAN) or the WAN, with a connection timeout of timeout seconds:
// the next hop the worker sent the frame to, both ports forwarding with
// the program on them, the WAN port exactly when the router sends to the
// WAN, and a LAN next hop on the port the FDB names. It returns the route
// with a stats slot and the marks of its connection (revHash: the other
// direction's flow hash), and the MTU both ports take.
func (m *Manager) routeOf(o *offer, toLAN bool, nhMAC [6]byte, timeout uint32, revHash uint64, clk clock) (route, int, bool) {
	if nhMAC != o.nhMAC {
		return route{}, 0, false
	}
	inMTU, ok1 := m.port(o.path.In)
	outMTU, ok2 := m.port(o.path.Out)
	if !ok1 || !ok2 || !toLAN != (o.path.Out == m.o.WAN) {
		return route{}, 0, false
	}
	if toLAN {
		if p, ok := m.o.FDB.Lookup(&nhMAC, 0, clk.eng); !ok || p != o.path.Out {
			return route{}, 0, false
		}
	}
	set := m.o.View.Settings()
	ppp, pppOK := m.pppRoute(set, o.pre.v6)
	if !pppOK {
		return route{}, 0, false
	}
	s, ok := m.alloc()
	if !ok {
		return route{}, 0, false
	}
	var inVID, outTCI uint16
	if vid, tci := set.WANLink(); vid != 0 {
		if toLAN {
			inVID = vid
		} else {
			outTCI = tci
		}
	}
	pppOn := ppp != 0
	return route{in: o.path.In, out: o.path.Out, fromLAN: o.pre.fromLAN(), toLAN: toLAN, vid: o.path.VID, inVID: inVID, outTCI: outTCI,
		pppIn: pppOn && toLAN, pppOut: pppOn && !toLAN, ppp: ppp,
		srcMAC: o.pre.srcMAC, nhMAC: nhMAC, slot: s, active: clk.eng, mark: markOf(o.pre.hash()), revMark: markOf(revHash),
		idle: min(int64(timeout)*int64(time.Second)/2, int64(Idle))}, min(inMTU, outMTU), true
}

// routed enters routed flow f, which the program's map has now, in
// table t under keys k and rev (the other direction's): it gets its stats
// slot (from routeOf) and marks its connection.
func routed[K comparable, F any, P routedPtr[F]](m *Manager, t *table[K, F], k, rev K, f P, v6 bool) {
	t.put(k, rev, f)
	r := f.base()
	m.slots.own(r.slot, slot{rec: f, in: r.in, out: r.out, delta: r.tagDelta(), ports: true, routed: true, v6: v6, turns: turnsFor(r.idle)})
	m.mark[r.mark].Add(1)
	m.mark[r.revMark].Add(1)
	m.c.installed.Add(1)
}

// unrouted ends the time in the kernel of routed flow f, under keys k
// and rev in table t, once the program's map lost it (deleted: the error
// of that, if any): its connection's marks go, its last counts are read
// at the next harvest.
func unrouted[K comparable, F any, P routedPtr[F]](m *Manager, t *table[K, F], k, rev K, f P, deleted error) {
	if deleted != nil {
		m.fail(deleted)
	}
	t.remove(k, rev, f)
	r := f.base()
	m.mark[r.mark].Add(-1)
	m.mark[r.revMark].Add(-1)
	m.die(r.slot, f)
}

// learn carries a routed flow's new packets into its idle clock and the
// FDB (a LAN source: FDB aging sees an active station).
func (m *Manager) learn(r *route, last int64, clk clock, set Settings) {
	if r.fromLAN && set.Learns(r.in) {
		m.o.FDB.Learn(&r.srcMAC, r.vid, r.in, clk.engine(last))
	}
	r.active = clk.engine(last)
}

// portsUp reports whether both of a flow's ports still forward with the
// program on them.
func (m *Manager) portsUp(in, out uint16) bool {
	if _, ok := m.port(in); !ok {
		return false
	}
	_, ok := m.port(out)
	return ok
}

// stays reports what a routed flow needs to stay besides its ports and
// its next hop's freshness: a LAN next hop still on its port, and a
// packet within its idle time.
func (m *Manager) stays(r *route, clk clock) bool {
	if r.toLAN {
		if p, ok := m.o.FDB.Lookup(&r.nhMAC, 0, clk.eng); !ok || p != r.out {
			return false
		}
	}
	return clk.eng-r.active < r.idle
}

// evictRoutes takes out the routed flows, NAT and IPv6, for which gone
// is true.
func (m *Manager) evictRoutes(gone func(r *route) bool) {
	for _, f := range m.nat.flows {
		if gone(&f.route) {
			m.evictNAT(f)
		}
	}
	for _, f := range m.v6.flows {
		if gone(&f.route) {
			m.evictV6(f)
		}
	}
}

// port returns data port id's MTU if it forwards now and the program
// runs on it.
func (m *Manager) port(id uint16) (int, bool) {
	if id == 0 || int(id) >= len(m.ifindex) || m.ifindex[id] == 0 {
		return 0, false
	}
	return m.o.View.Forwards(id)
}
