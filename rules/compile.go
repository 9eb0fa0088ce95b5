package rules

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"
)

// Options are what Compile needs besides the rules.
type Options struct {
	// Ports maps the port names used by iif/oif to the small integer ids
	// the dataplane puts into Key.InPort/OutPort.
	Ports map[string]uint16
	// MaxRangePrefixes bounds how many prefixes a port range may split into
	// to be hashed (each prefix length is one more mask, so one more
	// subtable). Longer ranges are checked after the hash lookup instead, in
	// a per-entry list ordered by priority. 0 means DefaultMaxRangePrefixes.
	MaxRangePrefixes int
}

// DefaultMaxRangePrefixes is the default for Options.MaxRangePrefixes.
const DefaultMaxRangePrefixes = 4

// generation numbers tables; every compiled table has a distinct one.
var generation atomic.Uint64

// Table is a compiled, immutable rule set: tuple space search over hash
// subtables, one per distinct mask (rare masks share coarser ones, see
// coarseBelow). A lookup visits only the subtables of the key's class
// (dispatch.go), rejects most of them with a small filter (prefilter) and
// probes the rest in order of their best rule. It is safe for concurrent
// lookups.
type Table struct {
	gen    uint64
	rules  []Rule
	policy [numChains]Action
	subs   []subtable
	// pre[i] has the filters of subs[i], kept apart so that the subtables
	// a lookup rejects cost a few reads of a small array.
	pre []prefilter
	// classes[c] is the range of classList holding the subtables a key of
	// class c (see classOf) can match.
	classes   [numClasses][2]uint32
	classList []uint32
	// ports are the port ids of Options.Ports (UniformVerdict).
	ports map[string]uint16
}

// subtable holds the entries of one mask in an open-addressing hash table
// of groups of groupSlots slots (see lookup.go).
//
// The mask bits on which all entries agree (constant bits: the chain,
// the family, the /8 of an address list, the interface of a per-interface
// list) are checked by the prefilter and not stored. The other bits
// (varying bits) are gathered by ops into nk compact key words, usually
// one: a slot is its compact key followed by a meta word, the verdict of
// the best rule for that key (see metaOf), or, in a checked subtable, the
// position of its candidate list. Small slots keep more of a large table
// in cache, and hashing one word is cheaper than hashing the mask's words.
type subtable struct {
	// Hot: what a lookup reads after the prefilter, in the first lines.
	minRule int32 // best (lowest) rule index of any entry: probe order
	checked bool  // entries carry conditions to check after the hash hit
	nk      uint8 // compact key words
	nops    uint8
	// kbits is the number of bits of the compact key (the varying bits'
	// spans). Narrow subtables have one-word slots: the compact key in the
	// low kbits bits, above it the meta word squeezed into
	// rbits+metaHighBits bits (see narrowOf). Lists of addresses, with or
	// without a port, mostly fit.
	narrow bool
	rbits  uint8
	kbits  uint16
	// nfilter is how many filters after the prefilter's two are worth
	// checking (ops[2:2+nfilter]): a filter with every bit set rejects
	// nothing.
	nfilter uint8
	// nextra is the number of constant words left to check after the
	// prefilter's: p[xw[i]]&xmask[i] == xval[i].
	nextra  uint8
	ngroups uint64
	// groups has one word per group: byte i is the tag of slot i of the
	// group (0 empty, else tagOf(hash)).
	groups []uint64
	slots  []uint64 // ngroups * groupSlots * stride()
	// ops has one op per packed word with varying bits, the most
	// selective filter first.
	ops         [8]keyOp
	cands       []candidate
	xw          [8 - prefilterWords]uint8
	xmask, xval [8 - prefilterWords]uint64

	// Cold: for building, dispatch and Describe.
	cmask, cval packed   // constant bits and their values
	classes     classSet // the entries' chain, ct, family and protocol classes
	full        packed   // the whole mask
	entries     int
}

