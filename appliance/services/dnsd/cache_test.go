package dnsd

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func key(name string) cacheKey { return cacheKey{name: name, qtype: 1} }

// has lists which of the names the cache holds (fresh at now).
func has(c *cache, now time.Time, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, ok := c.get(key(n), now); ok {
			out = append(out, n)
		}
	}
	return out
}

func TestCacheExpiry(t *testing.T) {
	c := newCache(10, 1<<20)
	gen := c.generation()
	c.put(key("a."), answer{wire: []byte("x"), at: t0, ttl: 10}, gen)
	c.put(key("zero."), answer{wire: []byte("x"), at: t0, ttl: 0}, gen)
	for _, tc := range []struct {
		at      time.Duration
		fresh   bool
		elapsed uint32
	}{
		{0, true, 0}, {999 * time.Millisecond, true, 0}, {time.Second, true, 1}, {9999 * time.Millisecond, true, 9},
		{10 * time.Second, false, 10}, {-time.Second, true, 0},
	} {
		a := answer{at: t0, ttl: 10}
		e, fresh := a.remaining(t0.Add(tc.at))
		if fresh != tc.fresh || e != tc.elapsed {
			t.Errorf("remaining at +%s = %d, %t; want %d, %t", tc.at, e, fresh, tc.elapsed, tc.fresh)
		}
	}
	if diff := cmp.Diff([]string{"a."}, has(c, t0.Add(9*time.Second), "a.", "zero.")); diff != "" {
		t.Errorf("at +9s (-want +got):\n%s", diff)
	}
	if got := has(c, t0.Add(10*time.Second), "a."); got != nil {
		t.Errorf("at +10s the cache still has %q", got)
	}
	if n, b := c.size(); n != 0 || b != 0 {
		t.Errorf("after expiry: %d entries, %d bytes; want none", n, b)
	}
}

func TestCacheBounds(t *testing.T) {
	entry := len("x") + len("n0.") + entryOverhead // every test entry's size
	for _, tc := range []struct {
		name           string
		entries, bytes int
		touch          string // read after the puts of n0..n3, before n4
		want           []string
	}{
		{name: "entries", entries: 3, bytes: 1 << 20, want: []string{"n2.", "n3.", "n4."}},
		{name: "bytes", entries: 100, bytes: 2 * entry, want: []string{"n3.", "n4."}},
		{name: "recently used survives", entries: 3, bytes: 1 << 20, touch: "n1.", want: []string{"n1.", "n3.", "n4."}},
		{name: "too big for the byte bound", entries: 100, bytes: entry - 1, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(tc.entries, tc.bytes)
			for i := range 5 {
				if i == 4 && tc.touch != "" {
					c.get(key(tc.touch), t0)
				}
				c.put(key(fmt.Sprintf("n%d.", i)), answer{wire: []byte("x"), at: t0, ttl: 60}, c.generation())
			}
			if diff := cmp.Diff(tc.want, has(c, t0, "n0.", "n1.", "n2.", "n3.", "n4.")); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if n, b := c.size(); n != len(tc.want) || b != n*entry {
				t.Errorf("size = %d entries, %d bytes; want %d, %d", n, b, len(tc.want), len(tc.want)*entry)
			}
		})
	}
}

func TestCacheFlushDropsStalePuts(t *testing.T) {
	c := newCache(10, 1<<20)
	old := c.generation()
	c.put(key("a."), answer{wire: []byte("x"), at: t0, ttl: 60}, old)
	c.flush()
	c.put(key("b."), answer{wire: []byte("x"), at: t0, ttl: 60}, old) // fetched before the flush
	c.put(key("c."), answer{wire: []byte("x"), at: t0, ttl: 60}, c.generation())
	if diff := cmp.Diff([]string{"c."}, has(c, t0, "a.", "b.", "c.")); diff != "" {
		t.Errorf("after flush (-want +got):\n%s", diff)
	}
	c.resize(0, 1<<20)
	if n, _ := c.size(); n != 0 {
		t.Errorf("resize to 0 entries kept %d", n)
	}
}

