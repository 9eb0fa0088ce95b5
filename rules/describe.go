package rules

import (
	"fmt"
	"math/bits"
	"strings"
)

// Describe returns a readable description of the compiled structure: the
// subtables in probe order with their masks, sizes, slot widths (in words)
// and compact key widths (the mask bits on which entries differ). The
// generation is left out so that the output is reproducible.
func (t *Table) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rules %d, subtables %d\n", len(t.rules), len(t.subs))
	fmt.Fprintf(&b, "policy")
	for _, c := range chainOrder {
		fmt.Fprintf(&b, " %s=%s", c, t.policy[c])
	}
	b.WriteByte('\n')
	for i := range t.subs {
		st := &t.subs[i]
		kind := "exact"
		if st.checked {
			kind = fmt.Sprintf("checked(%d candidates)", len(st.cands))
		}
		fmt.Fprintf(&b, "%d: first rule %d, %d entries, %d slots of %d, key %d bits, %s: %s\n",
			i, st.minRule, st.entries, st.ngroups*groupSlots, st.stride(), st.kbits, kind, describeMask(&st.full))
	}
	return b.String()
}

// describeMask names the fields a mask covers: "chain ethertype saddr/24
// dport/6". Partial masks of non-prefix fields show the mask bits.
func describeMask(m *packed) string {
	var parts []string
	for i := 0; i < len(keyFields); i++ {
		f := &keyFields[i]
		v := m[f.word] & f.ones() >> f.shift
		width := int(f.width)
		if f.name == "saddr" || f.name == "daddr" {
			// 128-bit address: this word and the next.
			lo := m[f.word+1]
			i++
			if v == 0 && lo == 0 {
				continue
			}
			// IPv4 and IPv6 prefixes of one length share a mask.
			parts = append(parts, fmt.Sprintf("%s/%d", f.name, bits.OnesCount64(v)+bits.OnesCount64(lo)))
			continue
		}
		if v == 0 {
			continue
		}
		full := uint64(1)<<width - 1
		if f.name == "vlan" {
			full = 1<<15 | 0xfff
		}
		switch {
		case v == full:
			parts = append(parts, f.name)
		case f.prefixMasked && bits.LeadingZeros64(^(v<<(64-width))) == bits.OnesCount64(v):
			parts = append(parts, fmt.Sprintf("%s/%d", f.name, bits.OnesCount64(v)))
		default:
			parts = append(parts, fmt.Sprintf("%s&0x%x", f.name, v))
		}
	}
	return strings.Join(parts, " ")
}
