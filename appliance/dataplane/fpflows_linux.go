package dataplane

import (
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

// The fast path manager's flows: installing what the workers offer,
// harvesting what the kernel forwarded into the tables, evicting what the
// slow path must see again. Everything here runs under fp.mu.

// fpNAT is one direction of a NAT connection in the kernel.
type fpNAT struct {
	key        fastpath.NATKey
	tuple, rev nat.Tuple
	id         nat.ConnID
	dir        int
	in, out    uint16
	outSide    nat.Side
	vid        uint16 // the FDB VLAN of a LAN source (its port's classification)
	srcMAC     [6]byte
	nh         [4]byte
	flow       fastpath.NATFlow
	idle       int64 // ns without a packet before it leaves the kernel
	active     int64 // engine clock of its install or last packet
}

// fpPair is a bridged MAC pair in the kernel.
type fpPair struct {
	key     fastpath.PairKey
	in, out uint16
	vid     uint16 // the FDB VLAN
	delta   int64  // bytes a frame gains (or loses) on egress
	rk      rules.Key
	v       rules.Verdict // L2Only: the verdict of every frame
	next    rules.Verdict // the verdict under a table being swapped in
	flow    fastpath.Pair
	micros  []*fpMicro
	active  int64
}

// fpMicro is a bridged 5-tuple of a pair whose verdict depends on more
// than its MACs.
type fpMicro struct {
	key    fastpath.MicroKey
	pair   *fpPair
	rk     rules.Key
	v      rules.Verdict
	next   rules.Verdict
	slot   uint32
	active int64
}

// fpHop is a NAT flow's next hop.
type fpHop struct {
	side nat.Side
	ip   [4]byte
	mac  [6]byte
}

// fpDying is an evicted flow whose last counts are read at the next
// harvest, when no program run can still be counting into its slot.
type fpDying struct {
	slot uint32
	rec  any // *fpNAT, *fpR6, *fpPair or *fpMicro
}

// fpSlot is a stats slot's flow and what every harvest's count pass
// needs of it without touching the flow (harvest).
type fpSlot struct {
	rec     any // *fpNAT, *fpR6, *fpPair or *fpMicro; nil while free
	in, out uint16
	delta   int32 // bytes a frame gains on egress (pairs)
	ports   bool  // its frames count on the ports (a microflow's are its pair's)
	routed  bool  // a NAT or routed IPv6 flow: the NAT worker's frames too
	v6      bool  // a routed IPv6 flow: route6's too
	turns   uint8 // harvests between its turns (turnsFor its idle time)
	dying   bool
	// packets and bytes the count pass has counted so far.
	packets, bytes uint64
}

// fpClock is one reading of the clocks the counters are converted with.
type fpClock struct {
	wall, mono, eng int64
}

func (fp *fastPath) clock() fpClock {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return fpClock{wall: time.Now().UnixNano(), mono: ts.Nano(), eng: fp.e.Now()}
}

// unix and engine convert a CLOCK_MONOTONIC time of the program's.
func (c fpClock) unix(m int64) int64   { return c.wall - (c.mono - m) }
func (c fpClock) engine(m int64) int64 { return c.eng - (c.mono - m) }

func (fp *fastPath) alloc() (uint32, bool) {
	n := len(fp.free)
	if n == 0 {
		return 0, false
	}
	s := fp.free[n-1]
	fp.free = fp.free[:n-1]
	if err := fp.prog.ResetStats(s); err != nil {
		fp.fail(err)
		fp.free = append(fp.free, s)
		return 0, false
	}
	fp.prev[s] = fastpath.Stats{}
	fp.slots[s] = fpSlot{}
	fp.high = max(fp.high, s+1)
	return s, true
}

// own gives slot (from alloc) to an installed flow.
func (fp *fastPath) own(slot uint32, sl fpSlot) { fp.slots[slot] = sl }

// release returns slot to the free list.
func (fp *fastPath) release(slot uint32) {
	fp.slots[slot] = fpSlot{}
	fp.free = append(fp.free, slot)
}

// die queues an evicted flow's slot for its last counts.
func (fp *fastPath) die(slot uint32, rec any) {
	fp.slots[slot].dying = true
	fp.dying = append(fp.dying, fpDying{slot: slot, rec: rec})
	fp.c.evicted.Add(1)
}

// turnsFor is how many harvests pass between the turns of a flow that
// leaves after idle ns without a packet (or of every flow, for an FDB
// aging time of idle): the largest power of two up to fpMaxTurns whose
// harvests last at most half of idle. A flow is then judged within 1.5
// times its idle time, so within 0.75 times its connection's timeout, and
// an FDB entry it keeps is refreshed twice within the aging time.
func turnsFor(idle int64) uint8 {
	n := uint8(1)
	for n < fpMaxTurns && int64(2*n)*int64(fpHarvestInterval) <= idle/2 {
		n *= 2
	}
	return n
}

// due reports whether slot s has its turn at harvest turn when turns (a
// power of two) harvests pass between its turns: the slots of a period
// spread evenly over its harvests.
func due(s, turn uint32, turns uint8) bool {
	return (s^turn)&(uint32(turns)-1) == 0
}

func (fp *fastPath) markIndex(t *nat.Tuple) uint64 { return tupleHash(t) % fpMarks }

// marked reports whether a NAT flow of either direction of t's
// connection may be in the kernel (a hash filter: false positives only).
func (fp *fastPath) marked(t *nat.Tuple) bool { return fp.mark[fp.markIndex(t)].Load() > 0 }

// port returns data port id if it is up, not blocked by loop protection,
// and the program runs on it.
func (fp *fastPath) port(id uint16) (*portInfo, bool) {
	ports := fp.e.topo.Load().ports
	if int(id) >= len(ports) || id == 0 || int(id) >= len(fp.ifindex) {
		return nil, false
	}
	pi := ports[id]
	return pi, !pi.host && pi.up.Load() && fp.ifindex[id] != 0 && !pi.loop.blocked()
}

// install takes an offered flow into the kernel if it still is one the
// fast path can forward exactly as the slow path did.
func (fp *fastPath) install(o *fpOffer) {
	if !fp.on() {
		return
	}
	var ok bool
	if o.v6 {
		ok = fp.installR6(o)
	} else if o.nat {
		ok = fp.installNAT(o)
	} else {
		ok = fp.installPair(o)
	}
	if !ok {
		fp.c.refused.Add(1)
	}
}

func (fp *fastPath) installNAT(o *fpOffer) bool {
	r := fp.e.natr
	if r == nil {
		return false
	}
	if old := fp.nat[o.tuple]; old != nil {
		if old.in == o.in && old.out == o.out && old.srcMAC == o.srcMAC && old.flow.DstMAC == o.nhMAC {
			return true // installed meanwhile
		}
		fp.evictNAT(old) // the host moved or changed its MAC
	}
	clk := fp.clock()
	off, ok := r.Offloadable(o.tuple, clk.wall)
	if !ok || off.NextHopMAC != o.nhMAC {
		return false
	}
	in, ok1 := fp.port(o.in)
	out, ok2 := fp.port(o.out)
	if !ok1 || !ok2 || (off.Out == nat.WAN) != (o.out == fp.e.wanID()) {
		return false
	}
	if off.Out == nat.LAN {
		if p, ok := fp.e.fdb.Lookup(&off.NextHopMAC, 0, clk.eng); !ok || p != o.out {
			return false
		}
	}
	slot, ok := fp.alloc()
	if !ok {
		return false
	}
	rec := &fpNAT{tuple: o.tuple, rev: off.Reverse, id: off.ID, dir: off.Dir, in: o.in, out: o.out, outSide: off.Out,
		vid: o.vid, srcMAC: o.srcMAC, nh: off.NextHop, active: clk.eng,
		idle: min(int64(off.Timeout)*int64(time.Second)/2, int64(fpIdle))}
	rec.key = fastpath.NATKey{Ifindex: fp.ifindex[o.in], Src: o.tuple.Src, Dst: o.tuple.Dst, SrcPort: o.tuple.SrcPort,
		DstPort: o.tuple.DstPort, Proto: o.tuple.Proto}
	rec.flow = fastpath.NATFlow{DstMAC: off.NextHopMAC, SrcMAC: off.OutMAC, InDstMAC: off.InMAC, InSrcMAC: o.srcMAC,
		CheckSrcMAC: o.tuple.Side == nat.LAN, Src: off.Src, Dst: off.Dst, SrcPort: off.SrcPort, DstPort: off.DstPort,
		OutIfindex: fp.ifindex[o.out], Slot: slot, MaxFrame: min(in.mtu, out.mtu) + frame.EthernetHeaderLen,
		MaxIP: off.OutMTU, ICMPType: o.icmp, Ack: off.Ack, Win: off.Win, WinScale: off.WinScale}
	if err := fp.prog.PutNAT(rec.key, rec.flow); err != nil {
		fp.fail(err)
		fp.free = append(fp.free, slot)
		return false
	}
	fp.own(slot, fpSlot{rec: rec, in: o.in, out: o.out, ports: true, routed: true, turns: turnsFor(rec.idle)})
	fp.nat[o.tuple] = rec
	fp.natRev[rec.rev] = rec
	fp.mark[fp.markIndex(&rec.tuple)].Add(1)
	fp.mark[fp.markIndex(&rec.rev)].Add(1)
	fp.c.installed.Add(1)
	return true
}

// pairEgress is what a pair's frames need to fit the ports: the longest
// frame (wire bytes as received) and what egress adds.
func pairEgress(tag fastpath.Tag, egress int, inMTU, outMTU int) (maxWire int, delta int64) {
	q := 0
	if tag == fastpath.Tag8021Q {
		q = frame.VLANTagLen
	}
	inLimit := inMTU + frame.EthernetHeaderLen + q
	outLimit := outMTU + frame.EthernetHeaderLen + q
	switch egress {
	case egressUntagged:
		if tag != fastpath.Untagged {
			delta = -frame.VLANTagLen
		}
		outLimit = outMTU + frame.EthernetHeaderLen - int(delta)
	case egressTagged:
		if tag == fastpath.Untagged {
			delta = frame.VLANTagLen
		}
		outLimit = outMTU + frame.EthernetHeaderLen + frame.VLANTagLen - int(delta)
	}
	return min(inLimit, outLimit), delta
}

// pairVerdict judges a pair under table t: its uniform verdict (L2Only)
// when the rules give all its frames one.
func pairVerdict(t *rules.Table, rk *rules.Key) (rules.Verdict, bool) {
	v, ok := t.UniformVerdict(rk, rules.L2Fields)
	return v, ok && v.Action == rules.Accept && !v.Log
}

// microVerdict judges a microflow under table t (flagsOK: t's forward
// chain does not look at TCP flags, which change from frame to frame).
func microVerdict(t *rules.Table, rk *rules.Key, flagsOK bool) (rules.Verdict, bool) {
	if rk.Proto == rules.ProtoTCP && !flagsOK {
		return rules.Verdict{}, false
	}
	v := t.Lookup(rk)
	return v, v.Action == rules.Accept && !v.Log
}

func (fp *fastPath) installPair(o *fpOffer) bool {
	in, ok1 := fp.port(o.in)
	out, ok2 := fp.port(o.out)
	wan := fp.e.wanID()
	if !ok1 || !ok2 || o.in == wan || o.out == wan {
		return false
	}
	clk := fp.clock()
	if p, ok := fp.e.fdb.Lookup(&o.pair.Dst, o.vid, clk.eng); !ok || p != o.out {
		return false
	}
	t := fp.e.rules.Table()
	if g := t.Generation(); g != fp.gen {
		fp.gen, fp.flagsOK = g, !t.Uses(rules.Forward, rules.FieldTCPFlags)
	}
	v, l2only := pairVerdict(t, &o.rk)
	var mv rules.Verdict
	if !l2only {
		var ok bool
		if mv, ok = microVerdict(t, &o.rk, fp.flagsOK); !ok || !o.micro {
			return false
		}
	}
	pk := o.pair
	pk.Ifindex = fp.ifindex[o.in]
	maxWire, delta := pairEgress(pk.Tag, o.egress, in.mtu, out.mtu)
	p := fp.pairs[pk]
	if p != nil && (p.out != o.out || p.flow.Egress != fastpath.Egress(o.egress) || p.flow.L2Only != l2only || p.vid != o.vid) {
		fp.evictPair(p)
		p = nil
	}
	if p == nil {
		slot, ok := fp.alloc()
		if !ok {
			return false
		}
		p = &fpPair{key: pk, in: o.in, out: o.out, vid: o.vid, delta: delta, rk: o.rk, v: v, active: clk.eng,
			flow: fastpath.Pair{OutIfindex: fp.ifindex[o.out], Slot: slot, MaxWire: maxWire, Egress: fastpath.Egress(o.egress),
				VID: o.vid, L2Only: l2only}}
		if err := fp.prog.PutPair(pk, p.flow); err != nil {
			fp.fail(err)
			fp.free = append(fp.free, slot)
			return false
		}
		fp.own(slot, fpSlot{rec: p, in: p.in, out: p.out, delta: int32(delta), ports: true, turns: turnsFor(int64(fpIdle))})
		fp.pairs[pk] = p
		fp.c.installed.Add(1)
	}
	if l2only {
		return true
	}
	mk := o.mk
	mk.Pair = p.flow.Slot
	if fp.micros[mk] != nil {
		return true
	}
	slot, ok := fp.alloc()
	if !ok {
		return false
	}
	m := &fpMicro{key: mk, pair: p, rk: o.rk, v: mv, slot: slot, active: clk.eng}
	if err := fp.prog.PutMicro(mk, slot); err != nil {
		fp.fail(err)
		fp.free = append(fp.free, slot)
		return false
	}
	fp.own(slot, fpSlot{rec: m, turns: turnsFor(int64(fpIdle))})
	fp.micros[mk] = m
	p.micros = append(p.micros, m)
	fp.c.installed.Add(1)
	return true
}

// delta returns what slot counted since the last read, and its last time.
func (fp *fastPath) delta(slot uint32) fastpath.Stats {
	cur, prev := fp.stats[slot], fp.prev[slot]
	fp.prev[slot] = cur
	return fastpath.Stats{Packets: cur.Packets - prev.Packets, Bytes: cur.Bytes - prev.Bytes,
		L3Bytes: cur.L3Bytes - prev.L3Bytes, Last: cur.Last}
}

// harvest reads the kernel's counters and carries them into the tables
// in two passes. The count pass, over the slots in order, adds every
// flow's new frames to the port and router counters. The turn pass
// carries them into conntrack, route6, the FDB and the rules and judges
// whether each flow may stay. A flow has its turn every turnsFor(its idle
// time) harvests, by slot: every 8 s for an idle time of 30 s (a TCP
// connection or a UDP stream), more often for shorter ones, and no less
// often than the FDB's aging time and the NAT router's neighbour
// reachable time ask; every flow has it when all is set
// (sync: an API listing, which must be exact). A turn costs a NAT flow a
// few cache misses in conntrack (docs/dataplane.md, Measured), so the
// pass visits as few flows as that allows. The flows evicted at the last
// harvest are finished first.
func (fp *fastPath) harvest(all bool) {
	if !fp.on() || len(fp.nat)+len(fp.r6)+len(fp.pairs)+len(fp.micros)+len(fp.dying) == 0 {
		return
	}
	fp.c.harvests.Add(1)
	if err := fp.reader.Read(fp.stats[:fp.high]); err != nil {
		fp.fail(err)
		return
	}
	fp.countSlots()
	clk := fp.clock()
	set := fp.e.cur.Load()
	clear(fp.hops)
	clear(fp.hops6)
	fp.gw6ok = false
	for _, d := range fp.dying {
		fp.apply(d.rec, fp.delta(d.slot), clk, set)
		fp.release(d.slot)
	}
	fp.dying = fp.dying[:0]
	most := uint8(fpMaxTurns) // the FDB entries the flows keep age
	if a := fp.e.fdb.AgingTime(); a >= 0 {
		most = turnsFor(int64(a))
	}
	if r := fp.e.natr; r != nil {
		// A next hop's flows ask for its probe once half its reachable
		// time has passed: one of them has its turn before the other half
		// does (route6's reachable time is the default's, 30 s).
		most = min(most, turnsFor(int64(r.Config().NeighReachable)*int64(time.Second)))
	}
	if all {
		most = 1
	}
	turn := fp.turn
	fp.turn++
	turns := fp.turns[:0]
	for s := range fp.high {
		sl := &fp.slots[s]
		if sl.rec != nil && !sl.dying && due(s, turn, min(sl.turns, most)) {
			turns = append(turns, s)
		}
	}
	fp.turns = turns
	for i, s := range turns {
		// The connection a few turns ahead is asked for now, so that
		// the cache misses of its conntrack update overlap this one's.
		if j := i + fpPrefetchAhead; j < len(turns) {
			if r, ok := fp.slots[turns[j]].rec.(*fpNAT); ok {
				fp.e.natr.PrefetchOffloaded(r.id)
			}
		}
		sl := &fp.slots[s]
		if sl.rec == nil || sl.dying {
			continue // evicted by an earlier turn (a pair's microflows)
		}
		switch r := sl.rec.(type) {
		case *fpNAT:
			if !fp.apply(r, fp.delta(s), clk, set) || !fp.natValid(r, clk) {
				fp.evictNAT(r)
			}
		case *fpR6:
			if !fp.apply(r, fp.delta(s), clk, set) || !fp.r6Valid(r, clk) {
				fp.evictR6(r)
			}
		case *fpMicro:
			if !fp.apply(r, fp.delta(s), clk, set) || clk.eng-r.active > int64(fpIdle) {
				fp.evictMicro(r)
			}
		case *fpPair:
			fp.apply(r, fp.delta(s), clk, set)
			if !fp.pairValid(r, clk, set) {
				fp.evictPair(r)
			}
		}
	}
}

// fpPrefetchAhead is how many turns ahead the turn pass prefetches a NAT
// flow's connection: nat's prefetch distance (nat.BenchmarkOffloaded,
// docs/dataplane.md, Measured).
const fpPrefetchAhead = 8

// countSlots is the harvest's count pass: the new frames of every slot
// in use (a dying flow's last ones included) go to the port counters, the
// router's and route6's.
func (fp *fastPath) countSlots() {
	var routedPkts, routedBytes, v6Pkts uint64
	ports := &fp.portSums
	*ports = fpPortSums{}
	for s := range fp.high {
		sl := &fp.slots[s]
		cur := &fp.stats[s]
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
			fp.c.rxPackets[id].Add(ports.rxPackets[id])
			fp.c.rxBytes[id].Add(ports.rxBytes[id])
		}
		if ports.txPackets[id] != 0 {
			fp.c.txPackets[id].Add(ports.txPackets[id])
			fp.c.txBytes[id].Add(ports.txBytes[id])
		}
	}
	if routedPkts > 0 {
		fp.e.natr.CountOffloaded(routedPkts, routedBytes) // route6's forwarding is the NAT worker's
	}
	if v6Pkts > 0 {
		if v6 := fp.e.IPv6(); v6 != nil {
			v6.CountOffloaded(v6Pkts)
		}
	}
}

