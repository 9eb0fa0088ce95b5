package afpacket

import (
	"sync"
	"sync/atomic"
)

// lifecycle counts the users of a socket's mapping and descriptors and runs
// the final teardown once the socket is closed and the last user is gone.
type lifecycle struct {
	state atomic.Int64 // closedBit | number of holders
	once  sync.Once
	final func() error
	mu    sync.Mutex
	err   error
}

const closedBit = 1 << 62

func (l *lifecycle) hold() { l.state.Add(1) }

// acquire takes a reference unless the socket is closed.
func (l *lifecycle) acquire() bool {
	if l.state.Add(1)&closedBit != 0 {
		l.release()
		return false
	}
	return true
}

func (l *lifecycle) release() {
	if l.state.Add(-1) == closedBit {
		l.once.Do(l.finalize)
	}
}

func (l *lifecycle) closed() bool { return l.state.Load()&closedBit != 0 }

// markClosed sets the closed bit and reports whether this call set it.
func (l *lifecycle) markClosed() bool {
	for {
		old := l.state.Load()
		if old&closedBit != 0 {
			return false
		}
		if l.state.CompareAndSwap(old, old|closedBit) {
			return true
		}
	}
}

func (l *lifecycle) finalize() {
	var err error
	if l.final != nil {
		err = l.final()
	}
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// finalErr is the teardown error if teardown already ran.
func (l *lifecycle) finalErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
