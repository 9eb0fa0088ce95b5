package route6

import (
	"encoding/binary"

	"e1kbox/rules"
)

// ScanLimits bound the new connections from the WAN (inbound echo
// requests, and what forward rules accept) to LAN addresses the neighbour
// cache has no resolved entry for: what a scan of the LAN's /64 makes, one
// incomplete entry and its solicitations per address. Traffic to a known
// neighbour, or of a known connection, is never limited by them, so a
// scan cannot cut the LAN's hosts off. Zero fields take the defaults.
type ScanLimits struct {
	// PerSource is the rate (a second) of one WAN source address and
	// PerPrefix of its /64, with a second's worth as a burst, per worker:
	// a host has its /64's addresses to pick from, and a scan from one
	// address leaves the rest of its /64 room. Defaults 10 and 50.
	PerSource, PerPrefix int
	// Total is the rate of all sources together, over all workers.
	// Default 100.
	Total int
}

// The default scan limits.
const (
	defaultPerSource = 10
	defaultPerPrefix = 50
	defaultScanTotal = 100
)

// tokenRate is a token bucket's rate in GCRA's terms: ns per token, and
// how far ahead of now its bucket may run (the burst).
type tokenRate struct{ interval, burst int64 }

func rateOf(perSecond int) tokenRate {
	iv := int64(1e9) / int64(perSecond)
	return tokenRate{interval: iv, burst: iv * int64(perSecond)}
}

// scanRates are the checked ScanLimits.
type scanRates struct {
	source, prefix tokenRate
	total          *rules.Limiter
}

func (l ScanLimits) rates() scanRates {
	src, pfx, tot := orDefault(l.PerSource, defaultPerSource), orDefault(l.PerPrefix, defaultPerPrefix), orDefault(l.Total, defaultScanTotal)
	return scanRates{source: rateOf(src), prefix: rateOf(pfx), total: rules.NewLimiter(float64(tot), tot)}
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// sources is a worker's token buckets of WAN sources (addresses and /64s,
// by a keyed hash): 4-way sets, a source taking the way whose bucket is
// fullest when it has none. A full bucket is what a new one is, so that
// forgets nothing unless four sources of the set are all being limited.
type sources struct {
	slots []sourceSlot
	mask  uint64
	seed  uint64
}

type sourceSlot struct {
	key uint64
	tat int64 // GCRA's theoretical arrival time of the next token (ns)
}

const (
	sourceWays  = 4
	sourceSlots = 1024
)

func newSources(seed uint64) sources {
	return sources{slots: make([]sourceSlot, sourceSlots), mask: sourceSlots/sourceWays - 1, seed: seed}
}

// mix is a 64-bit finalizer (murmur3's).
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// allow takes a token of key's bucket at now (ns), if it has one.
func (t *sources) allow(key uint64, now int64, r tokenRate) bool {
	set := t.slots[(key>>32&t.mask)*sourceWays:][:sourceWays]
	v := 0
	for i := range set {
		if set[i].key == key {
			v = i
			break
		}
		if set[i].tat < set[v].tat {
			v = i
		}
	}
	e := &set[v]
	if e.key != key {
		*e = sourceSlot{key: key, tat: now}
	}
	tat := max(e.tat, now)
	if tat+r.interval-now > r.burst {
		return false
	}
	e.tat = tat + r.interval
	return true
}

// scanCheck takes the tokens of a new connection from the WAN source src
// to an unknown LAN address: its address's, its /64's, and the total's.
func (w *Worker) scanCheck(s *snapshot, src *[16]byte) Reason {
	prefix := mix(binary.BigEndian.Uint64(src[:8]) ^ w.src.seed)
	addr := mix(prefix ^ binary.BigEndian.Uint64(src[8:]))
	if !w.src.allow(addr, w.now, s.scan.source) || !w.src.allow(prefix, w.now, s.scan.prefix) {
		return ReasonScanSource
	}
	if !s.scan.total.Allow(w.now) {
		return ReasonScanTotal
	}
	return ReasonNone
}
