package rules

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustCompile(t testing.TB, src string) *Table {
	t.Helper()
	rs, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func tcpKey(dport uint16) Key {
	return Key{EtherType: EtherTypeIPv4, Proto: ProtoTCP, DstPort: dport, CtState: CtNew}
}

// counts returns rule text → packets for the current table's counters.
func counts(s *Set) map[string]uint64 {
	out := map[string]uint64{}
	tab, cs := s.Counters()
	rules := tab.Rules()
	for _, c := range cs {
		out[rules[c.Rule].String()] = c.Packets
	}
	return out
}

func TestSetCountersSurviveSwap(t *testing.T) {
	s := NewSet(SetOptions{Workers: 2})
	s.Swap(mustCompile(t, "tcp dport 22 counter accept\ntcp dport 80 counter drop\ntcp dport 443 accept"))
	w0, w1 := s.Worker(0), s.Worker(1)
	for i := range 5 {
		k22, k80 := tcpKey(22), tcpKey(80)
		w0.Lookup(&k22, 100, int64(10+i))
		w1.Lookup(&k80, 60, 20)
	}
	k22 := tcpKey(22)
	w1.Lookup(&k22, 100, 30)
	want := map[string]uint64{"tcp dport 22 counter accept": 6, "tcp dport 80 counter drop": 5}
	if diff := cmp.Diff(want, counts(s)); diff != "" {
		t.Fatalf("counters (-want +got):\n%s", diff)
	}
	_, cs := s.Counters()
	c := cs[0]
	if c.Bytes != 600 || c.LastHit != 30 {
		t.Errorf("rule 0 counter = %+v, want 600 bytes, last hit 30", c)
	}

	// New order, a new rule, a changed rule (verdict), a comment edit: the
	// counters follow the rules that kept chain, match and verdict.
	s.Swap(mustCompile(t, "udp dport 53 counter accept\ntcp dport 80 counter accept\ntcp dport 22 counter accept comment \"edited\""))
	want = map[string]uint64{
		"udp dport 53 counter accept":                    0,
		"tcp dport 80 counter accept":                    0,
		"tcp dport 22 counter accept comment \"edited\"": 6,
	}
	if diff := cmp.Diff(want, counts(s)); diff != "" {
		t.Fatalf("counters after swap (-want +got):\n%s", diff)
	}
	w0.Lookup(&k22, 100, 40)
	if got := counts(s)["tcp dport 22 counter accept comment \"edited\""]; got != 7 {
		t.Errorf("tcp dport 22 after swap and one more hit = %d, want 7", got)
	}
}

func TestSetSlotReuse(t *testing.T) {
	s := NewSet(SetOptions{Workers: 2})
	w0, w1 := s.Worker(0), s.Worker(1)
	s.Swap(mustCompile(t, "tcp dport 1 counter accept"))
	k := tcpKey(1)
	w0.Lookup(&k, 1, 1)
	w1.Lookup(&k, 1, 1)
	// Remove the rule: its slot is retired. Worker 1 has not looked up
	// since, so it could still be counting into the old table.
	s.Swap(mustCompile(t, "tcp dport 2 counter accept"))
	w0.Sync()
	s.Swap(mustCompile(t, "tcp dport 2 counter accept\ntcp dport 3 counter accept"))
	if len(s.free) != 0 || len(s.quarantine) != 1 {
		t.Fatalf("after swaps with a lagging worker: free %v, quarantine %v; want the slot still quarantined", s.free, s.quarantine)
	}
	if s.nslots != 3 {
		t.Errorf("nslots = %d, want 3 (no reuse yet)", s.nslots)
	}
	w1.Sync()
	s.Swap(mustCompile(t, "tcp dport 2 counter accept\ntcp dport 3 counter accept\ntcp dport 4 counter accept"))
	if s.nslots != 3 || len(s.quarantine) != 0 {
		t.Errorf("nslots = %d, quarantine %v; want the retired slot reused", s.nslots, s.quarantine)
	}
	// The reused slot starts from zero.
	want := map[string]uint64{"tcp dport 2 counter accept": 0, "tcp dport 3 counter accept": 0, "tcp dport 4 counter accept": 0}
	if diff := cmp.Diff(want, counts(s)); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

func TestSetManySlots(t *testing.T) {
	// More counted rules than one chunk.
	var b strings.Builder
	for i := range 3*chunkSize + 5 {
		b.WriteString(sprintf("tcp dport %d counter accept\n", i))
	}
	s := NewSet(SetOptions{Workers: 1})
	s.Swap(mustCompile(t, b.String()))
	w := s.Worker(0)
	for i := range 3*chunkSize + 5 {
		k := tcpKey(uint16(i))
		for range i % 3 {
			w.Lookup(&k, 1, 1)
		}
	}
	_, cs := s.Counters()
	for _, c := range cs {
		if c.Packets != uint64(c.Rule%3) {
			t.Fatalf("rule %d: %d packets, want %d", c.Rule, c.Packets, c.Rule%3)
		}
	}
}

func TestSetPolicyAndReject(t *testing.T) {
	s := NewSet(SetOptions{Workers: 1, RejectRate: 1, RejectBurst: 2})
	s.Swap(mustCompile(t, "policy forward drop\ntcp dport 1 reject"))
	w := s.Worker(0)
	k1, k2 := tcpKey(1), tcpKey(2)
	var got []Action
	for range 3 {
		got = append(got, w.Lookup(&k1, 10, 1e9).Action)
	}
	got = append(got, w.Lookup(&k1, 10, 3e9).Action) // a token came back
	if diff := cmp.Diff([]Action{Reject, Reject, Drop, Reject}, got); diff != "" {
		t.Errorf("reject verdicts (-want +got):\n%s", diff)
	}
	if n := s.RejectsLimited(); n != 1 {
		t.Errorf("RejectsLimited = %d, want 1", n)
	}
	if v := w.Lookup(&k2, 10, 1); v != (Verdict{Rule: -1, Action: Drop}) {
		t.Errorf("policy verdict = %+v", v)
	}
	if p, b := s.PolicyCounter(Forward); p != 1 || b != 10 {
		t.Errorf("PolicyCounter(forward) = %d, %d; want 1, 10", p, b)
	}
	if p, _ := s.PolicyCounter(Input); p != 0 {
		t.Errorf("PolicyCounter(input) = %d, want 0", p)
	}
}

func TestSetLogs(t *testing.T) {
	s := NewSet(SetOptions{Workers: 2, LogRate: 1, LogBurst: 3, LogRing: 2})
	tab := mustCompile(t, "tcp dport 22 log drop\ntcp dport 23 accept")
	s.Swap(tab)
	k22, k23 := tcpKey(22), tcpKey(23)
	s.Worker(0).Lookup(&k23, 1, 1e9) // no log flag
	s.Worker(0).Lookup(&k22, 70, 1e9)
	s.Worker(1).Lookup(&k22, 71, 1e9)
	s.Worker(0).Lookup(&k22, 72, 1e9)
	s.Worker(0).Lookup(&k22, 73, 1e9) // over the rate: not logged
	s.Worker(0).Lookup(&k22, 74, 5e9) // the ring of worker 0 is full
	if n := s.LogsDropped(); n != 1 {
		t.Errorf("LogsDropped = %d, want 1", n)
	}
	buf := make([]LogRecord, 10)
	n := s.ReadLogs(buf)
	var sizes []uint32
	for _, r := range buf[:n] {
		if r.Rule != 0 || r.Action != Drop || r.Key != k22 || r.Table != tab.Generation() {
			t.Errorf("record %+v, want rule 0 drop of %s", r, k22.String())
		}
		sizes = append(sizes, r.Bytes)
	}
	if diff := cmp.Diff([]uint32{70, 71, 72}, sizes); diff != "" {
		t.Errorf("logged frame sizes (-want +got):\n%s", diff)
	}
	if n := s.ReadLogs(buf); n != 0 {
		t.Errorf("second ReadLogs = %d, want 0", n)
	}
	line := s.FormatLog(&buf[0])
	if want := "rule 0 (forward: tcp dport 22 log drop) drop len=70 forward iif=0 oif=0"; !strings.HasPrefix(line, want) {
		t.Errorf("FormatLog = %q, want prefix %q", line, want)
	}
}

// TestSetConcurrent swaps tables while workers look up and checks that no
// count is lost for a rule that every table has. Run with -race.
func TestSetConcurrent(t *testing.T) {
	s := NewSet(SetOptions{Workers: 2, CacheSize: 16})
	tables := []*Table{
		mustCompile(t, "tcp dport 22 counter accept\ntcp dport 1 counter drop"),
		mustCompile(t, "tcp dport 2 counter drop\ntcp dport 22 counter accept"),
		mustCompile(t, "tcp dport 3 counter drop\ntcp dport 4 counter drop\ntcp dport 22 counter accept"),
	}
	s.Swap(tables[0])
	const perWorker = 20000
	// The swapper runs until the workers are done; the cleanup stops and
	// joins it also when the test fails first.
	stop := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				s.Swap(tables[i%len(tables)])
				s.Counters()
			}
		}
	}()
	stopSwapper := sync.OnceFunc(func() { close(stop); <-swapped })
	t.Cleanup(stopSwapper)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := s.Worker(i)
			for n := range perWorker {
				k := tcpKey(22)
				if n%2 == 1 {
					k = tcpKey(uint16(n % 5))
				}
				if v := w.Lookup(&k, 1, int64(n)); n%2 == 0 && v.Action != Accept {
					t.Errorf("dport 22 verdict %+v", v)
					return
				}
			}
		}()
	}
	wg.Wait()
	stopSwapper()
	if got := counts(s)["tcp dport 22 counter accept"]; got != perWorker {
		t.Errorf("tcp dport 22 counted %d times, want %d", got, perWorker)
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(10, 3) // a token every 100ms
	var got []bool
	for _, now := range []int64{0, 0, 0, 0, 50e6, 100e6, 100e6, 1e9, 1e9, 1e9, 1e9, 500e6, 500e6} {
		got = append(got, l.Allow(now))
	}
	// Burst of 3, then one per 100ms; at 1s the bucket is full again; the
	// clock going back to 500ms restarts the bucket.
	want := []bool{true, true, true, false, false, true, false, true, true, true, false, true, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Allow sequence (-want +got):\n%s", diff)
	}
	if NewLimiter(0, 5).Allow(0) {
		t.Error("rate 0 allowed an event")
	}
	inf := NewLimiter(math.Inf(1), 0)
	for i := range 100 {
		if !inf.Allow(int64(i)) {
			t.Fatal("infinite rate refused an event")
		}
	}
}

