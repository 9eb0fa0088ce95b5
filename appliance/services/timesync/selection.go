package timesync

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// candidate is one server's answer as the selection sees it.
type candidate struct {
	offset time.Duration // how far the local clock is behind the server
	dist   time.Duration // root distance: RTT/2 + root delay/2 + root dispersion
}

// minDist is the least error bound a candidate is granted, so that honest
// servers a few milliseconds apart over a quiet path (whose root distances
// are then tiny) still agree. It is the tolerance of the whole selection:
// two answers agree when they are within their distances plus 2*minDist.
const minDist = 50 * time.Millisecond

// interval is the candidate's correctness interval: the true offset lies in
// [lo, hi] if the server is honest.
func (c candidate) interval() (lo, hi time.Duration) {
	d := max(c.dist, minDist)
	return satAdd(c.offset, -d), satAdd(c.offset, d)
}

// agree reports whether two candidates' correctness intervals overlap.
func agree(a, b candidate) bool {
	alo, ahi := a.interval()
	blo, bhi := b.interval()
	return alo <= bhi && blo <= ahi
}

// intersect is the clock selection (Marzullo's algorithm, as in RFC 5905's
// clock select): it returns, in order, the indices of the largest group of
// candidates whose correctness intervals share a point. ok reports whether
// that group can be trusted: it has at least two members and is a majority
// of all candidates. The others are falsetickers. With two candidates
// both must agree; with three or more, a minority that disagrees is
// outvoted.
func intersect(cs []candidate) (chimers []int, ok bool) {
	type edge struct {
		at    time.Duration
		start bool
	}
	edges := make([]edge, 0, 2*len(cs))
	for _, c := range cs {
		lo, hi := c.interval()
		edges = append(edges, edge{lo, true}, edge{hi, false})
	}
	// Closed intervals: at one instant, starts come before ends.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.start == b.start:
			return 0
		case a.start:
			return -1
		}
		return 1
	})
	best, n := 0, 0
	var point time.Duration
	for _, e := range edges {
		if !e.start {
			n--
			continue
		}
		if n++; n > best {
			best, point = n, e.at
		}
	}
	for i, c := range cs {
		if lo, hi := c.interval(); lo <= point && point <= hi {
			chimers = append(chimers, i)
		}
	}
	return chimers, len(chimers) >= 2 && 2*len(chimers) > len(cs)
}

// best returns the index of the chimer whose answer has the smallest error
// bound (root distance), the earlier one on a tie: the best single
// measurement among answers that a majority agrees with.
func best(cs []candidate, chimers []int) int {
	b := chimers[0]
	for _, i := range chimers[1:] {
		if cs[i].dist < cs[b].dist {
			b = i
		}
	}
	return b
}

// satAdd adds two durations, saturating instead of wrapping around.
func satAdd(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