// fpPortSums are a count pass's frames by port id.
type fpPortSums struct {
	rxPackets, rxBytes, txPackets, txBytes [MaxPorts + 1]uint64
}

// apply carries one flow's new counts into the tables. It reports
// whether the flow may stay (a NAT connection still offloadable).
func (fp *fastPath) apply(rec any, d fastpath.Stats, clk fpClock, set *settings) bool {
	e := fp.e
	switch r := rec.(type) {
	case *fpNAT:
		if d.Packets == 0 {
			// An idle flow leaves by its idle time; a deleted
			// connection by SyncFastPath or at its next packet.
			return true
		}
		alive := e.natr.Offloaded(r.id, r.dir, nat.OffloadUse{Packets: d.Packets, Bytes: d.L3Bytes, Last: clk.unix(d.Last)})
		if r.tuple.Side == nat.LAN && !set.ports[r.in].noLearn {
			e.fdb.Learn(&r.srcMAC, r.vid, r.in, clk.engine(d.Last))
		}
		r.active = clk.engine(d.Last)
		return alive
	case *fpR6:
		return fp.applyR6(r, d, clk, set)
	case *fpPair:
		if d.Packets == 0 {
			return true
		}
		if !set.ports[r.in].noLearn {
			e.fdb.Learn(&r.key.Src, r.vid, r.in, clk.engine(d.Last))
		}
		if r.flow.L2Only {
			fp.rw.Count(r.rk.Chain, r.v, d.Packets, uint64(int64(d.Bytes)+int64(d.Packets)*r.delta), clk.unix(d.Last))
		}
		r.active = clk.engine(d.Last)
	case *fpMicro:
		if d.Packets == 0 {
			return true
		}
		fp.rw.Count(r.rk.Chain, r.v, d.Packets, uint64(int64(d.Bytes)+int64(d.Packets)*r.pair.delta), clk.unix(d.Last))
		r.active = clk.engine(d.Last)
	}
	return true
}

