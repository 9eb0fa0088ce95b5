package rules

import (
	"math"
	"sync/atomic"
)

// Limiter is a token bucket (in its GCRA form: one atomic timestamp) for
// rejects and log records. It is safe for concurrent use and never
// allocates; when the bucket is empty, Allow is a single atomic load.
type Limiter struct {
	interval int64 // nanoseconds per token; 0 means unlimited
	burst    int64 // how far ahead of now the bucket may run, in ns
	never    bool
	tat      atomic.Int64 // theoretical arrival time of the next token
}

// NewLimiter allows perSecond events per second on average and bursts of
// up to burst events (at least 1). perSecond <= 0 allows nothing;
// math.Inf(1) allows everything.
func NewLimiter(perSecond float64, burst int) *Limiter {
	switch {
	case perSecond <= 0 || math.IsNaN(perSecond):
		return &Limiter{never: true}
	case math.IsInf(perSecond, 1):
		return &Limiter{}
	}
	interval := max(int64(1e9/perSecond), 1)
	return &Limiter{interval: interval, burst: interval * int64(max(burst, 1))}
}

// Allow reports whether an event at time now (nanoseconds, any epoch used
// consistently) may happen, and takes a token if so. A clock that jumps
// backwards is tolerated: the bucket restarts.
func (l *Limiter) Allow(now int64) bool {
	if l.never {
		return false
	}
	if l.interval == 0 {
		return true
	}
	for {
		old := l.tat.Load()
		tat := old
		if tat < now || tat > now+l.burst {
			tat = now // idle (bucket full) or the clock went back
		}
		next := tat + l.interval
		if next-now > l.burst {
			return false
		}
		if l.tat.CompareAndSwap(old, next) {
			return true
		}
	}
}
