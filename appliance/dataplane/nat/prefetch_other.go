//go:build !amd64

package nat

import "sync/atomic"

// Without prefetch instructions (e1kbox images are amd64), Prefetch only
// parses and hashes.

func prefetchPipe(st *stripe, slot *atomic.Uint64, e *entry) {}

func prefetchKey(st *stripe, slot *atomic.Uint64) {}

func prefetchConn(e *entry, c *entryCold) {}

func prefetchSlot(p *uint32) {}