// natValid reports whether a NAT flow still forwards as the slow path
// would: its next hop fresh (the slow path would probe it), its ports up,
// a LAN next hop still on its port, and a packet within its idle time.
func (fp *fastPath) natValid(r *fpNAT, clk fpClock) bool {
	if _, ok := fp.port(r.in); !ok {
		return false
	}
	if _, ok := fp.port(r.out); !ok {
		return false
	}
	// One check per next hop and harvest (most flows share the gateway).
	h := fpHop{side: r.outSide, ip: r.nh, mac: r.flow.DstMAC}
	fresh, ok := fp.hops[h]
	if !ok {
		fresh = fp.e.natr.NeighbourFresh(r.outSide, r.nh, r.flow.DstMAC, clk.wall, true)
		fp.hops[h] = fresh
	}
	if !fresh {
		return false
	}
	if r.outSide == nat.LAN {
		if p, ok := fp.e.fdb.Lookup(&r.flow.DstMAC, 0, clk.eng); !ok || p != r.out {
			return false
		}
	}
	return clk.eng-r.active < r.idle
}

// pairValid reports whether a pair still forwards as the slow path would:
// its ports up and their VLAN settings unchanged, its destination on the
// same port, and a frame within fpIdle (or microflows of its own).
func (fp *fastPath) pairValid(p *fpPair, clk fpClock, set *settings) bool {
	if _, ok := fp.port(p.in); !ok {
		return false
	}
	if _, ok := fp.port(p.out); !ok {
		return false
	}
	if vid, ok := ingressClass(set, p.in, p.key.Tag, p.key.VID); !ok || vid != p.vid {
		return false
	}
	if eg, ok := egressOf(set, p.out, p.vid); !ok || eg != int(p.flow.Egress) {
		return false
	}
	if out, ok := fp.e.fdb.Lookup(&p.key.Dst, p.vid, clk.eng); !ok || out != p.out {
		return false
	}
	return clk.eng-p.active < int64(fpIdle) || len(p.micros) > 0
}

