package offload

import (
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/route6"
)

// The routed IPv6 flows: one direction of a route6 connection each
// (route6.Router.Offloadable), whose frames the kernel gives the next
// hop's and the router's MACs and one hop less, as route6 does.
// Everything here runs under the manager's lock.

// v6Flow is one direction of a route6 connection in the kernel.
type v6Flow struct {
	route
	key   fastpath.IPv6Key
	flow6 route6.Flow // as its packets arrive
	rev   route6.Flow // the other direction's
	nh    [16]byte
	flow  fastpath.IPv6Flow
}

func (m *Manager) installV6(o *offer) bool {
	v6 := m.o.IPv6
	if v6 == nil {
		return false
	}
	fl := o.pre.flow6
	if current(&m.v6, fl, o, m.evictV6) {
		return true
	}
	clk := m.clock()
	off, ok := v6.Offloadable(fl, clk.wall)
	if !ok {
		return false
	}
	rev := fl.Reverse()
	rt, mtu, ok := m.routeOf(o, off.Out == route6.LAN, off.NextHopMAC, off.Timeout, flow6Hash(&rev), clk)
	if !ok {
		return false
	}
	f := &v6Flow{route: rt, flow6: fl, rev: rev, nh: off.NextHop}
	f.key = fastpath.IPv6Key{Ifindex: m.ifindex[rt.in], Src: fl.Src, Dst: fl.Dst, SrcPort: fl.SrcPort, DstPort: fl.DstPort, Proto: fl.Proto}
	f.flow = fastpath.IPv6Flow{DstMAC: off.NextHopMAC, SrcMAC: off.OutMAC, InDstMAC: off.InMAC, InSrcMAC: rt.srcMAC,
		CheckSrcMAC: rt.fromLAN, OutIfindex: m.ifindex[rt.out], Slot: rt.slot,
		MaxFrame: mtu + frame.EthernetHeaderLen, MaxIP: off.OutMTU, ICMPType: o.pre.icmp, InVID: rt.inVID, OutTCI: rt.outTCI,
		PPPoEIn: rt.pppIn, PPPoEOut: rt.pppOut, PPPoESession: rt.ppp}
	if err := m.prog.PutIPv6(f.key, f.flow); err != nil {
		m.fail(err)
		m.slots.unused(rt.slot)
		return false
	}
	routed(m, &m.v6, fl, rev, f, true)
	return true
}

// applyV6 carries a routed IPv6 flow's new counts into route6 and the
// FDB. It reports whether the flow may stay.
func (m *Manager) applyV6(f *v6Flow, d fastpath.Stats, clk clock, set Settings) bool {
	alive := m.o.IPv6.Offloaded(f.flow6, route6.OffloadUse{Packets: d.Packets, Last: clk.unix(d.Last)})
	m.learn(&f.route, d.Last, clk, set)
	return alive
}

// v6Valid reports whether a routed IPv6 flow still forwards as route6
// would: its ports up, its next hop still the gateway on the WAN and
// fresh (route6 would solicit it otherwise), a LAN next hop on its port,
// and a packet within its idle time.
func (m *Manager) v6Valid(f *v6Flow, clk clock) bool {
	if !m.portsUp(f.in, f.out) {
		return false
	}
	v6 := m.o.IPv6
	if !f.toLAN {
		if !m.gw6ok {
			m.gw6, m.gw6ok = [16]byte{}, true
			if gw, ok := v6.Gateway(clk.wall); ok {
				m.gw6 = gw.As16()
			}
		}
		if m.gw6 != f.nh {
			return false
		}
	}
	h := hop[[16]byte]{toLAN: f.toLAN, ip: f.nh, mac: f.nhMAC}
	fresh, ok := m.hops6[h]
	if !ok {
		fresh = v6.NeighbourFresh(v6Side(f.toLAN), f.nh, f.nhMAC, clk.wall)
		m.hops6[h] = fresh
	}
	return fresh && m.stays(&f.route, clk)
}

func v6Side(lan bool) route6.Side {
	if lan {
		return route6.LAN
	}
	return route6.WAN
}

// evictV6 takes a routed IPv6 flow out of the kernel; its last counts
// are read at the next harvest.
func (m *Manager) evictV6(f *v6Flow) {
	unrouted(m, &m.v6, f.flow6, f.rev, f, m.prog.DeleteIPv6(f.key))
}

// revalidateV6 takes out the routed IPv6 flows route6 no longer forwards
// as they were installed: renumbered prefixes, another gateway or MTU, a
// connection gone.
func (m *Manager) revalidateV6(clk clock) {
	v6 := m.o.IPv6
	if v6 == nil {
		return
	}
	for _, f := range m.v6.flows {
		o, ok := v6.Offloadable(f.flow6, clk.wall)
		k := &f.flow
		if !ok || (o.Out == route6.LAN) != f.toLAN || o.NextHop != f.nh || o.NextHopMAC != k.DstMAC || o.OutMAC != k.SrcMAC ||
			o.InMAC != k.InDstMAC || o.OutMTU != k.MaxIP {
			m.evictV6(f)
		}
	}
}

// v6Changed follows a change of route6's configuration (route6.OnChange:
// SetPrefixes when the delegation changes): the flows it no longer routes
// as they were leave the kernel before SetPrefixes returns.
func (m *Manager) v6Changed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.On() && !m.closed {
		m.revalidateV6(m.clock())
	}
}