func TestLimiter(t *testing.T) {
	a, b := netip.MustParseAddr("192.168.77.10"), netip.MustParseAddr("192.168.77.11")
	l := newLimiter(10, 5)
	var got []string
	step := func(at time.Duration, who netip.Addr, n int) {
		ok := 0
		var reports int
		for range n {
			allowed, report := l.allow(who, t0.Add(at))
			if allowed {
				ok++
			}
			if report {
				reports++
			}
		}
		got = append(got, fmt.Sprintf("+%s %s: %d/%d reports %d", at, who, ok, n, reports))
	}
	step(0, a, 8)                    // burst 5
	step(0, b, 3)                    // another client is not affected
	step(100*time.Millisecond, a, 3) // one token back
	step(time.Second, a, 20)         // a full burst again, no new report within a minute
	step(61*time.Second, a, 6)       // reported again a minute later
	step(62*time.Second, b, 6)       // b: full bucket, one refusal, first report
	want := []string{
		"+0s 192.168.77.10: 5/8 reports 1",
		"+0s 192.168.77.11: 3/3 reports 0",
		"+100ms 192.168.77.10: 1/3 reports 0",
		"+1s 192.168.77.10: 5/20 reports 0",
		"+1m1s 192.168.77.10: 5/6 reports 1",
		"+1m2s 192.168.77.11: 5/6 reports 1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limiter (-want +got):\n%s", diff)
	}

	off := newLimiter(-1, 1)
	for range 100 {
		if ok, _ := off.allow(a, t0); !ok {
			t.Fatal("a negative rate refused a query")
		}
	}
}

func TestLimiterBounded(t *testing.T) {
	l := newLimiter(1, 1)
	client := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range maxClients {
		l.allow(client(i), t0)
	}
	// The table is full and every bucket is empty: a newcomer shares the
	// overflow bucket (one token), then is refused.
	if ok, _ := l.allow(client(maxClients), t0); !ok {
		t.Error("first newcomer refused")
	}
	if ok, _ := l.allow(client(maxClients+1), t0); ok {
		t.Error("second newcomer allowed from the drained overflow bucket")
	}
	if len(l.clients) != maxClients {
		t.Errorf("%d clients tracked, want %d", len(l.clients), maxClients)
	}
	// Two minutes on, every bucket is full again and nobody was reported
	// lately: a sweep forgets them and newcomers get their own buckets.
	later := t0.Add(2 * time.Minute)
	if ok, _ := l.allow(client(maxClients+2), later); !ok {
		t.Error("newcomer after the sweep refused")
	}
	if len(l.clients) != 1 {
		t.Errorf("after the sweep %d clients tracked, want 1", len(l.clients))
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	if got := h.snapshot(); got.P50 != 0 || got.P99 != 0 {
		t.Errorf("empty: p50 %s p99 %s", got.P50, got.P99)
	}
	for range 90 {
		h.observe(800 * time.Microsecond) // ≤ 1ms
	}
	for range 9 {
		h.observe(15 * time.Millisecond) // ≤ 20ms
	}
	h.observe(7 * time.Second) // the last bucket
	s := h.snapshot()
	got := []time.Duration{s.P50, s.P99, s.Max}
	if diff := cmp.Diff([]time.Duration{time.Millisecond, 20 * time.Millisecond, 7 * time.Second}, got); diff != "" {
		t.Errorf("p50, p99, max (-want +got):\n%s", diff)
	}
	var total uint64
	for _, b := range s.Buckets {
		total += b.Count
	}
	if total != 100 || s.Buckets[len(s.Buckets)-1].Count != 1 {
		t.Errorf("buckets %v: want 100 in all, 1 in the last", s.Buckets)
	}
	h.observe(0)
	h.observe(8 * time.Second)
	if s := h.snapshot(); s.Max != 8*time.Second || s.Buckets[0].Count != 1 {
		t.Errorf("after 0 and 8s: max %s, first bucket %d", s.Max, s.Buckets[0].Count)
	}
}
