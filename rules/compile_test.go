package rules

import (
	"flag"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func mustParseFile(t testing.TB, name string) *Ruleset {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Parse(string(src))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return rs
}

func TestCompileGolden(t *testing.T) {
	rs := mustParseFile(t, "fixture.rules")
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	got := tab.Describe()
	golden := filepath.Join("testdata", "compiled.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestCompileGolden -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("compiled structure changed (-want +got); if intended, run with -update:\n%s", diff)
	}
	// The probe order is by best rule, so every subtable's first rule is
	// at least the previous one's.
	for i := 1; i < len(tab.subs); i++ {
		if tab.subs[i].minRule < tab.subs[i-1].minRule {
			t.Errorf("subtable %d (first rule %d) probed after subtable %d (first rule %d)",
				i, tab.subs[i].minRule, i-1, tab.subs[i-1].minRule)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	rs, err := Parse("accept\niif lan9 drop\noif wan7 tcp dport 1 drop")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(rs, Options{Ports: map[string]uint16{"lan0": 1, "wan0": 2}})
	want := `line 2 (rule 1): iif: unknown port "lan9" (ports: lan0, wan0)` + "\n" +
		`line 3 (rule 2): oif: unknown port "wan7" (ports: lan0, wan0)`
	if err == nil || err.Error() != want {
		t.Errorf("Compile error:\n got %v\nwant %s", err, want)
	}
	// From JSON (no lines) the error has the JSON path.
	rs.Rules[1].Line = 0
	_, err = Compile(&Ruleset{Rules: rs.Rules[1:2]}, Options{})
	if want := `rules[0].iif: iif: unknown port "lan9" (ports: )`; err == nil || err.Error() != want {
		t.Errorf("Compile error:\n got %v\nwant %s", err, want)
	}
	// Validation runs too.
	bad := &Ruleset{Rules: []Rule{{Action: Drop}, {Action: Drop}}}
	if _, err := Compile(bad, Options{}); err == nil || err.Error() != "rules[1]: duplicate of rule 0" {
		t.Errorf("Compile(duplicates) = %v", err)
	}
}

func TestPortPrefixes(t *testing.T) {
	r := newRand(5)
	b := &builder{maxPfx: 64}
	for range 2000 {
		lo, hi := uint16(r.IntN(65536)), uint16(r.IntN(65536))
		if r.IntN(4) == 0 {
			lo = uint16(r.IntN(16))
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		var pfx []portPrefix
		if !b.portPrefixes(&pfx, PortRange{lo, hi}) {
			t.Fatalf("%d-%d: not split with a cap of 64", lo, hi)
		}
		if len(pfx) > 30 {
			t.Fatalf("%d-%d: %d prefixes, at most 30 expected", lo, hi, len(pfx))
		}
		// The prefixes tile the range exactly, in order.
		next := uint32(lo)
		for _, p := range pfx {
			size := uint32(1) << (16 - p.bits)
			if uint32(p.val) != next || uint32(p.val)%size != 0 {
				t.Fatalf("%d-%d: prefix %d/%d does not continue at %d", lo, hi, p.val, p.bits, next)
			}
			next += size
		}
		if next != uint32(hi)+1 {
			t.Fatalf("%d-%d: prefixes end at %d", lo, hi, next-1)
		}
	}
	var got []portPrefix
	if !b.portPrefixes(&got, PortRange{0, 65535}) || len(got) != 1 || got[0].bits != 0 {
		t.Errorf("0-65535 = %v, want one prefix of length 0", got)
	}
	b.maxPfx = 4
	if b.portPrefixes(&got, PortRange{1000, 2000}) {
		t.Errorf("1000-2000 with cap 4 = %v, want a range check", got)
	}
}

func TestEarlyExit(t *testing.T) {
	// Rule 0 matches everything in forward: lookups must not look further
	// than the first subtable.
	rs := &Ruleset{Rules: []Rule{{Action: Accept}}}
	r := newRand(3)
	for range 200 {
		rs.Rules = append(rs.Rules, Rule{Match: Match{Proto: ProtoTCP, DstPort: &PortRange{uint16(r.IntN(1 << 16)), 0}}, Action: Drop})
		rs.Rules[len(rs.Rules)-1].DstPort.Hi = rs.Rules[len(rs.Rules)-1].DstPort.Lo
	}
	rs.Rules = dedup(rs.Rules)
	tab, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tab.Subtables() != 2 {
		t.Fatalf("Subtables() = %d, want 2:\n%s", tab.Subtables(), tab.Describe())
	}
	k := Key{Proto: ProtoTCP, DstPort: rs.Rules[1].DstPort.Lo}
	if v := tab.Lookup(&k); v.Rule != 0 {
		t.Errorf("Lookup = %+v, want rule 0", v)
	}
	// Break the second subtable: a lookup that probed it would panic.
	tab.subs[1].slots, tab.subs[1].groups = nil, nil
	if v := tab.Lookup(&k); v.Rule != 0 {
		t.Errorf("Lookup = %+v, want rule 0", v)
	}
}

func dedup(rules []Rule) []Rule {
	seen := map[string]bool{}
	var out []Rule
	for _, r := range rules {
		if s := r.String(); !seen[s] {
			seen[s] = true
			out = append(out, r)
		}
	}
	return out
}

func TestLookupAllocs(t *testing.T) {
	rs := mustParseFile(t, "fixture.rules")
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	lin, err := NewLinear(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet(SetOptions{Workers: 1})
	set.Swap(tab)
	w := set.Worker(0)
	cache := NewCache(0)
	r := newRand(1)
	keys := make([]Key, 64)
	for i := range keys {
		keys[i] = randKey(r, &rs.Rules[r.IntN(len(rs.Rules))])
	}
	i := 0
	for name, f := range map[string]func(){
		"Table.Lookup":  func() { tab.Lookup(&keys[i%len(keys)]) },
		"Linear.Lookup": func() { lin.Lookup(&keys[i%len(keys)]) },
		"Cache.Lookup":  func() { cache.Lookup(tab, &keys[i%len(keys)]) },
		"Worker.Lookup": func() { w.Lookup(&keys[i%len(keys)], 100, int64(i)) },
	} {
		if n := testing.AllocsPerRun(1000, func() { f(); i++ }); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", name, n)
		}
	}
}

func TestRealisticMasks(t *testing.T) {
	for _, n := range []int{10, 1000, 100000} {
		rs := realisticRuleset(newRand(uint64(n)), n)
		tab, err := Compile(rs, Options{Ports: testPorts})
		if err != nil {
			t.Fatal(err)
		}
		if tab.Subtables() > 16 {
			t.Errorf("realistic %d rules: %d subtables, want at most 16:\n%s", n, tab.Subtables(), tab.Describe())
		}
		if got := len(tab.Rules()); got != n {
			t.Errorf("realistic %d rules: generated %d", n, got)
		}
	}
}

func TestDescribeMask(t *testing.T) {
	rs, err := Parse("iif lan0 ip6 saddr 2001:db8::/80 ip6 daddr 2001:db8::/33 tcp dport 0-1023 tcp flags & (syn|ack) == syn vlan id 1 ct state new drop")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.SplitN(tab.Describe(), "\n", 4)[2]
	// The rare /33 is hashed as /32 and checked exactly after the hit.
	want := "0: first rule 0, 1 entries, 8 slots of 1, key 0 bits, checked(1 candidates): chain ct ethertype proto tcpflags&0x12 dport/6 iif vlan saddr/80 daddr/32"
	if got != want {
		t.Errorf("Describe line:\n got %q\nwant %q", got, want)
	}
}

// realisticRuleset makes n rules from at most 16 masks, shaped like a
// router's configuration: a hand-written preamble of ten rules (the whole
// set when n <= 10), then generated per-host and per-network lists that
// make up the bulk, each list in its own masks.
func realisticRuleset(r *rand.Rand, n int) *Ruleset {
	fixed := []string{
		"ct state established,related accept",
		"ct state invalid drop",
		"iif lan0 oif wan0 accept",
		"icmp type echo-request accept",
		"icmpv6 type nd-neighbor-solicit accept",
		"iif wan0 ip daddr 10.0.0.2 tcp dport 22 ct state new accept",
		"ip saddr 203.0.113.0/24 drop",
		"udp dport 1000-2000 drop",
		"ip6 saddr 2001:db8:bad::/64 drop",
		"ip daddr 10.0.0.53 udp dport 53 accept",
	}
	var b strings.Builder
	b.WriteString("policy forward drop\n")
	for _, f := range fixed[:min(len(fixed), n)] {
		b.WriteString(f + "\n")
	}
	seen := map[string]bool{}
	for count := len(fixed); count < n; {
		var line string
		a, c := r.IntN(256), r.IntN(256)
		switch x := r.IntN(100); {
		case x < 35:
			line = sprintf("iif wan0 ip daddr 10.%d.%d.%d tcp dport %d ct state new accept", r.IntN(256), a, c, pick(r, []int{22, 80, 443, 8080, 3389}))
		case x < 55:
			line = sprintf("ip saddr 100.%d.%d.0/24 drop", a, c)
		case x < 70:
			line = sprintf("ip6 saddr 2001:db8:%x:%x::/64 drop", a, c)
		case x < 80:
			line = sprintf("ip daddr 10.%d.%d.%d udp dport %d accept", r.IntN(256), a, c, pick(r, []int{53, 123, 500, 4500}))
		case x < 88:
			line = sprintf("ether saddr 02:00:%02x:%02x:%02x:01 drop", a, c, r.IntN(256))
		case x < 94:
			line = sprintf("ip saddr 172.%d.%d.0/24 ip daddr 10.%d.0.0/16 accept", 16+r.IntN(16), a, c)
		case x < 97:
			line = sprintf("vlan id %d iif lan1 drop", r.IntN(4096))
		default:
			line = sprintf("ip6 daddr 2001:db8:%x:%x::%x tcp dport %d accept", a, c, r.IntN(65536), pick(r, []int{22, 443}))
		}
		if !seen[line] {
			seen[line] = true
			b.WriteString(line + "\n")
			count++
		}
	}
	rs, err := Parse(b.String())
	if err != nil {
		panic(err)
	}
	return rs
}

func TestCoarsening(t *testing.T) {
	// 200 rules, each /17 to /31: one subtable per length without
	// coarsening. With it, the rare lengths share the /16 and /24
	// subtables and a popular length keeps its exact subtable.
	var b strings.Builder
	r := newRand(8)
	for i := range 200 {
		bits := 17 + i%15
		b.WriteString(sprintf("ip saddr %s drop\n", netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), bits).Masked()))
	}
	for i := range coarseBelow {
		b.WriteString(sprintf("ip daddr 192.168.%d.%d/30 accept\n", i/64, i%64*4))
	}
	rs, err := Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "rules 264, subtables 3\n" +
		"policy input=accept forward=accept output=accept\n" +
		"0: first rule 0, 78 entries, 136 slots of 2, key 8 bits, checked(96 candidates): chain ethertype saddr/16\n" +
		"1: first rule 7, 104 entries, 144 slots of 2, key 16 bits, checked(104 candidates): chain ethertype saddr/24\n" +
		"2: first rule 200, 64 entries, 88 slots of 1, key 6 bits, exact: chain ethertype daddr/30\n"
	if diff := cmp.Diff(want, tab.Describe()); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
	lin, err := NewLinear(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20000 {
		k := randKey(r, &rs.Rules[r.IntN(len(rs.Rules))])
		if got, want := tab.Lookup(&k), lin.Lookup(&k); got != want {
			t.Fatalf("Lookup(%s) = %+v, linear %+v", k.String(), got, want)
		}
	}
}
