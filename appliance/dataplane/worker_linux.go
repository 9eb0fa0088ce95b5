package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/hostport"
)

// workerDeps are what a worker uses of the engine that runs it.
type workerDeps struct {
	log   *slog.Logger
	stop  <-chan struct{} // closed when the engine stops
	wg    *sync.WaitGroup // the engine's goroutines; a worker calls Done
	start time.Time       // the origin of the engine's clock (FDB)
	host  *hostport.Port  // read by the host port's worker
	loop  *loopGuard      // loop protection (loop.go)
}

// worker is one goroutine serving one RX ring (or the host port) and
// owning its TX sockets.
type worker struct {
	id      int
	rulesID int // its rules.Set handle (and nat.Worker's)
	deps    *workerDeps
	port    *portInfo
	rx      *afpacket.Socket // nil for the host port's worker
	// txs holds the TX sockets this worker owns, by out port id (rx itself
	// at the ingress id). The engine replaces the slice (never changes
	// it) when a port is reopened; readers load it.
	txs   atomic.Pointer[[]*afpacket.Socket]
	stage *hostStage // this worker's path into the host port
	// quit stops this worker alone (its port is being restarted); done
	// is closed when its goroutine has returned.
	quit, done chan struct{}
	// update is a change of output ports handed to the running worker,
	// which installs it at its next batch and closes update.applied.
	update atomic.Pointer[workerUpdate]
	buf    []byte // the host port worker's read buffer
	cpu    int    // CPU from the plan, -1 for none
	fwd    *fwd
	shared *sharedCounters
	ahead  [natAhead]afpacket.Packet // natBlock's frames in flight

	pinned           atomic.Int64 // CPU actually pinned to, -1 if none
	running          atomic.Bool
	panics, restarts atomic.Uint64
	mu               sync.Mutex
	lastPanic        string
	stableSince      time.Time
}

// workerUpdate replaces a running worker's view of the ports: the port
// table (with reopened ports' new portInfo) and the TX paths to them.
type workerUpdate struct {
	ports   []*portInfo
	tx      map[uint16]txPort
	applied chan struct{}
}

// install takes over a port update (after flushing what was queued for
// the old paths) and signals it.
func (w *worker) install(u *workerUpdate) {
	w.fwd.flush()
	w.fwd.ports = u.ports
	for id, t := range u.tx {
		w.fwd.tx[id] = t
		w.fwd.dirty &^= 1 << id
	}
	close(u.applied)
}

