package rules

// Fields is a set of Key fields.
type Fields uint32

// The fields of a Key, for UniformVerdict and Uses.
const (
	FieldInPort Fields = 1 << iota
	FieldOutPort
	FieldSrcMAC
	FieldDstMAC
	FieldVLAN // VLAN and Tagged
	FieldEtherType
	FieldSrcIP
	FieldDstIP
	FieldProto
	FieldSrcPort
	FieldDstPort
	FieldTCPFlags
	FieldICMP // ICMPType and ICMPCode
	FieldCtState
)

// L2Fields are the fields a bridged MAC pair fixes: ports, MACs, VLAN and
// the connection state (untracked in bridge mode).
const L2Fields = FieldInPort | FieldOutPort | FieldSrcMAC | FieldDstMAC | FieldVLAN | FieldCtState

// constrains returns the fields rule r matches on.
func (r *Rule) constrains() Fields {
	var f Fields
	m := &r.Match
	set := func(on bool, x Fields) {
		if on {
			f |= x
		}
	}
	set(m.InPort != "", FieldInPort)
	set(m.OutPort != "", FieldOutPort)
	set(m.SrcMAC != nil, FieldSrcMAC)
	set(m.DstMAC != nil, FieldDstMAC)
	set(m.VLAN != nil, FieldVLAN)
	set(m.effectiveEtherType() != 0, FieldEtherType)
	set(m.SrcIP.IsValid(), FieldSrcIP)
	set(m.DstIP.IsValid(), FieldDstIP)
	set(m.Proto != 0, FieldProto)
	set(m.SrcPort != nil, FieldSrcPort)
	set(m.DstPort != nil, FieldDstPort)
	set(m.TCPFlags.Mask != 0, FieldTCPFlags)
	set(m.ICMPType != nil || m.ICMPCode != nil, FieldICMP)
	set(m.CtState != 0, FieldCtState)
	return f
}

// matchesOn reports whether rule r's conditions on the fields in fixed
// hold for k (its other conditions are not looked at).
func (t *Table) matchesOn(r *Rule, k *Key, fixed Fields) bool {
	m := &r.Match
	port := func(name string, id uint16) bool { return name == "" || t.ports[name] == id }
	switch {
	case fixed&FieldInPort != 0 && !port(m.InPort, k.InPort),
		fixed&FieldOutPort != 0 && !port(m.OutPort, k.OutPort),
		fixed&FieldSrcMAC != 0 && m.SrcMAC != nil && [6]byte(*m.SrcMAC) != k.SrcMAC,
		fixed&FieldDstMAC != 0 && m.DstMAC != nil && [6]byte(*m.DstMAC) != k.DstMAC,
		fixed&FieldVLAN != 0 && m.VLAN != nil && (!k.Tagged || *m.VLAN != k.VLAN&0xfff),
		fixed&FieldCtState != 0 && m.CtState != 0 && (m.CtState&k.CtState == 0 || k.CtState&(k.CtState-1) != 0),
		fixed&FieldEtherType != 0 && m.effectiveEtherType() != 0 && m.effectiveEtherType() != k.EtherType,
		fixed&FieldSrcIP != 0 && m.SrcIP.IsValid() && !m.SrcIP.Contains(keyAddr(&k.SrcIP, m.SrcIP.Addr().Is4())),
		fixed&FieldDstIP != 0 && m.DstIP.IsValid() && !m.DstIP.Contains(keyAddr(&k.DstIP, m.DstIP.Addr().Is4())),
		fixed&FieldProto != 0 && m.Proto != 0 && m.Proto != k.Proto,
		fixed&FieldSrcPort != 0 && m.SrcPort != nil && (k.SrcPort < m.SrcPort.Lo || k.SrcPort > m.SrcPort.Hi),
		fixed&FieldDstPort != 0 && m.DstPort != nil && (k.DstPort < m.DstPort.Lo || k.DstPort > m.DstPort.Hi),
		fixed&FieldTCPFlags != 0 && k.TCPFlags&m.TCPFlags.Mask != m.TCPFlags.Value,
		fixed&FieldICMP != 0 && (m.ICMPType != nil && *m.ICMPType != k.ICMPType || m.ICMPCode != nil && *m.ICMPCode != k.ICMPCode):
		return false
	}
	return true
}

// UniformVerdict returns the verdict that every key agreeing with k on
// the fields in fixed (and on its chain) gets, and false when keys that
// agree on them can get different verdicts: when a rule that may match
// them (its conditions on fixed hold for k) also looks at another field
// before a rule decides. It walks the rules of k's chain in order (its
// cost grows with the rules; it is meant for installing flows, not per
// frame). The verdict carries the rule's index, action and flags like
// Lookup's.
func (t *Table) UniformVerdict(k *Key, fixed Fields) (Verdict, bool) {
	for i := range t.rules {
		r := &t.rules[i]
		if r.Chain != k.Chain || !t.matchesOn(r, k, fixed) {
			continue
		}
		if r.constrains()&^fixed != 0 {
			return Verdict{}, false
		}
		return metaVerdict(metaOf(r, i), &t.policy, k.Chain), true
	}
	return metaVerdict(0, &t.policy, k.Chain), true
}

// Uses reports whether a rule of chain c matches on a field of f.
func (t *Table) Uses(c Chain, f Fields) bool {
	for i := range t.rules {
		if t.rules[i].Chain == c && t.rules[i].constrains()&f != 0 {
			return true
		}
	}
	return false
}

// Count adds packets and bytes decided by verdict v of chain c (what
// Lookup returned for them, with the current table) to the worker's
// counters, with last as their last hit (Unix ns): for frames a fast path
// forwarded without looking them up one by one. A rule without the
// counter flag counts nothing. Only the worker may call it.
func (w *Worker) Count(c Chain, v Verdict, packets, bytes uint64, last int64) {
	if packets == 0 {
		return
	}
	b := w.sync()
	var e *counterEntry
	switch {
	case v.Rule < 0 && c < numChains:
		e = &w.policy[c]
	case v.Rule >= 0 && int(v.Rule) < len(b.slots) && b.slots[v.Rule] != 0:
		slot := b.slots[v.Rule] - 1
		e = &b.dirs[w.id][slot/chunkSize][slot%chunkSize]
	default:
		return
	}
	e.packets.Add(packets)
	e.bytes.Add(bytes)
	if e.last.Load() < last {
		e.last.Store(last)
	}
}
