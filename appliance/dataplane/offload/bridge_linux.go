package offload

import (
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/rules"
)

// The bridged flows: unicast MAC pairs in a VLAN whose rules give every
// frame one accept verdict (rules.Table.UniformVerdict over the L2
// fields), and, where the verdict depends on more, the pair's TCP and UDP
// 5-tuples one by one (microflows). Everything here runs under the
// manager's lock.

// pair is a bridged MAC pair in the kernel.
type pair struct {
	key     fastpath.PairKey
	in, out uint16
	vid     uint16 // the FDB VLAN
	delta   int64  // bytes a frame gains (or loses) on egress
	rk      rules.Key
	v       rules.Verdict // L2Only: the verdict of every frame
	next    rules.Verdict // the verdict under a table being swapped in
	flow    fastpath.Pair
	micros  []*micro
	active  int64
}

// micro is a bridged 5-tuple of a pair whose verdict depends on more
// than its MACs.
type micro struct {
	key    fastpath.MicroKey
	pair   *pair
	rk     rules.Key
	v      rules.Verdict
	next   rules.Verdict
	slot   uint32
	active int64
}

// pairEgress is what a pair's frames need to fit the ports: the longest
// frame (wire bytes as received) and what egress adds.
func pairEgress(tag fastpath.Tag, egress fastpath.Egress, inMTU, outMTU int) (maxWire int, delta int64) {
	q := 0
	if tag == fastpath.Tag8021Q {
		q = frame.VLANTagLen
	}
	inLimit := inMTU + frame.EthernetHeaderLen + q
	outLimit := outMTU + frame.EthernetHeaderLen + q
	switch egress {
	case fastpath.EgressUntag:
		if tag != fastpath.Untagged {
			delta = -frame.VLANTagLen
		}
		outLimit = outMTU + frame.EthernetHeaderLen - int(delta)
	case fastpath.EgressTag:
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

func (m *Manager) installPair(o *offer) bool {
	inMTU, ok1 := m.port(o.path.In)
	outMTU, ok2 := m.port(o.path.Out)
	if !ok1 || !ok2 || o.path.In == m.o.WAN || o.path.Out == m.o.WAN {
		return false
	}
	clk := m.clock()
	if p, ok := m.o.FDB.Lookup(&o.pair.Dst, o.path.VID, clk.eng); !ok || p != o.path.Out {
		return false
	}
	t := m.o.Rules.Table()
	if g := t.Generation(); g != m.gen {
		m.gen, m.flagsOK = g, !t.Uses(rules.Forward, rules.FieldTCPFlags)
	}
	v, l2only := pairVerdict(t, &o.rk)
	var mv rules.Verdict
	if !l2only {
		var ok bool
		if mv, ok = microVerdict(t, &o.rk, m.flagsOK); !ok || !o.micro {
			return false
		}
	}
	pk := o.pair
	pk.Ifindex = m.ifindex[o.path.In]
	p := m.pairs[pk]
	if p != nil && (p.out != o.path.Out || p.flow.Egress != o.egress || p.flow.L2Only != l2only || p.vid != o.path.VID) {
		m.evictPair(p)
		p = nil
	}
	if p == nil {
		if p = m.newPair(o, pk, v, l2only, inMTU, outMTU, clk); p == nil {
			return false
		}
	}
	if l2only {
		return true
	}
	mk := o.mk
	mk.Pair = p.flow.Slot
	if m.micros[mk] != nil {
		return true
	}
	s, ok := m.alloc()
	if !ok {
		return false
	}
	mf := &micro{key: mk, pair: p, rk: o.rk, v: mv, slot: s, active: clk.eng}
	if err := m.prog.PutMicro(mk, s); err != nil {
		m.fail(err)
		m.slots.unused(s)
		return false
	}
	m.slots.own(s, slot{rec: mf, turns: turnsFor(int64(Idle))})
	m.micros[mk] = mf
	p.micros = append(p.micros, mf)
	m.c.installed.Add(1)
	return true
}

// newPair installs the pair o offered, with key pk and verdict v.
func (m *Manager) newPair(o *offer, pk fastpath.PairKey, v rules.Verdict, l2only bool, inMTU, outMTU int, clk clock) *pair {
	s, ok := m.alloc()
	if !ok {
		return nil
	}
	maxWire, delta := pairEgress(pk.Tag, o.egress, inMTU, outMTU)
	p := &pair{key: pk, in: o.path.In, out: o.path.Out, vid: o.path.VID, delta: delta, rk: o.rk, v: v, active: clk.eng,
		flow: fastpath.Pair{OutIfindex: m.ifindex[o.path.Out], Slot: s, MaxWire: maxWire, Egress: o.egress,
			VID: o.path.VID, L2Only: l2only}}
	if err := m.prog.PutPair(pk, p.flow); err != nil {
		m.fail(err)
		m.slots.unused(s)
		return nil
	}
	m.slots.own(s, slot{rec: p, in: p.in, out: p.out, delta: int32(delta), ports: true, turns: turnsFor(int64(Idle))})
	m.pairs[pk] = p
	m.c.installed.Add(1)
	return p
}

// pairValid reports whether a pair still forwards as the slow path would:
// its ports up and their VLAN settings unchanged, its destination on the
// same port, and a frame within Idle (or microflows of its own).
func (m *Manager) pairValid(p *pair, clk clock, set Settings) bool {
	if !m.portsUp(p.in, p.out) {
		return false
	}
	if vid, ok := set.IngressVLAN(p.in, p.key.Tag, p.key.VID); !ok || vid != p.vid {
		return false
	}
	if eg, ok := set.Egress(p.out, p.vid); !ok || eg != p.flow.Egress {
		return false
	}
	if out, ok := m.o.FDB.Lookup(&p.key.Dst, p.vid, clk.eng); !ok || out != p.out {
		return false
	}
	return clk.eng-p.active < int64(Idle) || len(p.micros) > 0
}

func (m *Manager) evictMicro(mf *micro) {
	if err := m.prog.DeleteMicro(mf.key); err != nil {
		m.fail(err)
	}
	delete(m.micros, mf.key)
	p := mf.pair
	for i, x := range p.micros {
		if x == mf {
			p.micros = append(p.micros[:i], p.micros[i+1:]...)
			break
		}
	}
	m.die(mf.slot, mf)
}

func (m *Manager) evictPair(p *pair) {
	for len(p.micros) > 0 {
		m.evictMicro(p.micros[len(p.micros)-1])
	}
	if err := m.prog.DeletePair(p.key); err != nil {
		m.fail(err)
	}
	delete(m.pairs, p.key)
	m.die(p.flow.Slot, p)
}
