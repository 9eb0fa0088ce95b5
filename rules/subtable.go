package rules

import (
	"cmp"
	"math/bits"
	"slices"
)

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