// keyOp moves the varying bits of packed word src (mask) to compact key
// word dst: k[dst] |= p[src]&mask >> rsh << lsh. Its filter has bit
// fold(p[src]&mask) set for every entry: a key whose bit is clear matches
// none, and the subtable is skipped before hashing. Words with few
// distinct values (a port, a small list of addresses) reject most keys.
type keyOp struct {
	src, dst, rsh, lsh uint8
	mask, filter       uint64
}

// compact sets k[:st.nk] to the compact key of packed key p.
func (st *subtable) compact(p *packed, k *[8]uint64) {
	for j := range st.nk & 7 {
		k[j] = 0
	}
	for _, op := range st.ops[:st.nops&7] {
		k[op.dst&7] |= p[op.src&7] & op.mask >> op.rsh << op.lsh
	}
}

// prefilter is what a lookup checks first, two cache lines per subtable,
// the first of which rejects most keys: the subtable's best rule and three
// constant words, those with the most constant bits first (a key matches
// no entry unless p[cw[i]]&cmask[i] == cval[i]). The second has one more
// constant word and the two most selective filters (see keyOp; all bits
// set when unused). The subtable has the other constant words and filters.
//
// A subtable of a single key (typically of a single rule: hand-written
// rule sets are mostly such) needs no probe once the prefilter has checked
// all its bits: meta is then its verdict, else 0.
type prefilter struct {
	minRule int32
	cw      [prefilterWords]uint8
	fw      [2]uint8
	cmask   [3]uint64
	cval    [3]uint64

	fmask, filter [2]uint64
	cmask3, cval3 uint64
	meta          uint64
	_             [8]byte // two cache lines
}

// prefilterWords is how many constant words a prefilter holds.
const prefilterWords = 4

// candidate is one rule of an entry of a checked subtable, with the
// conditions its subtable's mask does not cover: port ranges and exact
// address bits. The list of an entry is ordered by rule index.
type candidate struct {
	meta               uint64
	sLo, sHi, dLo, dHi uint16
	// amask and aval are the address words (packed words 4..7) of the
	// rule's exact mask when the subtable hashes shorter prefixes.
	amask, aval [4]uint64
}

// Meta words: bits 0..31 the rule index + 1 (0 marks an empty slot),
// 32..39 the action, 40 counter, 41 log.
const (
	metaCounter  = 1 << 40
	metaLog      = 1 << 41
	metaHighBits = 10 // bits above the rule index
)

func metaOf(r *Rule, i int) uint64 {
	m := uint64(i+1) | uint64(r.Action)<<32
	if r.Counter {
		m |= metaCounter
	}
	if r.Log {
		m |= metaLog
	}
	return m
}

func metaRule(m uint64) int32 { return int32(uint32(m)) - 1 }

func (t *Table) verdict(m uint64, c Chain) Verdict { return metaVerdict(m, &t.policy, c) }

// metaVerdict decodes a meta word, or the policy of chain c for 0.
func metaVerdict(m uint64, policy *[numChains]Action, c Chain) Verdict {
	if m == 0 {
		if c < numChains {
			return Verdict{Rule: -1, Action: policy[c]}
		}
		return Verdict{Rule: -1, Action: Drop}
	}
	return Verdict{Rule: metaRule(m), Action: Action(m >> 32), Counter: m&metaCounter != 0, Log: m&metaLog != 0}
}

// Generation is the table's unique number (flow caches use it to tell
// tables apart).
func (t *Table) Generation() uint64 { return t.gen }

// Rules returns the table's rules; index i is Verdict.Rule i. The caller
// must not modify them.
func (t *Table) Rules() []Rule { return t.rules }

// Policy returns the policy of chain c.
func (t *Table) Policy(c Chain) Action {
	if c < numChains {
		return t.policy[c]
	}
	return Drop
}

// Subtables returns the number of hash subtables (distinct masks).
func (t *Table) Subtables() int { return len(t.subs) }

// Sizes of a subtable's fixed part and of a candidate, for Size.
const (
	subtableOverhead = int(unsafe.Sizeof(subtable{}))
	candidateSize    = 80
)

