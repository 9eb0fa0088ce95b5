package dataplane

import (
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/offload"
)

// The fast path (package fastpath) forwards established flows in the
// kernel; its flow manager (package offload) installs the flows the
// workers offer, carries what the kernel forwarded back into the tables
// and evicts the flows the slow path must see again. This file wires it
// to the engine: the manager sees the engine's ports and settings
// through fpView, each worker offers through its own offload.Worker, and
// the engine tells it what changed (links, ports, the FDB, rules,
// configuration). docs/dataplane.md describes it.

// openFastPath loads and attaches the fast path for cfg (after the ports
// and tables, before the workers, whose RX rings get its socket filter).
// Failing that, it records why and the engine runs without it.
func (e *Engine) openFastPath(cfg *Config) {
	mode := fastpath.ModeTCX
	switch cfg.FastPath {
	case FastPathOff:
		e.fp = offload.Off("turned off in the config")
		return
	case FastPathXDP:
		mode = fastpath.ModeXDP
	}
	h, ok := e.b.handles.get()
	if !ok {
		e.fp = offload.Off("no rules handle left for the fast path's counters")
		return
	}
	o := offload.Options{Mode: mode, Auto: cfg.FastPath == FastPathAuto || cfg.FastPath == "", Log: e.log,
		NATFlows: fastpath.DefaultNATFlows, IPv6Flows: 64, NumPorts: len(e.ports),
		View: fpView{e}, FDB: e.fdb, Rules: e.rules, Counter: e.rules.Worker(h), NAT: e.natr, IPv6: e.IPv6(),
		WAN: e.wanID(), Start: e.start}
	if cfg.NAT != nil {
		o.NATFlows = min(2*orDefault(cfg.NAT.MaxConns, nat.DefaultMaxConns), 1<<17)
	}
	if o.IPv6 != nil {
		// The maps hold the active flows (idle ones leave); a flow
		// beyond them stays on the rings. Without an IPv6 router the
		// map stays empty.
		o.IPv6Flows = fastpath.DefaultIPv6Flows
	}
	for _, pi := range e.ports[1:] {
		if !pi.host {
			o.Ports = append(o.Ports, fpPort(pi))
		}
	}
	m, err := offload.Open(o)
	if err != nil {
		e.b.handles.put(h)
		e.fp = offload.Off(err.Error())
		e.log.Warn("dataplane: no fast path; the rings carry every frame", "err", err)
		return
	}
	e.fp = m
	if mode == fastpath.ModeTCX {
		e.b.bindAfterTCX(cfg, e.ports)
	}
	e.log.Info("dataplane fast path", "mode", mode, "jit", m.Kernel().JIT)
}

// fpPort is data port pi as the fast path attaches to it.
func fpPort(pi *portInfo) offload.Port {
	return offload.Port{ID: pi.id, Name: pi.name, Iface: pi.iface, Ingress: pi.kdrop != nil, IngressErr: pi.kdropErr}
}

// wanID is the WAN port's id in NAT mode, 0 in bridge mode.
func (e *Engine) wanID() uint16 {
	if e.natr == nil {
		return 0
	}
	return uint16(e.natp.wanID)
}

// fpView is the engine as the fast path's manager sees it (offload.View).
type fpView struct{ e *Engine }

// Forwards reports whether data port id forwards now: its link up, not
// blocked by loop protection.
func (v fpView) Forwards(id uint16) (int, bool) {
	t := v.e.topo.Load()
	if t == nil || int(id) >= len(t.ports) || t.ports[id] == nil {
		return 0, false
	}
	pi := t.ports[id]
	return pi.mtu, !pi.host && pi.up.Load() && !pi.loop.blocked()
}

// Settings returns the settings in force (offload.Settings).
func (v fpView) Settings() offload.Settings { return v.e.cur.Load() }

// Learns reports whether the FDB learns port id's sources.
func (s *settings) Learns(id uint16) bool { return !s.ports[id].noLearn }

// IngressVLAN is fwd.ingressVLAN for a bridged pair's outer tag.
func (s *settings) IngressVLAN(in uint16, tag fastpath.Tag, vid uint16) (uint16, bool) {
	v := s.ports[in].vlan
	if v == nil {
		if tag == fastpath.Untagged {
			return 0, true
		}
		return vid, true
	}
	return v.ingress(tag != fastpath.Untagged, tag == fastpath.Tag8021Q, vid)
}

// WANLink is the WAN link's VLAN and data tag (wanlink.go).
func (s *settings) WANLink() (vid, tci uint16) { return s.wan.vid, s.wan.tci }

// WANPPPoE is the WAN link's PPPoE session (wanlink_pppoe.go).
func (s *settings) WANPPPoE() (on bool, sid uint16, ac [6]byte) {
	return s.wan.ppp.on, s.wan.ppp.sid, s.wan.ppp.ac
}

// Egress is forward's egress form on port out for VLAN vid.
func (s *settings) Egress(out, vid uint16) (fastpath.Egress, bool) {
	v := s.ports[out].vlan
	if v == nil {
		return fastpath.EgressAsIs, true
	}
	eg, ok := v.egress(vid)
	return fastpath.Egress(eg), ok
}

// addFastPath adds what the kernel forwarded to the ports' counters in
// s, and the fast path's state.
func (e *Engine) addFastPath(s *Snapshot) {
	if e.fp == nil {
		return
	}
	st, ports := e.fp.Stats()
	for i := range s.Ports {
		p := &s.Ports[i]
		if int(p.ID) < len(ports) {
			c := ports[p.ID]
			p.RxPackets += c.RxPackets
			p.RxBytes += c.RxBytes
			p.TxPackets += c.TxPackets
			p.TxBytes += c.TxBytes
		}
	}
	s.FastPath = &st
}

// SyncFastPath carries what the fast path forwarded into the tables now
// (conntrack counters and deadlines, the FDB, the rules' counters, the
// port counters) and takes out flows whose connection is gone: call it
// before listing them, or after deleting connections. Without the fast
// path it does nothing.
func (e *Engine) SyncFastPath() { e.fp.Sync() }

// The workers' side (offload.Worker): these run on the per-frame path.

// fpBefore takes into p the flow of the routed frame in w.f (arriving on
// the router's side of port id side) before the router rewrites it.
func (w *fwd) fpBefore(side int, p *offload.Pre) {
	// The fast path pops and pushes a WAN VLAN's tag and frames the
	// IPv4 and IPv6 of a PPPoE session (the manager takes routed IPv6
	// over PPPoE while route6 routes the WAN point-to-point).
	if w.fp != nil && !w.in.host {
		w.fp.Before(&w.f, side == int(w.wanID), p)
	}
}

// fpMoved takes the flows to mac (in VLAN vid) out of the kernel: the
// slow path learned it on another port.
func (w *fwd) fpMoved(mac *[6]byte, vid uint16) {
	if w.fp != nil {
		w.fp.Moved(mac, vid)
	}
}
