package nat

import "sync/atomic"

// prefetchPipe asks for the cache lines of stripe st, of the
// prefetchProbe slots from slot and of entry e with prefetch
// instructions (PREFETCHT0): they return at once, never fault, read
// nothing for the program and are no memory access to the race detector.
// One call for both stages of the pipeline: an assembly function is not
// inlined.
//
//go:noescape
func prefetchPipe(st *stripe, slot *atomic.Uint64, e *entry)

// prefetchKey is prefetchPipe's first stage alone: the cache lines of
// stripe st and of the prefetchProbe slots from slot.
//
//go:noescape
func prefetchKey(st *stripe, slot *atomic.Uint64)

// prefetchConn asks for the cache lines of entry e and its cold part c.
//
//go:noescape
func prefetchConn(e *entry, c *entryCold)

// prefetchSlot asks for the cache line of a free-list slot.
//
//go:noescape
func prefetchSlot(p *uint32)