// Size returns the approximate memory the compiled structure uses, in
// bytes, not counting the rules themselves.
func (t *Table) Size() int {
	n := 0
	for i := range t.subs {
		st := &t.subs[i]
		n += len(st.groups)*8 + len(st.slots)*8 + len(st.cands)*candidateSize + subtableOverhead
	}
	return n + len(t.pre)*int(unsafe.Sizeof(prefilter{})) + len(t.classList)*4 + numClasses*8
}

// Compile validates rs and builds its table. rs must not be modified
// afterwards: the table keeps its rules. The error is an ErrorList.
func Compile(rs *Ruleset, opts Options) (*Table, error) {
	if err := Validate(rs); err != nil {
		return nil, err
	}
	if err := checkPorts(rs, opts.Ports); err != nil {
		return nil, err
	}
	maxPfx := opts.MaxRangePrefixes
	if maxPfx <= 0 {
		maxPfx = DefaultMaxRangePrefixes
	}
	t := &Table{gen: generation.Add(1), rules: rs.Rules, ports: opts.Ports}
	for c := range numChains {
		t.policy[c] = rs.PolicyFor(c)
	}

	// Pass 1: count the entries of each exact mask, then of each mask
	// after coarsening the rare ones.
	b := &builder{groups: map[packed]*group{}, maxPfx: maxPfx}
	exact := map[packed]int{}
	for i := range rs.Rules {
		for _, e := range b.expand(&rs.Rules[i], opts.Ports) {
			exact[e.mask]++
		}
	}
	b.exact = exact
	for i := range rs.Rules {
		for _, e := range b.expand(&rs.Rules[i], opts.Ports) {
			g := b.groups[e.mask]
			if g == nil {
				g = &group{mask: e.mask, minRule: int32(i), first: e.val}
				b.groups[e.mask] = g
				b.order = append(b.order, g)
			}
			g.n++
			for w := range g.vary {
				g.vary[w] |= e.val[w] ^ g.first[w]
			}
			g.checked = g.checked || e.c.checked()
		}
	}
	t.subs = make([]subtable, len(b.order))
	for gi, g := range b.order {
		g.st = &t.subs[gi]
		g.st.init(g, uint8(bits.Len(uint(len(rs.Rules)))))
	}
	// Pass 2: insert.
	for i := range rs.Rules {
		meta := metaOf(&rs.Rules[i], i)
		for _, e := range b.expand(&rs.Rules[i], opts.Ports) {
			e.c.meta = meta
			b.groups[e.mask].insert(&e.val, &e.c)
		}
	}
	for _, g := range b.order {
		g.finish()
	}
	slices.SortFunc(t.subs, func(a, b subtable) int {
		if c := cmp.Compare(a.minRule, b.minRule); c != 0 {
			return c
		}
		return cmpPacked(&a.full, &b.full)
	})
	t.pre = make([]prefilter, len(t.subs))
	for i := range t.subs {
		t.pre[i] = t.subs[i].prefilter()
	}
	t.buildDispatch()
	return t, nil
}

// checkPorts reports port names that ports does not know.
func checkPorts(rs *Ruleset, ports map[string]uint16) error {
	var errs ErrorList
	check := func(r *Rule, i int, f field, name string) {
		if _, ok := ports[name]; name != "" && !ok && len(errs) < maxErrors {
			errs = append(errs, ruleError(r, i, f, fmt.Sprintf("%s: unknown port %q (ports: %s)",
				fieldJSON[f], name, strings.Join(slices.Sorted(maps.Keys(ports)), ", "))))
		}
	}
	for i := range rs.Rules {
		r := &rs.Rules[i]
		check(r, i, fInPort, r.InPort)
		check(r, i, fOutPort, r.OutPort)
	}
	return errs.err()
}

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

// group collects the entries of one mask while the table is built.
type group struct {
	mask    packed
	minRule int32
	n       int // entries (upper bound on distinct keys)
	checked bool
	st      *subtable
	// first is the value of the first entry, and vary has the bits on
	// which some entry differs from it.
	first, vary packed

	// Ranged groups collect candidates per slot as linked lists first.
	pending []candidate
	next    []int32 // next candidate of the same slot, -1 ends
	tail    map[uint64]int32
}

