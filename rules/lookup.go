package rules

import (
	"math"
	"math/bits"
)

// Hashing: each word is mixed on its own with a 64x64->128 bit multiply
// (the wyhash mixer) keyed by its position, and the results are xored, so
// the multiplies of one key run in parallel. The slot is the high half of
// hash*nslots, so tables need not be a power of two in size. Lookups never
// insert, so the probe length of any key is bounded by the table's
// clusters, which only the rules decide: there is nothing for crafted
// packets to flood.
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

// home returns the first slot to probe for masked key k, and its tag.
func (st *subtable) home(k *[8]uint64) (uint64, uint8) {
	h := hashWords(k, int(st.nw))
	i, _ := bits.Mul64(h, st.nslots)
	return i, tagOf(h)
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

// lookupPacked probes the subtables that can match p's class (see
// dispatch.go) in order of their best rule and stops as soon as the best
// match found beats every rule of the next subtable.
// It returns the meta word of the winning entry, 0 for no match.
//
// Per subtable it masks the key's words and checks each against the
// subtable's filter, most selective first (most subtables end here); only
// then does it hash them and touch the hash table.
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
		if pf.filter[0]&(1<<fold(p[pf.word[0]&7]&pf.mask[0])) == 0 ||
			pf.filter[1]&(1<<fold(p[pf.word[1]&7]&pf.mask[1])) == 0 {
			continue
		}
		st := &t.subs[si]
		nw := int(st.nw)
		for _, j := range st.forder[:nw] {
			j &= 7
			v := p[st.widx[j]&7] & st.mask[j]
			if st.filter[j]&(1<<fold(v&st.fmask[j])) == 0 {
				continue subtables
			}
			k[j] = v
		}
		h := hashWords(&k, nw)
		if m := st.probe(&k, h, p, best); m != 0 && metaRule(m) < best {
			best, bestMeta = metaRule(m), m
		}
	}
	return bestMeta
}

// probe looks up the masked key k (hash h) in st and returns the meta word
// of its best rule that beats best, or 0.
func (st *subtable) probe(k *[8]uint64, h uint64, p *packed, best int32) uint64 {
	nw := int(st.nw)
	i, _ := bits.Mul64(h, st.nslots)
	tag := tagOf(h)
	tags := st.tags
	for {
		t := tags[i]
		if t == 0 {
			return 0
		}
		if t == tag {
			base := i * uint64(nw+1)
			slot := st.slots[base : base+uint64(nw+1)]
			if keyEqual(slot[:nw], k) {
				if !st.checked {
					return slot[nw]
				}
				return st.scan(slot[nw], p, best)
			}
		}
		if i++; i == uint64(len(tags)) {
			i = 0
		}
	}
}

// tagOf is the byte kept per slot: seven hash bits (not those that chose
// the slot) and a set top bit; 0 marks an empty slot. Most probes of a
// lookup are misses, and the tags settle them without touching the keys.
func tagOf(h uint64) uint8 { return uint8(h) | 0x80 }

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
