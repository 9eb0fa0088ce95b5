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

// cmpPacked orders masks for deterministic output.
func cmpPacked(a, b *packed) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}