func (g *group) insert(val *packed, c *candidate) {
	st := g.st
	var k [8]uint64
	st.compact(val, &k)
	h := hashWords(&k, int(st.nk))
	tag := tagOf(h)
	var i uint64 // the slot of k
	for gi, _ := bits.Mul64(h, st.ngroups); ; {
		w := st.groups[gi]
		found := false
		for m := matchByte(w, tag); m != 0 && !found; m &= m - 1 {
			i = gi*groupSlots + uint64(bits.TrailingZeros64(m))>>3
			found = st.keyAt(i, &k)
		}
		if found {
			if !st.checked {
				return // an earlier rule already decides this key
			}
			break
		}
		if e := matchEmpty(w); e != 0 {
			b := uint64(bits.TrailingZeros64(e)) >> 3
			st.groups[gi] |= tag << (8 * b)
			i = gi*groupSlots + b
			break
		}
		if gi++; gi == st.ngroups {
			gi = 0
		}
	}
	st.entries++
	st.classes.add(st.full[0], val[0])
	for j := range st.ops[:st.nops] {
		op := &st.ops[j]
		op.filter |= 1 << fold(val[op.src]&op.mask)
	}
	if !st.checked {
		st.setSlot(i, &k, c.meta)
		return
	}
	// Ranged: append c to the slot's list; the meta word temporarily
	// holds the index of the list's first candidate + 1.
	idx := int32(len(g.pending))
	g.pending = append(g.pending, *c)
	g.next = append(g.next, -1)
	if m := st.metaAt(i); m == 0 {
		st.setSlot(i, &k, uint64(idx)+1)
		g.tail[i] = idx
	} else {
		g.next[g.tail[i]] = idx
		g.tail[i] = idx
		st.entries--
	}
}

// stride is the number of words per slot.
func (st *subtable) stride() uint64 {
	if st.narrow {
		return 1
	}
	return uint64(st.nk) + 1
}

// keyAt reports whether slot i holds compact key k.
func (st *subtable) keyAt(i uint64, k *[8]uint64) bool {
	if st.narrow {
		return st.slots[i]&(1<<st.kbits-1) == k[0]
	}
	n := uint64(st.nk)
	return slices.Equal(st.slots[i*(n+1):i*(n+1)+n], k[:n])
}

// metaAt returns the meta word of slot i.
func (st *subtable) metaAt(i uint64) uint64 {
	if st.narrow {
		return narrowMeta(st.slots[i]>>st.kbits, st.rbits)
	}
	n := uint64(st.nk)
	return st.slots[i*(n+1)+n]
}

// setSlot stores compact key k and meta in slot i.
func (st *subtable) setSlot(i uint64, k *[8]uint64, meta uint64) {
	if st.narrow {
		st.slots[i] = k[0] | narrowOf(meta, st.rbits)<<st.kbits
		return
	}
	n := uint64(st.nk)
	copy(st.slots[i*(n+1):], k[:n])
	st.slots[i*(n+1)+n] = meta
}

// narrowOf squeezes meta word m, whose rule index + 1 takes at most rbits
// bits, into rbits+metaHighBits bits for a narrow slot.
func narrowOf(m uint64, rbits uint8) uint64 { return m&0xffffffff | m>>32<<rbits }

// narrowMeta is the inverse of narrowOf.
func narrowMeta(m uint64, rbits uint8) uint64 { return m&(1<<rbits-1) | m>>rbits<<32 }

// finish orders the filter words and lays out the candidate lists of a
// checked group contiguously.
func (g *group) finish() {
	st := g.st
	// Fewer filter bits reject more keys.
	slices.SortStableFunc(st.ops[:st.nops], func(a, b keyOp) int {
		return cmp.Compare(bits.OnesCount64(a.filter), bits.OnesCount64(b.filter))
	})
	for _, op := range st.ops[min(2, st.nops):st.nops] {
		if op.filter == ^uint64(0) {
			break
		}
		st.nfilter++
	}
	if !st.checked {
		return
	}
	st.cands = make([]candidate, 0, len(g.pending))
	stride := st.stride()
	for i := uint64(0); i < st.ngroups*groupSlots; i++ {
		m := &st.slots[i*stride+stride-1]
		if *m == 0 {
			continue
		}
		start := len(st.cands)
		for c := int32(*m - 1); c >= 0; c = g.next[c] {
			st.cands = append(st.cands, g.pending[c])
		}
		*m = uint64(start)<<32 | uint64(len(st.cands)-start)
	}
	g.pending, g.next, g.tail = nil, nil, nil
}

