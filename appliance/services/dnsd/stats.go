package dnsd

import (
	"math"
	"net/netip"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of the server's counters since New.
type Stats struct {
	QueriesUDP uint64 // queries received over UDP
	QueriesTCP uint64 // queries received over TCP
	// RateLimited are queries dropped because their client was over its rate.
	RateLimited uint64
	// Invalid are queries answered FORMERR, NOTIMP, REFUSED or BADVERS.
	Invalid uint64
	// Local are queries answered from local names and locally served zones.
	Local uint64
	// Any are ANY queries answered with the RFC 8482 HINFO.
	Any uint64

	CacheHits   uint64
	CacheMisses uint64 // forwarded queries not answered from the cache
	// Coalesced are misses that waited for an identical query in flight
	// instead of asking upstream themselves.
	Coalesced    uint64
	CacheEntries int
	CacheBytes   int

	UpstreamQueries  uint64 // exchanges sent upstream (UDP, and TCP retries)
	UpstreamFailures uint64 // exchanges that failed, timeouts included
	UpstreamTimeouts uint64
	// ServFail are forwarded queries answered SERVFAIL: no upstream, none
	// answered, or too many questions in flight.
	ServFail uint64
	// Truncated are UDP responses sent with TC set (the client retries over TCP).
	Truncated uint64

	// Latency is the round-trip time of successful upstream exchanges.
	Latency   Histogram
	Upstreams []UpstreamStats
}

// UpstreamStats are one upstream's counters.
type UpstreamStats struct {
	Addr     netip.AddrPort
	Queries  uint64
	Failures uint64 // timeouts included
	Timeouts uint64
	// Demoted says the upstream failed lately and is tried last.
	Demoted bool
}

// Histogram counts durations in fixed buckets.
type Histogram struct {
	Buckets []Bucket
	// P50 and P99 are the upper bounds of the buckets that hold the median
	// and the 99th percentile (the largest value seen when that is the
	// last bucket); zero when nothing was observed.
	P50, P99 time.Duration
	Max      time.Duration
}

// Bucket counts the durations up to Le that no lower bucket counts. The last
// bucket's Le is the largest time.Duration.
type Bucket struct {
	Le    time.Duration
	Count uint64
}

var latencyBounds = []time.Duration{
	250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second,
	math.MaxInt64,
}

// histogram is the concurrent recorder behind Histogram.
type histogram struct {
	counts [15]atomic.Uint64 // len(latencyBounds)
	max    atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for d > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

func (h *histogram) snapshot() Histogram {
	out := Histogram{Buckets: make([]Bucket, len(latencyBounds)), Max: time.Duration(h.max.Load())}
	var total uint64
	for i, le := range latencyBounds {
		out.Buckets[i] = Bucket{Le: le, Count: h.counts[i].Load()}
		total += out.Buckets[i].Count
	}
	out.P50 = out.quantile(total, 0.50)
	out.P99 = out.quantile(total, 0.99)
	return out
}

func (h Histogram) quantile(total uint64, q float64) time.Duration {
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, b := range h.Buckets {
		seen += b.Count
		if seen >= rank {
			if i == len(h.Buckets)-1 || b.Le > h.Max {
				return h.Max
			}
			return b.Le
		}
	}
	return h.Max
}

// counters are the server's atomic counters.
type counters struct {
	queriesUDP, queriesTCP, rateLimited, invalid, local, anyQ atomic.Uint64
	hits, misses, coalesced                                   atomic.Uint64
	upQueries, upFailures, upTimeouts, servFail, truncated    atomic.Uint64
	latency                                                   histogram
}
