package routing

import "sync/atomic"

// AddCounts adds each of a worker's counters to the sum at the same index
// of dst (a Stats array of the same length).
func AddCounts(dst []uint64, src []atomic.Uint64) {
	for i := range src {
		dst[i] += src[i].Load()
	}
}
