package rules

import (
	"math"
	"math/bits"
)

// Hashing: each word is mixed on its own with a 64x64->128 bit multiply
// (the wyhash mixer) keyed by its position, and the results are xored, so
// the multiplies of one key run in parallel. Subtables hash compact keys,
// mostly of one word. The home group is the high half of hash*ngroups, so
// tables need not be a power of two in size. Lookups never insert, so the
// probe length of any key is bounded by the table's full groups, which
// only the rules decide: there is nothing for crafted packets to flood.
const hashMul = 0xa0761d6478bd642f

var hashSeeds = [8]uint64{
	0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89,
	0x452821e638d01377, 0xbe5466cf34e90c6c, 0xc0ac29b7c97c50dd, 0x3f84d5b5b5470917,
}

func mix(v uint64, j int) uint64 {
	hi, lo := bits.Mul64(v^hashSeeds[j&7], hashMul)
	return hi ^ lo
}

func hashWords(k *[8]uint64, nw int) uint64 {
	var h uint64
	for j := 0; j < nw && j < len(k); j++ {
		h ^= mix(k[j], j)
	}
	return h
}

// fold maps a word to a bit of a subtable filter.
func fold(v uint64) uint64 { return (v * 0x9e3779b97f4a7c15) >> 58 }

// noRule is "no match yet": worse than any rule index.
const noRule = math.MaxInt32

// Lookup returns the verdict of the first rule (lowest index) of k.Chain
// that matches k, or the chain's policy. It does not allocate.
func (t *Table) Lookup(k *Key) Verdict {
	var p packed
	k.pack(&p)
	return t.verdict(t.lookupPacked(&p), k.Chain)
}

// Subtable groups: a subtable's slots come in groups of groupSlots, and
// the tags of a group's slots share one word, so that a lookup tests a whole
// group with a few word operations (SWAR) after one load from an array of
// one byte per slot, small enough to stay in cache: most probes are misses,
// and most misses end there. A key's home group is the high half of
// hash*ngroups (tables need not be a power of two in size); it lives in
// the first group from there that has room, and a lookup goes on to the
// next group only while the current one is full.
const (
	groupSlots   = 8
	maxGroupLoad = 6 // entries per group at most, on average
	lsb8         = 0x0101010101010101
	msb8         = 0x8080808080808080
)

// tagOf is a slot's tag byte: the low eight hash bits (not those that
// choose the group), 0 moved to 1 since 0 marks an empty slot.
func tagOf(h uint64) uint64 {
	t := h & 0xff
	return t + (t-1)>>63
}

// matchByte has the top bit of byte i set when byte i of w is tag, and
// maybe of some bytes above a match (a borrow): callers compare the keys.
func matchByte(w, tag uint64) uint64 {
	x := w ^ tag*lsb8
	return (x - lsb8) &^ x & msb8
}

// matchEmpty is nonzero when w has an empty (zero) byte; its lowest set
// bit is the top bit of the first one.
func matchEmpty(w uint64) uint64 { return (w - lsb8) &^ w & msb8 }

// lookupPacked probes the subtables that can match p's class (see
// dispatch.go) in order of their best rule and stops as soon as the best
// match found beats every rule of the next subtable.
// It returns the meta word of the winning entry, 0 for no match.
//
// Per subtable it checks the key against the prefilter: the mask's
// constant bits (which decide a subtable of a single key), then the two
// most selective filters; most subtables end here. Then it gathers and
// hashes the compact key. The home group's tags settle most of the
// remaining misses; only a tag match compares keys.
func (t *Table) lookupPacked(p *packed) uint64 {
	best := int32(noRule)
	var bestMeta uint64
	var k [8]uint64
	class := &t.classes[classOf(p[0])]
	list := t.classList[class[0]:class[1]]
subtables:
	for _, si := range list {
		pf := &t.pre[si]
		if pf.minRule >= best {
			break
		}
		if (p[pf.cw[0]&7]&pf.cmask[0]^pf.cval[0])|(p[pf.cw[1]&7]&pf.cmask[1]^pf.cval[1])|
			(p[pf.cw[2]&7]&pf.cmask[2]^pf.cval[2]) != 0 {
			continue
		}
		if p[pf.cw[3]&7]&pf.cmask3 != pf.cval3 {
			continue
		}
		if pf.meta != 0 { // the subtable's only key, and its rule beats best
			best, bestMeta = metaRule(pf.meta), pf.meta
			continue
		}
		if pf.filter[0]&(1<<fold(p[pf.fw[0]&7]&pf.fmask[0])) == 0 ||
			pf.filter[1]&(1<<fold(p[pf.fw[1]&7]&pf.fmask[1])) == 0 {
			continue
		}
		st := &t.subs[si]
		for _, op := range st.ops[2 : 2+st.nfilter] {
			if op.filter&(1<<fold(p[op.src&7]&op.mask)) == 0 {
				continue subtables
			}
		}
		for x := range st.nextra {
			if p[st.xw[x]&7]&st.xmask[x] != st.xval[x] {
				continue subtables
			}
		}
		st.compact(p, &k)
		h := hashWords(&k, int(st.nk))
		g, _ := bits.Mul64(h, st.ngroups)
		w := st.groups[g]
		tag := tagOf(h)
		m := matchByte(w, tag)
		if m == 0 && matchEmpty(w) != 0 {
			continue // a miss in its home group
		}
		if meta := st.probe(&k, g, m, tag, p, best); meta != 0 && metaRule(meta) < best {
			best, bestMeta = metaRule(meta), meta
		}
	}
	return bestMeta
}

// probe looks up the compact key k in st, starting at its home group g
// whose tag matches are m, and returns the meta word of its best rule
// that beats best, or 0.
func (st *subtable) probe(k *[8]uint64, g, m, tag uint64, p *packed, best int32) uint64 {
	for {
		for ; m != 0; m &= m - 1 {
			i := g*groupSlots + uint64(bits.TrailingZeros64(m))>>3
			if st.narrow {
				if s := st.slots[i]; s&(1<<st.kbits-1) == k[0] {
					return narrowMeta(s>>st.kbits, st.rbits)
				}
				continue
			}
			nk := uint64(st.nk)
			slot := st.slots[i*(nk+1) : (i+1)*(nk+1)]
			if keyEqual(slot[:nk], k) {
				if !st.checked {
					return slot[nk]
				}
				return st.scan(slot[nk], p, best)
			}
		}
		if matchEmpty(st.groups[g]) != 0 {
			return 0
		}
		if g++; g == st.ngroups {
			g = 0
		}
		m = matchByte(st.groups[g], tag)
	}
}

func keyEqual(a []uint64, k *[8]uint64) bool {
	for j, w := range a {
		if w != k[j&7] {
			return false
		}
	}
	return true
}

// scan walks the candidate list of an entry of a checked subtable.
func (st *subtable) scan(meta uint64, p *packed, best int32) uint64 {
	sport, dport := uint16(p[1]>>48), uint16(p[0])
	start, n := meta>>32, meta&0xffffffff
	for _, c := range st.cands[start : start+n] {
		if metaRule(c.meta) >= best {
			return 0
		}
		if sport-c.sLo <= c.sHi-c.sLo && dport-c.dLo <= c.dHi-c.dLo &&
			p[4]&c.amask[0] == c.aval[0] && p[5]&c.amask[1] == c.aval[1] &&
			p[6]&c.amask[2] == c.aval[2] && p[7]&c.amask[3] == c.aval[3] {
			return c.meta
		}
	}
	return 0
}
