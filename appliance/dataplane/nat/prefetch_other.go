//go:build !amd64

package nat

import "sync/atomic"

// Without prefetch instructions (e1kbox images are amd64), Prefetch only
// parses and hashes.

func prefetchStripe(st *stripe, slot *atomic.Uint64) {}

func prefetchLines(e *entry) {}
