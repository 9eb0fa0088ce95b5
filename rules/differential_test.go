package rules

import (
	"math/rand/v2"
	"testing"
)

// checkDifferential compiles a random rule set with several range caps and
// compares Table, Cache and Linear on random keys.
func checkDifferential(t *testing.T, seed uint64, nRules, nKeys int, cfg genConfig) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rs := randRuleset(r, nRules, cfg)
	opts := Options{Ports: testPorts}
	lin, err := NewLinear(rs, opts)
	if err != nil {
		t.Fatalf("seed %d: NewLinear: %v", seed, err)
	}
	var tables []*Table
	for _, maxPfx := range []int{1, 4, 32} {
		opts.MaxRangePrefixes = maxPfx
		tab, err := Compile(rs, opts)
		if err != nil {
			t.Fatalf("seed %d: Compile: %v", seed, err)
		}
		tables = append(tables, tab)
	}
	cache := NewCache(64)
	for i := range nKeys {
		var rule *Rule
		if len(rs.Rules) > 0 && r.IntN(5) > 0 {
			rule = &rs.Rules[r.IntN(len(rs.Rules))]
		}
		k := randKey(r, rule)
		want := lin.Lookup(&k)
		for ti, tab := range tables {
			if got := tab.Lookup(&k); got != want {
				t.Fatalf("seed %d key %d table %d: Lookup(%s) = %+v (%s), linear says %+v (%s)\ntable:\n%s",
					seed, i, ti, k.String(), got, ruleText(rs, got.Rule), want, ruleText(rs, want.Rule), tab.Describe())
			}
			if got := cache.Lookup(tab, &k); got != want {
				t.Fatalf("seed %d key %d table %d: cached Lookup(%s) = %+v, linear says %+v", seed, i, ti, k.String(), got, want)
			}
		}
	}
}

func TestDifferential(t *testing.T) {
	iters := 400
	if testing.Short() {
		iters = 50
	}
	for seed := range uint64(iters) {
		cfg := genConfig{p: 0.1 + 0.5*float64(seed%5)/4, maxChain: 1 + int(seed%3)}
		n := []int{0, 1, 3, 10, 40, 150}[seed%6]
		checkDifferential(t, seed, n, 300, cfg)
	}
}

// TestDifferentialLarge covers tables with many entries per subtable.
func TestDifferentialLarge(t *testing.T) {
	for seed := uint64(1000); seed < 1003; seed++ {
		checkDifferential(t, seed, 2000, 5000, genConfig{p: 0.3, maxChain: 2})
	}
}

func FuzzDifferential(f *testing.F) {
	f.Add(uint64(1), uint8(10), uint8(50))
	f.Add(uint64(7), uint8(100), uint8(30))
	f.Add(uint64(42), uint8(3), uint8(90))
	f.Fuzz(func(t *testing.T, seed uint64, nRules, p uint8) {
		cfg := genConfig{p: float64(p%100) / 100, maxChain: 1 + int(seed%3)}
		checkDifferential(t, seed, int(nRules), 200, cfg)
	})
}

func ruleText(rs *Ruleset, i int32) string {
	if i < 0 {
		return "policy"
	}
	return rs.Rules[i].Chain.String() + ": " + rs.Rules[i].String()
}

// TestDifferentialShapes compares Table and Linear on the benchmark rule
// sets: many masks (coarsened into checked subtables) and the realistic
// mix (large exact subtables).
func TestDifferentialShapes(t *testing.T) {
	for _, shape := range []struct {
		name string
		gen  func(*rand.Rand, int) *Ruleset
	}{{"worst", worstRuleset}, {"realistic", realisticRuleset}} {
		r := newRand(77)
		rs := shape.gen(r, 3000)
		tab, err := Compile(rs, Options{Ports: testPorts})
		if err != nil {
			t.Fatal(err)
		}
		lin, err := NewLinear(rs, Options{Ports: testPorts})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			for _, k := range benchKeySet(r, rs) {
				if got, want := tab.Lookup(&k), lin.Lookup(&k); got != want {
					t.Fatalf("%s: Lookup(%s) = %+v (%s), linear %+v (%s)", shape.name, k.String(), got, ruleText(rs, got.Rule), want, ruleText(rs, want.Rule))
				}
			}
		}
	}
}
