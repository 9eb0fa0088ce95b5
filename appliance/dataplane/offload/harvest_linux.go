package offload

import (
	"time"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/rules"
)

// prefetchAhead is how many turns ahead the turn pass prefetches a NAT
// flow's connection: nat's prefetch distance (nat.BenchmarkOffloaded,
// docs/dataplane.md, Measured).
const prefetchAhead = 8

// harvest reads the kernel's counters and carries them into the tables
// in two passes. The count pass, over the slots in order, adds every
// flow's new frames to the port and router counters. The turn pass
// carries them into conntrack, route6, the FDB and the rules and judges
// whether each flow may stay. A flow has its turn every turnsFor(its idle
// time) harvests, by slot: every 8 s for an idle time of 30 s (a TCP
// connection or a UDP stream), more often for shorter ones, and no less
// often than the FDB's aging time and the NAT router's neighbour
// reachable time ask; every flow has it when all is set (Sync: an API
// listing, which must be exact). A turn costs a NAT flow a few cache
// misses in conntrack (docs/dataplane.md, Measured), so the pass visits
// as few flows as that allows. The flows evicted at the last harvest are
// finished first.
func (m *Manager) harvest(all bool) {
	t := &m.slots
	if !m.On() || len(m.nat.flows)+len(m.v6.flows)+len(m.pairs)+len(m.micros)+len(t.dying) == 0 {
		return
	}
	if err := t.read(); err != nil {
		m.fail(err)
		return
	}
	m.countSlots()
	clk := m.clock()
	set := m.o.View.Settings()
	clear(m.hops4)
	clear(m.hops6)
	m.gw6ok = false
	for _, d := range t.dying {
		m.apply(d.rec, t.delta(d.slot), clk, set)
		t.release(d.slot)
	}
	t.dying = t.dying[:0]
	most := uint8(MaxTurns) // the FDB entries the flows keep age
	if a := m.o.FDB.AgingTime(); a >= 0 {
		most = turnsFor(int64(a))
	}
	if r := m.o.NAT; r != nil {
		// A next hop's flows ask for its probe once half its reachable
		// time has passed: one of them has its turn before the other half
		// does (route6's reachable time is the default's, 30 s).
		most = min(most, turnsFor(int64(r.Config().NeighReachable)*int64(time.Second)))
	}
	if all {
		most = 1
	}
	turn := t.turn
	t.turn++
	turns := t.turns[:0]
	for s := range t.high {
		sl := &t.slots[s]
		if sl.rec != nil && !sl.dying && due(s, turn, min(sl.turns, most)) {
			turns = append(turns, s)
		}
	}
	t.turns = turns
	for i, s := range turns {
		// The connection a few turns ahead is asked for now, so that
		// the cache misses of its conntrack update overlap this one's.
		if j := i + prefetchAhead; j < len(turns) {
			if r, ok := t.slots[turns[j]].rec.(*natFlow); ok {
				m.o.NAT.PrefetchOffloaded(r.id)
			}
		}
		sl := &t.slots[s]
		if sl.rec == nil || sl.dying {
			continue // evicted by an earlier turn (a pair's microflows)
		}
		m.turnOf(sl.rec, t.delta(s), clk, set)
	}
}

// turnOf is one flow's turn: its new counts go into the tables, and it
// leaves the kernel unless it still forwards as the slow path would.
func (m *Manager) turnOf(rec any, d fastpath.Stats, clk clock, set Settings) {
	switch r := rec.(type) {
	case *natFlow:
		if !m.apply(r, d, clk, set) || !m.natValid(r, clk) {
			m.evictNAT(r)
		}
	case *v6Flow:
		if !m.apply(r, d, clk, set) || !m.v6Valid(r, clk) {
			m.evictV6(r)
		}
	case *micro:
		if !m.apply(r, d, clk, set) || clk.eng-r.active > int64(Idle) {
			m.evictMicro(r)
		}
	case *pair:
		m.apply(r, d, clk, set)
		if !m.pairValid(r, clk, set) {
			m.evictPair(r)
		}
	}
}

// countSlots is the harvest's count pass: the new frames of every slot
// in use (a dying flow's last ones included) go to the port counters, the
// router's and route6's.
func (m *Manager) countSlots() {
	t := &m.slots
	var routedPkts, routedBytes, v6Pkts uint64
	ports := &t.sums
	clear(ports.rxPackets)
	clear(ports.rxBytes)
	clear(ports.txPackets)
	clear(ports.txBytes)
	for s := range t.high {
		sl := &t.slots[s]
		cur := &t.stats[s]
		if sl.rec == nil || cur.Packets == sl.packets {
			continue
		}
		dp, db := cur.Packets-sl.packets, cur.Bytes-sl.bytes
		sl.packets, sl.bytes = cur.Packets, cur.Bytes
		if sl.ports {
			ports.rxPackets[sl.in] += dp
			ports.rxBytes[sl.in] += db
			ports.txPackets[sl.out] += dp
			ports.txBytes[sl.out] += uint64(int64(db) + int64(dp)*int64(sl.delta))
		}
		if sl.routed {
			routedPkts += dp
			routedBytes += db
		}
		if sl.v6 {
			v6Pkts += dp
		}
	}
	for id := range ports.rxPackets {
		if ports.rxPackets[id] != 0 {
			m.c.rx[id].packets.Add(ports.rxPackets[id])
			m.c.rx[id].bytes.Add(ports.rxBytes[id])
		}
		if ports.txPackets[id] != 0 {
			m.c.tx[id].packets.Add(ports.txPackets[id])
			m.c.tx[id].bytes.Add(ports.txBytes[id])
		}
	}
	if routedPkts > 0 {
		m.o.NAT.CountOffloaded(routedPkts, routedBytes) // route6's forwarding is the NAT worker's
	}
	if v6Pkts > 0 && m.o.IPv6 != nil {
		m.o.IPv6.CountOffloaded(v6Pkts)
	}
}

// apply carries one flow's new counts into the tables. It reports
// whether the flow may stay (its connection still offloadable).
func (m *Manager) apply(rec any, d fastpath.Stats, clk clock, set Settings) bool {
	if d.Packets == 0 {
		// An idle flow leaves by its idle time; a deleted connection by
		// Sync or at its next packet.
		return true
	}
	switch r := rec.(type) {
	case *natFlow:
		return m.applyNAT(r, d, clk, set)
	case *v6Flow:
		return m.applyV6(r, d, clk, set)
	case *pair:
		if set.Learns(r.in) {
			m.o.FDB.Learn(&r.key.Src, r.vid, r.in, clk.engine(d.Last))
		}
		if r.flow.L2Only {
			m.count(&r.rk, r.v, d, r.delta, clk)
		}
		r.active = clk.engine(d.Last)
	case *micro:
		m.count(&r.rk, r.v, d, r.pair.delta, clk)
		r.active = clk.engine(d.Last)
	}
	return true
}

// count adds a bridged flow's frames to the rule counters of verdict v
// (delta: the bytes a frame gains on egress).
func (m *Manager) count(rk *rules.Key, v rules.Verdict, d fastpath.Stats, delta int64, clk clock) {
	m.o.Counter.Count(rk.Chain, v, d.Packets, uint64(int64(d.Bytes)+int64(d.Packets)*delta), clk.unix(d.Last))
}