// ingressClass is fwd.ingressVLAN for a pair's tag: the frame's VLAN on
// ingress port in, false when the port does not carry it.
func ingressClass(set *settings, in uint16, tag fastpath.Tag, vid uint16) (uint16, bool) {
	v := set.ports[in].vlan
	switch {
	case v == nil:
		if tag == fastpath.Untagged {
			return 0, true
		}
		return vid, true
	case tag == fastpath.Tag8021AD:
		return 0, false
	case tag == fastpath.Tag8021Q && vid != 0:
		return vid, vid == v.native || v.allows(vid)
	case v.native == 0:
		return 0, false
	}
	return v.native, true
}

// egressOf is forward's egress form on port out for VLAN vid; false when
// the port does not carry it.
func egressOf(set *settings, out, vid uint16) (int, bool) {
	v := set.ports[out].vlan
	switch {
	case v == nil:
		return egressAsIs, true
	case vid != 0 && vid == v.native:
		return egressUntagged, true
	case vid != 0 && v.allows(vid):
		return egressTagged, true
	}
	return 0, false
}

// evictNAT takes a NAT flow out of the kernel: its TCP tracking goes into
// conntrack now, its last counts at the next harvest.
func (fp *fastPath) evictNAT(r *fpNAT) {
	if r.tuple.Proto == frame.ProtoTCP {
		if tr, ok, err := fp.prog.NATTrack(r.key); err == nil && ok && tr.Seen {
			fp.e.natr.Offloaded(r.id, r.dir, nat.OffloadUse{TCP: true, Ack: tr.Ack, Win: tr.Win})
		}
	}
	if err := fp.prog.DeleteNAT(r.key); err != nil {
		fp.fail(err)
	}
	delete(fp.nat, r.tuple)
	if fp.natRev[r.rev] == r {
		delete(fp.natRev, r.rev)
	}
	fp.mark[fp.markIndex(&r.tuple)].Add(-1)
	fp.mark[fp.markIndex(&r.rev)].Add(-1)
	fp.die(r.flow.Slot, r)
}

