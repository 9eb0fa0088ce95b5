package timesync

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

func TestIntersect(t *testing.T) {
	c := func(offset, dist time.Duration) candidate { return candidate{offset: offset, dist: dist} }
	for _, tc := range []struct {
		name    string
		cs      []candidate
		chimers []int
		ok      bool
		best    int
	}{
		{name: "one answer is never enough", cs: []candidate{c(5*time.Second, ms)}, chimers: []int{0}, ok: false},
		{name: "two agree", cs: []candidate{c(5*time.Second, 3*ms), c(5*time.Second+30*ms, 2*ms)}, chimers: []int{0, 1}, ok: true, best: 1},
		{name: "two disagree: neither can be blamed", cs: []candidate{c(5*time.Second, ms), c(time.Hour, ms)}, chimers: []int{0}, ok: false},
		{name: "three, one falseticker", cs: []candidate{c(time.Hour, ms), c(5*time.Second, 9*ms), c(5*time.Second+10*ms, 4*ms)}, chimers: []int{1, 2}, ok: true, best: 2},
		{name: "falseticker near but outside minDist", cs: []candidate{c(0, 0), c(20*ms, 0), c(150*ms, 0)}, chimers: []int{0, 1}, ok: true, best: 0},
		{name: "a large distance reaches further", cs: []candidate{c(0, 0), c(20*ms, 0), c(150*ms, 200*ms)}, chimers: []int{0, 1, 2}, ok: true, best: 0},
		{name: "closed intervals touch", cs: []candidate{c(0, 0), c(100*ms, 0)}, chimers: []int{0, 1}, ok: true, best: 0},
		{name: "even split has no majority", cs: []candidate{c(0, ms), c(ms, ms), c(time.Hour, ms), c(time.Hour, 2*ms)}, chimers: []int{0, 1}, ok: false},
		{name: "three of four", cs: []candidate{c(0, ms), c(ms, ms), c(time.Hour, ms), c(2*ms, ms)}, chimers: []int{0, 1, 3}, ok: true, best: 0},
		{name: "chain: the point is where most overlap", cs: []candidate{c(0, 0), c(90*ms, 0), c(180*ms, 0)}, chimers: []int{0, 1}, ok: true, best: 0},
		{name: "extreme offsets saturate", cs: []candidate{c(math.MaxInt64, time.Second), c(math.MaxInt64-ms, 0), c(math.MinInt64, 0)}, chimers: []int{0, 1}, ok: true, best: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chimers, ok := intersect(tc.cs)
			if diff := cmp.Diff(tc.chimers, chimers); diff != "" || ok != tc.ok {
				t.Fatalf("intersect = %v, %v; want %v, %v (-want +got):\n%s", chimers, ok, tc.chimers, tc.ok, diff)
			}
			if ok {
				if got := best(tc.cs, chimers); got != tc.best {
					t.Errorf("best = %d, want %d", got, tc.best)
				}
			}
		})
	}
}

// bruteIntersect is the oracle: the largest number of intervals that
// contain one of the interval ends (the optimum is always at a start).
func bruteIntersect(cs []candidate) int {
	most := 0
	for _, p := range cs {
		at, _ := p.interval()
		n := 0
		for _, c := range cs {
			if lo, hi := c.interval(); lo <= at && at <= hi {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// FuzzIntersect checks intersect against the brute-force oracle: the group
// is as large as the largest overlap, its members share a point, and ok
// means a majority of at least two.
func FuzzIntersect(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var cs []candidate
		for ; len(b) >= 12 && len(cs) < 16; b = b[12:] {
			off := int64(binary.LittleEndian.Uint64(b))
			dist := time.Duration(binary.LittleEndian.Uint32(b[8:])) * time.Microsecond
			cs = append(cs, candidate{offset: time.Duration(off), dist: dist})
		}
		if len(cs) == 0 {
			return
		}
		chimers, ok := intersect(cs)
		if want := bruteIntersect(cs); len(chimers) != want {
			t.Fatalf("intersect(%v) = %v: %d members, the oracle finds %d", cs, chimers, len(chimers), want)
		}
		for _, i := range chimers {
			for _, j := range chimers {
				if !agree(cs[i], cs[j]) {
					t.Fatalf("intersect(%v) = %v: members %d and %d do not agree", cs, chimers, i, j)
				}
			}
		}
		if want := len(chimers) >= 2 && 2*len(chimers) > len(cs); ok != want {
			t.Fatalf("intersect(%v) ok = %v with %d of %d", cs, ok, len(chimers), len(cs))
		}
		if ok {
			b := best(cs, chimers)
			for _, i := range chimers {
				if cs[i].dist < cs[b].dist {
					t.Fatalf("best = %d (dist %v), but %d has dist %v", b, cs[b].dist, i, cs[i].dist)
				}
			}
		}
	})
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{2 * time.Second, 16 * time.Second, 1, 2 * time.Second},
		{2 * time.Second, 16 * time.Second, 2, 4 * time.Second},
		{2 * time.Second, 16 * time.Second, 4, 16 * time.Second},
		{2 * time.Second, 16 * time.Second, 100, 16 * time.Second},
		{2 * time.Second, 1024 * time.Second, 10, 1024 * time.Second},
		{2 * time.Second, 1024 * time.Second, 9, 512 * time.Second},
		{3 * time.Second, 10 * time.Second, 3, 10 * time.Second},
		{time.Duration(math.MaxInt64 / 2), time.Duration(math.MaxInt64), 5, time.Duration(math.MaxInt64)},
	} {
		if got := backoff(tc.base, tc.limit, tc.n); got != tc.want {
			t.Errorf("backoff(%v, %v, %d) = %v, want %v", tc.base, tc.limit, tc.n, got, tc.want)
		}
	}
}
