package offload

import (
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
)

// The NAT flows: one direction of a NAT connection each
// (nat.Router.Offloadable), which the kernel translates as the router
// does. Everything here runs under the manager's lock.

// natFlow is one direction of a NAT connection in the kernel.
type natFlow struct {
	route
	// id and dir first: with the route, what a harvest's turn reads.
	id         nat.ConnID
	dir        int
	tuple, rev nat.Tuple
	key        fastpath.NATKey
	nh         [4]byte
	flow       fastpath.NATFlow
}

func (m *Manager) installNAT(o *offer) bool {
	r := m.o.NAT
	if r == nil {
		return false
	}
	t := o.pre.tuple
	if current(&m.nat, t, o, m.evictNAT) {
		return true
	}
	clk := m.clock()
	off, ok := r.Offloadable(t, clk.wall)
	if !ok {
		return false
	}
	rt, mtu, ok := m.routeOf(o, off.Out == nat.LAN, off.NextHopMAC, off.Timeout, tupleHash(&off.Reverse), clk)
	if !ok {
		return false
	}
	f := &natFlow{route: rt, tuple: t, rev: off.Reverse, id: off.ID, dir: off.Dir, nh: off.NextHop}
	f.key = fastpath.NATKey{Ifindex: m.ifindex[rt.in], Src: t.Src, Dst: t.Dst, SrcPort: t.SrcPort, DstPort: t.DstPort, Proto: t.Proto}
	f.flow = fastpath.NATFlow{DstMAC: off.NextHopMAC, SrcMAC: off.OutMAC, InDstMAC: off.InMAC, InSrcMAC: rt.srcMAC,
		CheckSrcMAC: rt.fromLAN, Src: off.Src, Dst: off.Dst, SrcPort: off.SrcPort, DstPort: off.DstPort,
		OutIfindex: m.ifindex[rt.out], Slot: rt.slot, MaxFrame: mtu + frame.EthernetHeaderLen,
		MaxIP: off.OutMTU, ICMPType: o.pre.icmp, Ack: off.Ack, Win: off.Win, WinScale: off.WinScale, InVID: rt.inVID, OutTCI: rt.outTCI,
		PPPoEIn: rt.pppIn, PPPoEOut: rt.pppOut, PPPoESession: rt.ppp}
	if err := m.prog.PutNAT(f.key, f.flow); err != nil {
		m.fail(err)
		m.slots.unused(rt.slot)
		return false
	}
	routed(m, &m.nat, t, f.rev, f, false)
	return true
}

// applyNAT carries a NAT flow's new counts into conntrack and the FDB.
// It reports whether the flow may stay.
func (m *Manager) applyNAT(f *natFlow, d fastpath.Stats, clk clock, set Settings) bool {
	alive := m.o.NAT.Offloaded(f.id, f.dir, nat.OffloadUse{Packets: d.Packets, Bytes: d.L3Bytes, Last: clk.unix(d.Last)})
	m.learn(&f.route, d.Last, clk, set)
	return alive
}

// natValid reports whether a NAT flow still forwards as the slow path
// would: its ports up, its next hop fresh (the slow path would probe it),
// a LAN next hop still on its port, and a packet within its idle time.
func (m *Manager) natValid(f *natFlow, clk clock) bool {
	if !m.portsUp(f.in, f.out) {
		return false
	}
	// One check per next hop and harvest (most flows share the gateway).
	h := hop[[4]byte]{toLAN: f.toLAN, ip: f.nh, mac: f.nhMAC}
	fresh, ok := m.hops4[h]
	if !ok {
		fresh = m.o.NAT.NeighbourFresh(natSide(f.toLAN), f.nh, f.nhMAC, clk.wall, true)
		m.hops4[h] = fresh
	}
	return fresh && m.stays(&f.route, clk)
}

func natSide(lan bool) nat.Side {
	if lan {
		return nat.LAN
	}
	return nat.WAN
}

// evictNAT takes a NAT flow out of the kernel: its TCP tracking goes into
// conntrack now, its last counts at the next harvest.
func (m *Manager) evictNAT(f *natFlow) {
	if f.tuple.Proto == frame.ProtoTCP {
		if tr, ok, err := m.prog.NATTrack(f.key); err == nil && ok && tr.Seen {
			m.o.NAT.Offloaded(f.id, f.dir, nat.OffloadUse{TCP: true, Ack: tr.Ack, Win: tr.Win})
		}
	}
	unrouted(m, &m.nat, f.tuple, f.rev, f, m.prog.DeleteNAT(f.key))
}

// revalidateNAT takes out the NAT flows an applied configuration
// changed: connections whose translation, next hop or MTU differ, or
// that are gone.
func (m *Manager) revalidateNAT(clk clock) {
	r := m.o.NAT
	if r == nil {
		return
	}
	for _, f := range m.nat.flows {
		o, ok := r.Offloadable(f.tuple, clk.wall)
		k := &f.flow
		if !ok || o.ID != f.id || o.Src != k.Src || o.Dst != k.Dst || o.SrcPort != k.SrcPort || o.DstPort != k.DstPort ||
			o.NextHopMAC != k.DstMAC || o.OutMAC != k.SrcMAC || o.InMAC != k.InDstMAC || o.OutMTU != k.MaxIP {
			m.evictNAT(f)
		}
	}
}