// constWords returns the packed words with constant bits, those with the
// most constant bits besides the class fields (which dispatch has narrowed
// down already) first.
func (st *subtable) constWords() []int {
	var cw []int
	for w := range st.cmask {
		if st.cmask[w] != 0 {
			cw = append(cw, w)
		}
	}
	score := func(w int) int {
		m := st.cmask[w]
		if w == 0 {
			m &^= kfChain.ones() | kfCt.ones() | kfEther.ones() | kfProto.ones()
		}
		return bits.OnesCount64(m)
	}
	slices.SortStableFunc(cw, func(a, b int) int { return cmp.Compare(score(b), score(a)) })
	return cw
}

// prefilter returns st's prefilter: its first constant words and filters.
func (st *subtable) prefilter() prefilter {
	pf := prefilter{minRule: st.minRule, filter: [2]uint64{^uint64(0), ^uint64(0)}}
	for i, w := range st.constWords() {
		switch {
		case i < 3:
			pf.cw[i], pf.cmask[i], pf.cval[i] = uint8(w), st.cmask[w], st.cval[w]
		case i < prefilterWords:
			pf.cw[i], pf.cmask3, pf.cval3 = uint8(w), st.cmask[w], st.cval[w]
		}
	}
	for i := range min(2, int(st.nops)) {
		op := &st.ops[i]
		pf.fw[i], pf.fmask[i], pf.filter[i] = op.src, op.mask, op.filter
	}
	if st.nk == 0 && !st.checked && st.nextra == 0 {
		pf.meta = st.metaAt(0) // the only slot: the group is empty but for it
	}
	return pf
}

func (st *subtable) init(g *group, rbits uint8) {
	st.minRule = g.minRule
	st.full = g.mask
	st.classes.init(&g.mask)
	st.checked = g.checked
	// Gather each word's varying bits, from the lowest to the highest, into
	// the compact key words, as many words' spans as fit into one.
	used := 64
	for w, m := range g.mask {
		st.cmask[w] = m &^ g.vary[w]
		st.cval[w] = g.first[w] & st.cmask[w]
		v := m & g.vary[w]
		if v == 0 {
			continue
		}
		lo := bits.TrailingZeros64(v)
		span := 64 - bits.LeadingZeros64(v) - lo
		if used+span > 64 {
			st.nk++
			used = 0
		}
		st.ops[st.nops] = keyOp{src: uint8(w), dst: st.nk - 1, rsh: uint8(lo), lsh: uint8(used), mask: v}
		st.nops++
		used += span
		st.kbits += uint16(span)
	}
	cw := st.constWords()
	for _, w := range cw[min(len(cw), prefilterWords):] {
		st.xw[st.nextra] = uint8(w)
		st.xmask[st.nextra], st.xval[st.nextra] = st.cmask[w], st.cval[w]
		st.nextra++
	}
	if st.nk == 1 && !st.checked && used+int(rbits)+metaHighBits <= 64 {
		st.narrow, st.rbits = true, rbits
	}
	// Load factor at most 3/4 (g.n counts duplicate keys too): most
	// groups have an empty slot, which ends a miss in the home group.
	st.ngroups = uint64(g.n/maxGroupLoad + 1)
	st.slots = make([]uint64, st.ngroups*groupSlots*st.stride())
	st.groups = make([]uint64, st.ngroups)
	if st.checked {
		g.tail = map[uint64]int32{}
	}
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

// cmpPacked orders masks for deterministic output.
func cmpPacked(a, b *packed) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}