// closeSockets closes the worker's RX ring and the TX sockets it owns.
func (w *worker) closeSockets() error {
	var errs []error
	if w.rx != nil {
		errs = append(errs, w.rx.Close())
	}
	for _, s := range w.txSockets() {
		if s != nil && s != w.rx {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// txSockets returns the TX sockets the worker owns, by out port id.
func (w *worker) txSockets() []*afpacket.Socket {
	if p := w.txs.Load(); p != nil {
		return *p
	}
	return nil
}

// batchHook, when set (by tests), runs at the start of every batch of
// every worker, on the worker's goroutine.
var batchHook atomic.Pointer[func(w *worker)]

// run is the worker goroutine: it locks its OS thread, pins it, and runs
// the loop, recovering a panic and restarting the loop with backoff.
func (w *worker) run() {
	defer w.deps.wg.Done()
	defer close(w.done)
	runtime.LockOSThread() // for good: the thread carries the CPU affinity and priority
	defer unpinThread()
	w.pin()
	w.raisePriority()
	backoff := minBackoff
	for {
		w.stableSince = time.Now()
		w.running.Store(true)
		err := w.safeLoop()
		w.running.Store(false)
		if err == nil {
			return
		}
		w.panics.Add(1)
		w.mu.Lock()
		w.lastPanic = err.Error()
		w.mu.Unlock()
		if time.Since(w.stableSince) > time.Minute {
			backoff = minBackoff
		}
		w.deps.log.Error("dataplane worker panicked; restarting", "worker", w.id, "port", w.port.name, "backoff", backoff, "err", err)
		select {
		case <-w.deps.stop:
			return
		case <-w.quit:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
		w.restarts.Add(1)
	}
}

// workerNice is the nice value of a worker's thread. A worker shares its
// CPU with the kernel's receive work whenever the softirq overflows into
// ksoftirqd (always, in the "same" placement) and with the management
// plane; at nice 0 the scheduler splits the CPU evenly and the RX ring
// overflows while the worker waits. -20 was no better, SCHED_FIFO worse
// and it can starve the management plane (docs/dataplane.md, Measured).
const workerNice = -10

// raisePriority gives the worker's thread workerNice. Failure (no
// CAP_SYS_NICE) is logged; the worker runs at its inherited priority.
func (w *worker) raisePriority() {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 0 /* SCHED_OTHER */, Nice: workerNice}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		w.deps.log.Warn("dataplane worker priority not raised", "worker", w.id, "port", w.port.name, "nice", workerNice, "err", err)
	}
}

// pin sets the thread's CPU affinity to the planned CPU. Failure (a CPU
// outside the process's cgroup) leaves the worker unpinned and is logged.
func (w *worker) pin() {
	w.pinned.Store(-1)
	if w.cpu < 0 {
		return
	}
	if err := pinThread(w.cpu); err != nil {
		w.deps.log.Warn("dataplane worker not pinned", "worker", w.id, "port", w.port.name, "cpu", w.cpu, "err", err)
		return
	}
	w.pinned.Store(int64(w.cpu))
}

// safeLoop runs the worker's loop and turns a panic into an error. It
// returns nil when the engine stops.
func (w *worker) safeLoop() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	if w.rx == nil {
		return w.hostLoop()
	}
	return w.ringLoop()
}

// wake ends the worker's idle wait now (rather than at its next tick):
// for work queued for it that cannot wait. Any goroutine may call it.
func (w *worker) wake() {
	if w.rx != nil {
		w.rx.Wake() // ErrClosed: the worker is stopping anyway
		return
	}
	if h := w.deps.host; h != nil {
		h.Wake()
	}
}

func (w *worker) stopped() bool {
	select {
	case <-w.deps.stop:
		return true
	case <-w.quit:
		return true
	default:
		return false
	}
}

// beginBatch loads the batch's configuration and clock, and installs a
// pending port update (after flushing what it queued for the old paths).
func (w *worker) beginBatch() {
	if u := w.update.Load(); u != nil {
		w.update.Store(nil)
		w.install(u)
	}
	now := time.Now()
	w.fwd.begin(now.UnixNano(), int64(now.Sub(w.deps.start)))
	w.fwd.probe()
	if h := batchHook.Load(); h != nil {
		(*h)(w)
	}
}

// endBatch runs the router's housekeeping (NAT mode), flushes the TX
// rings and publishes the counters.
func (w *worker) endBatch() {
	if w.fwd.nw != nil {
		w.fwd.natTick()
	}
	w.fwd.flush()
	c := &w.fwd.c
	c.cacheHits, c.cacheMisses = w.fwd.rw.CacheStats()
	w.shared.publish(c)
}

// wait is how long the worker may sleep for frames: pollTimeout, or
// natTickInterval while the router holds frames of this worker waiting
// for ARP resolution (they are released by this worker's Tick, whoever
// received the ARP reply) or frames stay queued on a TX ring whose flush
// failed (retried at the end of every batch).
func (w *worker) wait() time.Duration {
	if w.fwd.dirty != 0 || w.fwd.nw != nil && w.fwd.nw.Waiting() {
		return natTickInterval
	}
	return pollTimeout
}

// ringLoop forwards the frames of the AF_PACKET RX ring, one block per
// batch.
func (w *worker) ringLoop() error {
	var p afpacket.Packet
	for {
		b, err := w.rx.NextBlock(w.wait())
		if errors.Is(err, afpacket.ErrClosed) || w.stopped() {
			return nil
		}
		if err != nil {
			// ENETDOWN while the link is down, or a socket error: wait
			// a little; the socket works again once the link is back.
			select {
			case <-w.deps.stop:
				return nil
			case <-w.quit:
				return nil
			case <-time.After(downRetry):
			}
			w.beginBatch() // installs a port update even while the link is down
			w.endBatch()
			continue
		}
		w.beginBatch()
		if b == nil { // idle tick: retry queued frames, pick up rule swaps
			w.fwd.rw.Sync()
			w.endBatch()
			continue
		}
		if nw := w.fwd.nw; nw != nil && nw.Connections() >= natPrefetchMin {
			w.natBlock(b)
		} else {
			for b.Next(&p) {
				w.fwd.handle(p.Data, p.Len, p.HasVLAN, frame.VLANTag{TPID: p.VLANTPID, TCI: p.VLANTCI})
			}
		}
		w.rx.ReleaseBlock()
		w.endBatch()
	}
}

// natPrefetchMin is the connection count from which a NAT worker
// prefetches the conntrack lines of the frames ahead (nat.Worker.Prefetch).
// Only a tiny table stays in the caches between two frames of a flow: the
// RX ring and the kernel's buffers stream through them, so a plain lookup
// misses twice per frame; a table that fits the L1 cache gains nothing
// from prefetching (docs/dataplane.md, Measured).
var natPrefetchMin = 256

// natAhead is how many frames ahead of the one handled the NAT worker
// prefetches; more than the nat package's two-stage lag.
const natAhead = 8

// natBlock forwards a block like ringLoop, prefetching natAhead frames
// ahead of the one it handles. Frames stay valid until ReleaseBlock.
func (w *worker) natBlock(b *afpacket.Block) {
	q := &w.ahead
	n := 0
	for ; ; n++ {
		p := &q[n%natAhead]
		if n >= natAhead { // frame n-natAhead, prefetched natAhead frames ago
			w.fwd.handle(p.Data, p.Len, p.HasVLAN, frame.VLANTag{TPID: p.VLANTPID, TCI: p.VLANTCI})
		}
		if !b.Next(p) {
			break
		}
		w.fwd.natPrefetch(p.Data, p.HasVLAN)
	}
	for j := max(0, n-natAhead+1); j < n; j++ {
		p := &q[j%natAhead]
		w.fwd.handle(p.Data, p.Len, p.HasVLAN, frame.VLANTag{TPID: p.VLANTPID, TCI: p.VLANTCI})
	}
}

// hostBatch is the most frames the host port's worker reads per batch.
const hostBatch = 64

// hostLoop forwards the frames the kernel sends on the host port.
func (w *worker) hostLoop() error {
	host := w.deps.host
	for {
		if w.stopped() {
			return nil
		}
		w.beginBatch()
		n := 0
		for n < hostBatch {
			k, ok, err := host.Read(w.buf)
			if errors.Is(err, hostport.ErrClosed) {
				return nil
			}
			if err != nil || !ok {
				break
			}
			w.fwd.handle(w.buf[:min(k, len(w.buf))], k, false, frame.VLANTag{})
			n++
		}
		if n == 0 {
			w.fwd.rw.Sync()
		}
		w.endBatch()
		if n < hostBatch {
			if err := host.Wait(w.wait()); errors.Is(err, hostport.ErrClosed) {
				return nil
			}
		}
	}
}
