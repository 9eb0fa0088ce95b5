package dnsd

import (
	"net/netip"
	"sync"
	"time"
)

// maxClients bounds the clients the limiter tracks one by one; beyond it,
// new clients share one bucket until a sweep forgets idle ones.
const maxClients = 4096

// sweepEvery is how often, at most, a full client table is swept.
const sweepEvery = time.Second

// limiter is a token bucket per client address: rate tokens a second, up
// to burst. A bucket that has refilled completely is the same as no bucket,
// so idle clients are forgotten when room is needed.
type limiter struct {
	mu        sync.Mutex
	rate      float64 // tokens per second; <0: no limit
	burst     float64
	clients   map[netip.Addr]*bucket
	overflow  bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
	logged time.Time // when a refusal was last reported for logging
}

// logEvery is how often, at most, refusals of one client are reported.
const logEvery = time.Minute

func newLimiter(rate float64, burst int) *limiter {
	l := &limiter{clients: make(map[netip.Addr]*bucket)}
	l.configure(rate, burst)
	return l
}

// configure sets the rate, keeping what buckets hold (capped at the new
// burst).
func (l *limiter) configure(rate float64, burst int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate, l.burst = rate, float64(max(burst, 1))
	for _, b := range l.clients {
		b.tokens = min(b.tokens, l.burst)
	}
	l.overflow.tokens = min(l.overflow.tokens, l.burst)
}

// allow takes a token for the client at now. When it refuses, report says
// to log it (at most once a minute per client).
func (l *limiter) allow(client netip.Addr, now time.Time) (ok, report bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate < 0 {
		return true, false
	}
	b := l.clients[client]
	if b == nil {
		if len(l.clients) >= maxClients && now.Sub(l.lastSweep) >= sweepEvery {
			l.sweep(now)
		}
		if len(l.clients) < maxClients {
			b = &bucket{tokens: l.burst, last: now}
			l.clients[client] = b
		} else {
			b = &l.overflow
		}
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(l.burst, b.tokens+d.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens < 1 {
		if report = b.logged.IsZero() || now.Sub(b.logged) >= logEvery; report {
			b.logged = now
		}
		return false, report
	}
	b.tokens--
	return true, false
}

// sweep forgets the clients whose buckets are full again.
func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	for a, b := range l.clients {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst && now.Sub(b.logged) >= logEvery {
			delete(l.clients, a)
		}
	}
}
