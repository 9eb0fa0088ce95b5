package routing

import (
	"sync"
	"sync/atomic"
)

// MaxProbes bounds the probes the fast path may have asked for and no
// worker has sent yet (next hops: the gateway and a few LAN hosts).
const MaxProbes = 64

// Probes is the queue of neighbours the fast path wants probed. The fast
// path forwards a neighbour's traffic in the kernel, so the router no
// longer sees it and would let the neighbour go stale; asked about a next
// hop confirmed long ago, the router queues it here (Want) and a worker's
// Tick sends the probes (Take), whose answers keep the neighbour fresh and
// its flows in the kernel. Its zero value is an empty queue.
type Probes[T comparable] struct {
	mu sync.Mutex
	q  []T
	n  atomic.Int32 // len(q), for Take's check without the lock
}

// Want asks for a probe of x, once: x is not queued twice, nor beyond
// MaxProbes.
func (p *Probes[T]) Want(x T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, y := range p.q {
		if y == x {
			return
		}
	}
	if len(p.q) < MaxProbes {
		if p.q == nil {
			p.q = make([]T, 0, MaxProbes)
		}
		p.q = append(p.q, x)
		p.n.Store(int32(len(p.q)))
	}
}

// Take appends the queued probes to dst and empties the queue. It takes
// no lock when the queue is empty, as it is on almost every Tick.
func (p *Probes[T]) Take(dst []T) []T {
	if p.n.Load() == 0 {
		return dst
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dst = append(dst, p.q...)
	p.q = p.q[:0]
	p.n.Store(0)
	return dst
}
