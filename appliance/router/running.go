package router

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// running is a service and the cancel of its goroutine.
type running[S any] struct {
	s      S
	cancel context.CancelFunc
	done   chan struct{}
	on     bool
}

// serviceRetry is how long a service whose serve returned waits before it
// runs again (its interface may be missing while the dataplane restarts).
var serviceRetry = 5 * time.Second

// start runs serve(ctx) on a goroutine of its own, again after
// serviceRetry whenever it returns before stop.
func (r *running[S]) start(s S, serve func(context.Context) error, log *slog.Logger, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	r.s, r.cancel, r.done, r.on = s, cancel, make(chan struct{}), true
	go func() {
		defer close(r.done)
		for {
			err := serve(ctx)
			if ctx.Err() != nil {
				return
			}
			log.Error("service stopped; starting it again", "service", name, "err", err, "in", serviceRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(serviceRetry):
			}
		}
	}()
}

// stop ends the service and waits for its goroutine.
func (r *running[S]) stop() {
	if !r.on {
		return
	}
	r.cancel()
	<-r.done
	var zero S
	r.s, r.on = zero, false
}

// update gives the running service cfg, or starts one that mk makes
// (logging with the service's name) and serve runs.
func update[S interface{ Update(C) error }, C any](r *running[S], cfg C, mk func(C, *slog.Logger) (S, error),
	serve func(S, context.Context) error, log *slog.Logger, name string) error {
	if r.on {
		return r.s.Update(cfg)
	}
	s, err := mk(cfg, log.With("service", name))
	if err != nil {
		return err
	}
	r.start(s, func(ctx context.Context) error { return serve(s, ctx) }, log, name)
	return nil
}

// leaseClient is a WAN client (DHCPv4 or DHCPv6) that runs, what it is
// bound to, and its leases on their way to the lease loop. gen counts
// the client's runs: the leases of a run stopped since are stale.
type leaseClient[C any, L interface{ Clone() L }] struct {
	running[C]
	at   string
	gen  uint64
	slot leaseSlot[L]
}

// begin runs client c, bound to at: run is its Run, whose leases go to
// the slot.
func (lc *leaseClient[C, L]) begin(c C, at string, run func(context.Context, func(old, new L)) error, log *slog.Logger, name string) {
	lc.at = at
	lc.gen++
	gen := lc.gen
	lc.start(c, func(ctx context.Context) error {
		return run(ctx, func(_, l L) { lc.slot.put(gen, l) })
	}, log, name)
}

// end stops the client, if it runs, and says whether it did.
func (lc *leaseClient[C, L]) end() bool {
	if !lc.on {
		return false
	}
	lc.stop()
	lc.at = ""
	lc.gen++
	return true
}

// leaseSlot is the latest lease of a client run, for the lease loop,
// which takes it without waiting for the router's lock (Apply may hold
// that while it stops the client).
type leaseSlot[L interface{ Clone() L }] struct {
	mu   sync.Mutex
	l    L
	gen  uint64
	set  bool
	wake chan struct{}
}

func (s *leaseSlot[L]) put(gen uint64, l L) {
	s.mu.Lock()
	s.l, s.gen, s.set = l.Clone(), gen, true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *leaseSlot[L]) take() (gen uint64, l L, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, gen, ok = s.l, s.gen, s.set
	var zero L
	s.l, s.set = zero, false
	return gen, l, ok
}
