package rules

import (
	"math/bits"
)

// builder is the state of one Compile: the groups of entries by mask and
// the scratch space of expand.
type builder struct {
	groups map[packed]*group
	order  []*group
	maxPfx int
	exact  map[packed]int // entries per exact mask; nil: do not coarsen

	// Scratch space of expand, reused from rule to rule.
	entries []entry
	sp, dp  []portPrefix
}

// entry is one (mask, value) pair a rule adds to the table, with the port
// ranges left to check.
type entry struct {
	mask, val packed
	c         candidate
}

// expand returns the entries rule r adds to the table: one per connection
// state in its set and per prefix of each hashed port range. Port ranges
// with too many prefixes are left out of the mask and go into the
// candidate's range instead. The result is valid until the next call.
func (b *builder) expand(r *Rule, ports map[string]uint16) []entry {
	var base, baseMask packed
	m := &r.Match
	kfChain.put(&base, &baseMask, uint64(r.Chain), 0xff)
	if m.InPort != "" {
		kfIIf.put(&base, &baseMask, uint64(ports[m.InPort]), 0xffff)
	}
	if m.OutPort != "" {
		kfOIf.put(&base, &baseMask, uint64(ports[m.OutPort]), 0xffff)
	}
	if m.SrcMAC != nil {
		kfSrcMAC.put(&base, &baseMask, mac48((*[6]byte)(m.SrcMAC)), 1<<48-1)
	}
	if m.DstMAC != nil {
		kfDstMAC.put(&base, &baseMask, mac48((*[6]byte)(m.DstMAC)), 1<<48-1)
	}
	if e := m.effectiveEtherType(); e != 0 {
		kfEther.put(&base, &baseMask, uint64(e), 0xffff)
	}
	if m.VLAN != nil {
		kfVLAN.put(&base, &baseMask, 1<<15|uint64(*m.VLAN), 1<<15|0xfff)
	}
	if m.SrcIP.IsValid() {
		putPrefix(&base, &baseMask, 4, m.SrcIP)
	}
	if m.DstIP.IsValid() {
		putPrefix(&base, &baseMask, 6, m.DstIP)
	}
	if m.Proto != 0 {
		kfProto.put(&base, &baseMask, uint64(m.Proto), 0xff)
	}
	if m.TCPFlags.Mask != 0 {
		kfFlags.put(&base, &baseMask, uint64(m.TCPFlags.Value), uint64(m.TCPFlags.Mask))
	}
	if m.ICMPType != nil {
		kfICMPType.put(&base, &baseMask, uint64(*m.ICMPType), 0xff)
	}
	if m.ICMPCode != nil {
		kfICMPCode.put(&base, &baseMask, uint64(*m.ICMPCode), 0xff)
	}

	c := anyPorts
	b.sp = append(b.sp[:0], portPrefix{})
	b.dp = append(b.dp[:0], portPrefix{})
	if m.SrcPort != nil {
		if !b.portPrefixes(&b.sp, *m.SrcPort) {
			c.sLo, c.sHi = m.SrcPort.Lo, m.SrcPort.Hi
		}
	}
	if m.DstPort != nil {
		if !b.portPrefixes(&b.dp, *m.DstPort) {
			c.dLo, c.dHi = m.DstPort.Lo, m.DstPort.Hi
		}
	}
	var states [5]CtState // the rule's states, or a single 0 for "any"
	ns := 1
	if m.CtState != 0 {
		ns = 0
		for s := CtState(1); s <= CtUntracked; s <<= 1 {
			if m.CtState&s != 0 {
				states[ns] = s
				ns++
			}
		}
	}
	b.entries = b.entries[:0]
	for _, ct := range states[:ns] {
		for _, a := range b.sp {
			for _, d := range b.dp {
				e := entry{mask: baseMask, val: base, c: c}
				if ct != 0 {
					kfCt.put(&e.val, &e.mask, uint64(ct), 0xff)
				}
				kfSport.put(&e.val, &e.mask, uint64(a.val), a.mask())
				kfDport.put(&e.val, &e.mask, uint64(d.val), d.mask())
				if b.exact != nil && b.exact[e.mask] < coarseBelow {
					e.coarsen()
				}
				b.entries = append(b.entries, e)
			}
		}
	}
	return b.entries
}

// Rare masks: a mask with fewer than coarseBelow entries does not get a
// subtable of its own when its address prefixes are not multiples of
// coarseStep long. Its entries go to the subtable of the mask with the
// prefixes cut down to a multiple of coarseStep, and their exact address
// bits are checked after the hash hit (the idea of TupleMerge). Random
// prefix lengths would otherwise make one subtable per combination of
// lengths; popular masks (per-host lists, blocklists) keep their exact
// subtable and need no check.
const (
	coarseBelow = 64
	coarseStep  = 8
)

// coarsen cuts e's address prefixes down to multiples of coarseStep,
// moving the exact address mask into the candidate.
func (e *entry) coarsen() {
	var m, v [4]uint64
	copy(m[:], e.mask[4:8])
	copy(v[:], e.val[4:8])
	changed := false
	for _, w := range [2]int{4, 6} {
		n := bits.OnesCount64(e.mask[w]) + bits.OnesCount64(e.mask[w+1])
		c := n / coarseStep * coarseStep
		if c == n {
			continue
		}
		changed = true
		hi, lo := prefixMask(c)
		e.mask[w], e.mask[w+1] = hi, lo
		e.val[w] &= hi
		e.val[w+1] &= lo
	}
	if changed {
		e.c.amask, e.c.aval = m, v
	}
}

// anyPorts is the candidate range of a rule without range checks.
var anyPorts = candidate{sLo: 0, sHi: 0xffff, dLo: 0, dHi: 0xffff}

// checked reports whether c has conditions beyond its subtable's mask.
func (c *candidate) checked() bool {
	return c.sLo != 0 || c.sHi != 0xffff || c.dLo != 0 || c.dHi != 0xffff || c.amask != [4]uint64{}
}

// portPrefix is a block of ports sharing the top bits bits of val.
type portPrefix struct {
	val  uint16
	bits uint8
}

func (p portPrefix) mask() uint64 {
	if p.bits == 0 {
		return 0
	}
	return uint64(0xffff) << (16 - p.bits) & 0xffff
}

// portPrefixes replaces *out with r split into aligned blocks and reports
// true, or leaves *out as it is and reports false when r takes more than
// b.maxPfx blocks.
func (b *builder) portPrefixes(out *[]portPrefix, r PortRange) bool {
	n := 0
	lo, hi := uint32(r.Lo), uint32(r.Hi)
	for l := lo; l <= hi; n++ {
		if n == b.maxPfx {
			return false
		}
		l += blockAt(l, hi)
	}
	*out = (*out)[:0]
	for lo <= hi {
		size := blockAt(lo, hi)
		*out = append(*out, portPrefix{val: uint16(lo), bits: uint8(16 - bits.TrailingZeros32(size))})
		lo += size
	}
	return true
}

// blockAt returns the size of the largest aligned block of ports that
// starts at lo and ends at or before hi.
func blockAt(lo, hi uint32) uint32 {
	size := uint32(1 << 16)
	if lo != 0 {
		size = lo & -lo
	}
	for size > hi-lo+1 {
		size >>= 1
	}
	return size
}
