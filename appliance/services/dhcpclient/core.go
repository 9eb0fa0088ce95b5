package dhcpclient

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Lease is the constraint on a client's lease type: a pointer whose Clone
// copies it deeply (nil for nil).
type Lease[L any] interface{ Clone() L }

// Machine is a client's protocol state machine. Core.Run calls its methods
// on one goroutine, with the clock's time.
type Machine[F any] interface {
	// Start begins the first exchange.
	Start(now time.Time)
	// WakeAt is the next deadline.
	WakeAt() time.Time
	// Tick acts on the deadlines that have passed.
	Tick(now time.Time)
	// Handle takes a frame the decoder accepted.
	Handle(f F, now time.Time)
	// Woken takes a Core.Wake.
	Woken(now time.Time)
}

// Decoder checks a frame from the transport and returns what the machine
// takes, or why the frame is of no use. It may keep nothing of frame,
// whose buffer is reused.
type Decoder[F any] func(frame []byte, csumValid bool) (F, string)

// Core runs a client's Machine over its transport and keeps what other
// goroutines may read meanwhile: the lease in use (L) and the stats. F is
// what the client's decoder makes of a frame. Its methods may be called
// from any goroutine.
type Core[L Lease[L], F any] struct {
	// Clock is the time source and Open opens the transport; tests set
	// them before the first Run.
	Clock Clock
	Open  Opener
	// Log is the client's log, with its interface.
	Log *slog.Logger

	name  string        // the client's package: its errors begin with it
	topic string        // the message Fail logs
	wake  chan struct{} // Wake's signal

	mu    sync.Mutex
	lease L
	stats counters
	run   *runCtl[F] // non-nil while Run runs
}

// runCtl lets Stop reach a running machine.
type runCtl[F any] struct {
	stop chan stopCall[F]
	done chan struct{}
}

type stopCall[F any] struct {
	fn   func(Machine[F]) error
	done chan error
}

// NewCore returns the core of the client name (errors begin with it) on
// the interface iface, which logs to log (nil: slog.Default) and records
// failures as topic; open opens its transport. Nothing is opened before
// Run.
func NewCore[L Lease[L], F any](name, topic, iface string, log *slog.Logger, open Opener) *Core[L, F] {
	log = cmp.Or(log, slog.Default())
	return &Core[L, F]{Clock: RealClock{}, Open: open, Log: log.With("iface", iface), name: name, topic: topic,
		wake: make(chan struct{}, 1), stats: newCounters()}
}

// Run opens the transport in the calling thread's network namespace and
// drives the machine newMachine makes for it until ctx is done or Stop
// ends it: it returns nil then, and an error only when the transport
// cannot be opened or Run is already running. Meanwhile a goroutine reads
// the transport: frames decode refuses are counted in Stats.Ignored by
// reason, and when the machine falls behind by DropQueueFull. At the end
// the state is stopped; the lease stays. Run may be called again after
// it returned.
func (c *Core[L, F]) Run(ctx context.Context, decode Decoder[F], newMachine func(tr Transport, mtu int) Machine[F]) error {
	ctl := &runCtl[F]{stop: make(chan stopCall[F]), done: make(chan struct{})}
	c.mu.Lock()
	if c.run != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: Run is already running", c.name)
	}
	c.run = ctl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.run = nil
		c.stats.state = StateStopped
		c.mu.Unlock()
		close(ctl.done)
	}()

	tr, mtu, err := c.Open()
	if err != nil {
		err = fmt.Errorf("%s: %w", c.name, err)
		c.Fail(err)
		return err
	}
	frames := make(chan F, 32)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.readLoop(tr, decode, frames, stop) })
	defer func() {
		close(stop)
		tr.Close()
		wg.Wait()
	}()
	return c.loop(ctx, newMachine(tr, mtu), frames, ctl.stop)
}

// loop is the event loop: one timer for the machine's next deadline, the
// frames, Wake and Stop.
func (c *Core[L, F]) loop(ctx context.Context, m Machine[F], frames <-chan F, stops <-chan stopCall[F]) error {
	m.Start(c.Clock.Now())
	for {
		fire, stop := c.Clock.Timer(m.WakeAt())
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-fire:
			m.Tick(c.Clock.Now())
		case f := <-frames:
			m.Handle(f, c.Clock.Now())
		case <-c.wake:
			m.Woken(c.Clock.Now())
		case call := <-stops:
			stop()
			call.done <- call.fn(m)
			return nil
		}
		stop()
	}
}

// Stop runs fn with the running machine on Run's goroutine, ends Run and
// returns fn's error. ran is false when no Run was running or it ended
// before it took fn; when ctx ends first, ran is true and err ctx's.
func (c *Core[L, F]) Stop(ctx context.Context, fn func(Machine[F]) error) (ran bool, err error) {
	c.mu.Lock()
	ctl := c.run
	c.mu.Unlock()
	if ctl == nil {
		return false, nil
	}
	done := make(chan error, 1)
	select {
	case ctl.stop <- stopCall[F]{fn: fn, done: done}:
		select {
		case err := <-done:
			return true, err
		case <-ctx.Done():
			return true, ctx.Err()
		}
	case <-ctl.done:
		return false, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// Wake calls the machine's Woken soon, once for any number of Wakes
// before it; a Wake outside Run waits for the next Run. It does not block.
func (c *Core[L, F]) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Current returns a copy of the lease in use, or nil.
func (c *Core[L, F]) Current() L {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease.Clone()
}

// SetLease records a copy of l as the lease in use (nil: none).
func (c *Core[L, F]) SetLease(l L) {
	l = l.Clone()
	c.mu.Lock()
	c.lease = l
	c.mu.Unlock()
}
