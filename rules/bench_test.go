package rules

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
)

var benchSizes = []int{10, 1000, 10000, 100000}

const benchKeys = 4096

// benchKeySet returns keys of which 9 in 10 are built to match a random
// rule (some then perturbed) and the rest are random. Keys get connection
// state new unless their rule asks for another, as for the first packet of
// a connection (NAT mode looks up only those).
func benchKeySet(r *rand.Rand, rs *Ruleset) []Key {
	keys := make([]Key, benchKeys)
	for i := range keys {
		var rule *Rule
		if len(rs.Rules) > 0 && r.IntN(10) > 0 {
			rule = &rs.Rules[r.IntN(len(rs.Rules))]
		}
		keys[i] = randKey(r, rule)
		if rule == nil || rule.CtState == 0 {
			keys[i].CtState = CtNew
		}
		if rule == nil {
			keys[i].Chain = Forward
		}
	}
	return keys
}

// worstRuleset makes n rules with random field subsets and random prefix
// lengths: hundreds to thousands of distinct masks, i.e. of subtables.
func worstRuleset(r *rand.Rand, n int) *Ruleset {
	rs := &Ruleset{}
	seen := map[string]bool{}
	for len(rs.Rules) < n {
		var ru Rule
		if r.IntN(3) == 0 {
			ru.InPort = pick(r, poolPortNames)
		}
		if r.IntN(4) == 0 {
			ru.SrcMAC = &MAC{2, 0, 0, 0, byte(r.IntN(256)), byte(r.IntN(256))}
		}
		if r.IntN(5) == 0 {
			ru.VLAN = ptr(uint16(r.IntN(4096)))
		}
		// Every rule has at least one address of 16 bits or more, so that
		// no rule is general enough to shadow most others: a key built for
		// a rule deep in the list is decided there, after visiting every
		// subtable with an earlier rule.
		addrs := r.IntN(3) // 0: source, 1: destination, 2: both
		if addrs != 1 {
			ru.SrcIP = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), 16+r.IntN(17)).Masked()
		}
		if addrs != 0 {
			ru.DstIP = netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), 16+r.IntN(17)).Masked()
		}
		if r.IntN(2) == 0 {
			ru.Proto = pick(r, []Proto{ProtoTCP, ProtoUDP})
			if r.IntN(2) == 0 {
				p := uint16(r.IntN(65536))
				ru.DstPort = &PortRange{p, p}
			}
			if r.IntN(4) == 0 {
				p := uint16(r.IntN(65536))
				ru.SrcPort = &PortRange{p, p}
			}
		}
		if r.IntN(4) == 0 {
			ru.CtState = CtState(1 + r.IntN(int(ctAll)))
		}
		ru.Action = Action(1 + r.IntN(2))
		if s := ru.Match.String(); !seen[s] {
			seen[s] = true
			rs.Rules = append(rs.Rules, ru)
		}
	}
	return rs
}

func compileBench(b *testing.B, rs *Ruleset) *Table {
	b.Helper()
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		b.Fatal(err)
	}
	return tab
}

var sinkVerdict Verdict

// runLookups runs lookup over keys. Besides wall time it reports the
// thread's CPU time per lookup (cpu-ns/op), which stays meaningful when
// other processes compete for the cores.
func runLookups(b *testing.B, keys []Key, lookup func(*Key) Verdict) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	start := threadCPU()
	n := 0
	for ; b.Loop(); n++ {
		sinkVerdict = lookup(&keys[n&(benchKeys-1)])
	}
	if end := threadCPU(); start >= 0 && end >= 0 && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
}

// BenchmarkLookup measures the hashed table (no flow cache) on a
// realistic rule set: at most 16 masks.
func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			r := newRand(uint64(n))
			rs := realisticRuleset(r, n)
			tab := compileBench(b, rs)
			runLookups(b, benchKeySet(r, rs), tab.Lookup)
			b.ReportMetric(float64(tab.Subtables()), "subtables")
		})
	}
}

// BenchmarkLookupWorst measures the hashed table on random rules with
// many masks.
func BenchmarkLookupWorst(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			r := newRand(uint64(n))
			rs := worstRuleset(r, n)
			tab := compileBench(b, rs)
			runLookups(b, benchKeySet(r, rs), tab.Lookup)
			b.ReportMetric(float64(tab.Subtables()), "subtables")
		})
	}
}