func (fp *fastPath) evictMicro(m *fpMicro) {
	if err := fp.prog.DeleteMicro(m.key); err != nil {
		fp.fail(err)
	}
	delete(fp.micros, m.key)
	p := m.pair
	for i, x := range p.micros {
		if x == m {
			p.micros = append(p.micros[:i], p.micros[i+1:]...)
			break
		}
	}
	fp.die(m.slot, m)
}

func (fp *fastPath) evictPair(p *fpPair) {
	for len(p.micros) > 0 {
		fp.evictMicro(p.micros[len(p.micros)-1])
	}
	if err := fp.prog.DeletePair(p.key); err != nil {
		fp.fail(err)
	}
	delete(fp.pairs, p.key)
	fp.die(p.flow.Slot, p)
}

// evictConn takes both directions of tuple t's connection out of the
// kernel (a worker, before the router sees a TCP SYN, FIN or RST of it).
func (fp *fastPath) evictConn(t nat.Tuple) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	r, o := fp.nat[t], fp.natRev[t] // this direction, the other
	if r != nil {
		fp.evictNAT(r)
	}
	if o != nil {
		fp.evictNAT(o)
	}
}

// macMoved takes the flows to mac out of the kernel: pairs to it in VLAN
// vid and NAT flows to it on the LAN.
func (fp *fastPath) macMoved(mac [6]byte, vid uint16) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, p := range fp.pairs {
		if p.key.Dst == mac && p.vid == vid {
			fp.evictPair(p)
		}
	}
	for _, r := range fp.nat {
		if r.outSide == nat.LAN && r.flow.DstMAC == mac && vid == 0 {
			fp.evictNAT(r)
		}
	}
	for _, r := range fp.r6 {
		if r.outSide == route6.LAN && r.flow.DstMAC == mac && vid == 0 {
			fp.evictR6(r)
		}
	}
}

