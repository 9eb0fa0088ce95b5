package dhcp6s

import (
	"net/netip"
	"sync"
	"time"
)

// maxClients bounds the client addresses the limiter tracks one by one;
// beyond it, new clients share one bucket until a sweep (at most once a
// second) forgets the idle ones.
const (
	maxClients = 4096
	sweepEvery = time.Second
)

// limiter admits messages through a token bucket per client address and
// one for all clients, each refilling rate tokens a second up to twice
// that.
type limiter struct {
	mu         sync.Mutex
	rate, per  float64 // tokens a second: all clients, one client
	all        bucket
	clients    map[netip.Addr]*bucket
	overflow   bucket // the clients beyond maxClients
	lastSweep  time.Time
	maxClients int
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate, per float64) *limiter {
	return &limiter{rate: rate, per: per, clients: map[netip.Addr]*bucket{}, maxClients: maxClients}
}

// take refills b to now and takes a token, if there is one; a new bucket
// starts full.
func (b *bucket) take(rate float64, now time.Time) bool {
	burst := max(2*rate, 1)
	if b.last.IsZero() {
		b.tokens = burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// admit takes a token for a message from client at now: the client's
// first, so one noisy client does not spend the others' share.
func (l *limiter) admit(client netip.Addr, now time.Time) Reason {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.clients[client]
	if b == nil {
		if len(l.clients) >= l.maxClients && now.Sub(l.lastSweep) >= sweepEvery {
			l.sweep(now)
		}
		if len(l.clients) < l.maxClients {
			b = &bucket{}
			l.clients[client] = b
		} else {
			b = &l.overflow
		}
	}
	if !b.take(l.per, now) {
		return ReasonRateClient
	}
	if !l.all.take(l.rate, now) {
		return ReasonRateAll
	}
	return ReasonNone
}

// sweep forgets the clients whose buckets have refilled.
func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	burst := max(2*l.per, 1)
	for a, b := range l.clients {
		if b.tokens+now.Sub(b.last).Seconds()*l.per >= burst {
			delete(l.clients, a)
		}
	}
}