func TestKeyString(t *testing.T) {
	k := Key{Chain: Input, InPort: 1, OutPort: 7, Tagged: true, VLAN: 0x2005, Proto: ProtoTCP, SrcPort: 1234, DstPort: 22,
		TCPFlags: FlagSYN, CtState: CtNew}
	k.SetAddrs(mustAddr("10.0.0.1"), mustAddr("10.0.0.2"))
	want := "input iif=1 oif=7 00:00:00:00:00:00 > 00:00:00:00:00:00 vlan=5 ip 10.0.0.1 > 10.0.0.2 tcp 1234 > 22 flags=syn ct=new"
	if got := k.String(); got != want {
		t.Errorf("String:\n got %q\nwant %q", got, want)
	}
	k6 := Key{Proto: ProtoICMPv6, ICMPType: 128}
	k6.SetAddrs(mustAddr("2001:db8::1"), mustAddr("::1"))
	if got, want := k6.String(), "ip6 2001:db8::1 > ::1 icmpv6 type=echo-request code=0"; !strings.Contains(got, want) {
		t.Errorf("String = %q, want it to contain %q", got, want)
	}
}

// TestCachePoliciesOnly: a table without rules answers with its chains'
// policies past the cache, which neither hits nor misses, and the cache
// serves the next table with rules as before.
func TestCachePoliciesOnly(t *testing.T) {
	c := NewCache(8)
	for _, tt := range []struct {
		src   string
		chain Chain
		want  Verdict
	}{
		{"policy forward drop", Forward, Verdict{Rule: -1, Action: Drop}},
		{"policy forward drop", Input, Verdict{Rule: -1, Action: Accept}},
		{"", Forward, Verdict{Rule: -1, Action: Accept}},
		{"policy input drop", Chain(numChains), Verdict{Rule: -1, Action: Drop}},
	} {
		tab := mustCompile(t, tt.src)
		k := tcpKey(22)
		k.Chain = tt.chain
		if got, want := c.Lookup(tab, &k), tab.Lookup(&k); got != want || got != tt.want {
			t.Errorf("%q, chain %v: Lookup = %+v; want %+v (the table's %+v)", tt.src, tt.chain, got, tt.want, want)
		}
	}
	if hits, misses := c.Stats(); hits != 0 || misses != 0 {
		t.Errorf("after tables without rules: %d hits, %d misses; want 0, 0", hits, misses)
	}
	tab := mustCompile(t, "policy forward drop\nchain forward\ntcp dport 22 accept")
	k := tcpKey(22)
	k.Chain = Forward
	for range 2 {
		if v := c.Lookup(tab, &k); v.Action != Accept || v.Rule != 0 {
			t.Errorf("rule table: %+v, want rule 0's accept", v)
		}
	}
	if hits, misses := c.Stats(); hits != 1 || misses != 1 {
		t.Errorf("after a table with a rule: %d hits, %d misses; want 1, 1", hits, misses)
	}
}