// fdbFlushed follows a flush of the whole FDB (loop protection blocked
// or opened a port): every pair and every NAT flow to or from the LAN
// leaves the kernel, so that the slow path learns the stations again
// instead of the harvest learning them back where they were.
func (fp *fastPath) fdbFlushed() {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, p := range fp.pairs {
		fp.evictPair(p)
	}
	for _, r := range fp.nat {
		if r.outSide == nat.LAN || r.tuple.Side == nat.LAN {
			fp.evictNAT(r)
		}
	}
	for _, r := range fp.r6 {
		fp.evictR6(r) // every one is to or from the LAN
	}
}

// portDown takes the flows from and to port id out of the kernel.
func (fp *fastPath) portDown(id uint16) {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.evictPort(id)
}

func (fp *fastPath) evictPort(id uint16) {
	for _, p := range fp.pairs {
		if p.in == id || p.out == id {
			fp.evictPair(p)
		}
	}
	for _, r := range fp.nat {
		if r.in == id || r.out == id {
			fp.evictNAT(r)
		}
	}
	for _, r := range fp.r6 {
		if r.in == id || r.out == id {
			fp.evictR6(r)
		}
	}
}

// beforeSwap judges the flows under table t, which is about to replace
// the current one: it takes out those whose verdict changes (their counts
// go to the current table's rules before it returns) and holds fp.mu
// until afterSwap, so that no counts are attributed across the swap.
func (fp *fastPath) beforeSwap(t *rules.Table) {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	fp.harvest(true)
	flagsOK := !t.Uses(rules.Forward, rules.FieldTCPFlags)
	evicted := false
	for _, p := range fp.pairs {
		v, l2only := pairVerdict(t, &p.rk)
		if l2only != p.flow.L2Only {
			fp.evictPair(p)
			evicted = true
			continue
		}
		p.next = v
	}
	for _, m := range fp.micros {
		v, ok := microVerdict(t, &m.rk, flagsOK)
		if !ok {
			fp.evictMicro(m)
			evicted = true
			continue
		}
		m.next = v
	}
	if evicted {
		// Once no program run can still see the evicted flows, their
		// last counts are final: read them for the current table.
		graceRCU()
		fp.harvest(true)
	}
	fp.gen, fp.flagsOK = t.Generation(), flagsOK
}