// BenchmarkLookupLinear is the baseline: the linear walk on the realistic
// rule set of BenchmarkLookup.
func BenchmarkLookupLinear(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			r := newRand(uint64(n))
			rs := realisticRuleset(r, n)
			lin, err := NewLinear(rs, Options{Ports: testPorts})
			if err != nil {
				b.Fatal(err)
			}
			runLookups(b, benchKeySet(r, rs), lin.Lookup)
		})
	}
}

// BenchmarkLookupCached is BenchmarkLookup and BenchmarkLookupWorst behind
// a flow cache large enough for the key set (every key repeats: the
// steady state of long flows).
func BenchmarkLookupCached(b *testing.B) {
	for _, kind := range []string{"realistic", "worst"} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/rules=%d", kind, n), func(b *testing.B) {
				r := newRand(uint64(n))
				rs := realisticRuleset(r, n)
				if kind == "worst" {
					rs = worstRuleset(r, n)
				}
				tab := compileBench(b, rs)
				c := NewCache(4 * benchKeys)
				keys := benchKeySet(r, rs)
				for i := range keys {
					c.Lookup(tab, &keys[i]) // warm up: every key repeats
				}
				c.hits, c.misses = 0, 0
				runLookups(b, keys, func(k *Key) Verdict { return c.Lookup(tab, k) })
				hits, misses := c.Stats()
				b.ReportMetric(float64(hits)/float64(hits+misses)*100, "hit%")
			})
		}
	}
}

// BenchmarkWorkerLookup is the dataplane's whole per-frame call: current
// table, flow cache, counters.
func BenchmarkWorkerLookup(b *testing.B) {
	n := 10000
	r := newRand(uint64(n))
	rs := realisticRuleset(r, n)
	for i := range rs.Rules {
		rs.Rules[i].Counter = true
	}
	s := NewSet(SetOptions{Workers: 1, CacheSize: 4 * benchKeys})
	s.Swap(compileBench(b, rs))
	w := s.Worker(0)
	keys := benchKeySet(r, rs)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkVerdict = w.Lookup(&keys[i&(benchKeys-1)], 100, 1)
	}
}

// BenchmarkWorkerLookupNew is the worker's call for the first frames of
// new connections (a NAT worker looks up only those), each a 5-tuple the
// cache has not seen, without rules and with a few: a connection flood
// through a box of the default or a small ruleset.
func BenchmarkWorkerLookupNew(b *testing.B) {
	for _, n := range []int{0, 40} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			r := newRand(uint64(n) + 1)
			s := NewSet(SetOptions{Workers: 1})
			s.Swap(compileBench(b, realisticRuleset(r, n)))
			w := s.Worker(0)
			keys := make([]Key, 1<<16)
			for i := range keys {
				keys[i] = randKey(r, nil)
				keys[i].Chain, keys[i].CtState = Forward, CtNew
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k := &keys[i&(len(keys)-1)]
				k.SrcPort++ // never the same 5-tuple twice
				sinkVerdict = w.Lookup(k, 100, 1)
			}
		})
	}
}

// BenchmarkCompile compiles 100k realistic rules and reports the bytes
// allocated per rule (B/rule) and the size of the result (table-B/rule).
func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{100000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			rs := realisticRuleset(newRand(uint64(n)), n)
			var tab *Table
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadCPU()
			iters := 0
			for b.Loop() {
				tab = compileBench(b, rs)
				iters++
			}
			// CPU time of this thread: without the garbage collector's
			// background work, but also without other processes' noise.
			if end := threadCPU(); start >= 0 && end >= 0 {
				b.ReportMetric(float64(end-start)/float64(iters), "cpu-ns/op")
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(iters*n), "B/rule")
			b.ReportMetric(float64(tab.Size())/float64(n), "table-B/rule")
		})
	}
}

// BenchmarkCount compares the counter choices on two cores hitting the
// same rule: per-worker shards (what Set does) against one shared atomic
// counter.
func BenchmarkCount(b *testing.B) {
	b.Run("sharded", func(b *testing.B) {
		var id atomic.Int32
		b.RunParallel(func(pb *testing.PB) {
			e := new(counterChunk) // this worker's shard
			_ = id.Add(1)
			for pb.Next() {
				e[7].add(100, 1)
			}
		})
	})
	b.Run("shared", func(b *testing.B) {
		e := new(counterChunk)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e[7].add(100, 1)
			}
		})
	})
}