func TestCacheGeneration(t *testing.T) {
	a := mustCompile(t, "tcp dport 22 accept")
	b := mustCompile(t, "tcp dport 22 drop")
	c := NewCache(8)
	k := tcpKey(22)
	for i, tt := range []struct {
		tab  *Table
		want Action
	}{{a, Accept}, {a, Accept}, {b, Drop}, {b, Drop}, {a, Accept}} {
		if v := c.Lookup(tt.tab, &k); v.Action != tt.want {
			t.Errorf("lookup %d: %v, want %v", i, v.Action, tt.want)
		}
	}
	// Two ways: table a's entry survives one insertion for table b.
	if hits, misses := c.Stats(); hits != 3 || misses != 2 {
		t.Errorf("Stats = %d hits, %d misses; want 3, 2", hits, misses)
	}
	// The workers of a Set see swaps with and without a cache.
	for _, size := range []int{-1, 0} {
		s := NewSet(SetOptions{CacheSize: size})
		w := s.Worker(0)
		s.Swap(a)
		if v := w.Lookup(&k, 1, 1); v.Action != Accept {
			t.Errorf("cache size %d: %v before swap, want accept", size, v.Action)
		}
		s.Swap(b)
		if v := w.Lookup(&k, 1, 1); v.Action != Drop {
			t.Errorf("cache size %d: %v after swap, want drop", size, v.Action)
		}
		if hits, _ := w.CacheStats(); hits != 0 {
			t.Errorf("cache size %d: %d cache hits, want 0", size, hits)
		}
	}
}