// afterSwap gives the flows their verdicts under the new table and lets
// the manager go on.
func (fp *fastPath) afterSwap() {
	if !fp.on() {
		return
	}
	for _, p := range fp.pairs {
		p.v = p.next
	}
	for _, m := range fp.micros {
		m.v = m.next
	}
	fp.mu.Unlock()
}

// revalidate takes out the flows an applied configuration changed: NAT
// connections whose translation, next hop or MTU differ (or that are
// gone), pairs whose ports' VLAN settings or FDB entries changed.
func (fp *fastPath) revalidate() {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	clk := fp.clock()
	set := fp.e.cur.Load()
	for _, r := range fp.nat {
		o, ok := fp.e.natr.Offloadable(r.tuple, clk.wall)
		f := &r.flow
		if !ok || o.ID != r.id || o.Src != f.Src || o.Dst != f.Dst || o.SrcPort != f.SrcPort || o.DstPort != f.DstPort ||
			o.NextHopMAC != f.DstMAC || o.OutMAC != f.SrcMAC || o.InMAC != f.InDstMAC || o.OutMTU != f.MaxIP {
			fp.evictNAT(r)
		}
	}
	fp.revalidate6(clk)
	for _, p := range fp.pairs {
		if !fp.pairValid(p, clk, set) {
			fp.evictPair(p)
		}
	}
}

// portsChanged follows a restart of ports ids: their flows leave the
// kernel, and a port on a new interface gets the program there.
func (fp *fastPath) portsChanged(old, ports []*portInfo, ids []uint16) {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, id := range ids {
		fp.evictPort(id)
		if old[id].iface == ports[id].iface {
			continue
		}
		if fp.ifindex[id] != 0 {
			fp.prog.Detach(fp.ifindex[id])
			fp.ifindex[id] = 0
		}
		if err := fp.attach(fp.prog, ports[id]); err != nil {
			fp.fail(err)
		}
	}
}

// graceRCU waits until every BPF program run that started before it has
// ended (the programs run in RCU read-side sections; the global
// membarrier waits for an RCU grace period), or a few milliseconds where
// membarrier is missing.
func graceRCU() {
	const membarrierCmdGlobal = 1
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0); errno != 0 {
		time.Sleep(10 * time.Millisecond)
	}
}
