package nat

import "sync/atomic"

// Prefetch instructions (PREFETCHT0): they ask for a cache line and
// return at once; they never fault, read nothing for the program and are
// no memory access to the race detector.

// prefetchStripe fetches the cache lines of stripe st and of the
// prefetchProbe slots from slot.
//
//go:noescape
func prefetchStripe(st *stripe, slot *atomic.Uint64)

// prefetchLines fetches every cache line of entry e.
//
//go:noescape
func prefetchLines(e *entry)
