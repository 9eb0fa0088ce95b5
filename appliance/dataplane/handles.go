package dataplane

// spareWorkers is how many rules handles beyond the configured workers an
// engine keeps, so that a port can restart with more workers in place.
const spareWorkers = 16

// handlePool hands out the rules.Set worker handles (0..size-1): a
// handle is a worker's flow cache and counters in the rule set, so a
// restarted worker takes over its predecessor's and handles of stopped
// workers are reused.
type handlePool struct {
	next, size int
	free       []int
}

func newHandlePool(size int) *handlePool { return &handlePool{size: size} }

// get returns an unused handle; false when all size handles are in use.
func (p *handlePool) get() (int, bool) {
	switch {
	case len(p.free) > 0:
		h := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		return h, true
	case p.next < p.size:
		p.next++
		return p.next - 1, true
	}
	return 0, false
}

// put returns handle h to the pool.
func (p *handlePool) put(h int) { p.free = append(p.free, h) }
