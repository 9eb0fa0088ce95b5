package route6

import (
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// pendFrame is a frame waiting for its next hop.
type pendFrame struct {
	buf   []byte
	n     int
	side  Side // egress
	hop   [16]byte
	since uint32
	state uint8 // 0 free, 1 waiting, 2 handed to Output
	kind  lookupKind
	seq   uint64 // order of queueing
}

// outFrame is a frame for Output.
type outFrame struct {
	port int
	b    []byte
}

// Worker is one dataplane worker's view of the Router. Its methods must
// be called from one goroutine.
type Worker struct {
	r        *Router
	lastTick int64 // the time of the last Tick (ns)
	sweepDue int64 // the worker's time not yet swept for (ns)
	rw       *rules.Worker
	key      rules.Key
	sec      uint32
	now      int64 // the call's time (ns)
	scratch  []byte
	pend     []pendFrame
	waiting  int
	// unknownWaiting are the queued frames to unknown destinations.
	unknownWaiting int
	pendSeq        uint64
	pendGen        uint64
	nsBufs         [][]byte
	nsUsed         int
	probes         []probeReq // scratch for the probes the fast path asked for
	out            []outFrame
	outHead        int
	errTok         tokens
	src            sources // the WAN sources' scan budgets
	in             frame.Inner
	c              counters
}

// NewWorker returns a worker; rw (may be nil) is its rule set worker for
// the forward chain.
func (r *Router) NewWorker(rw *rules.Worker) *Worker {
	w := &Worker{r: r, rw: rw, scratch: make([]byte, r.lim.MaxFrame), pend: make([]pendFrame, r.lim.Pending), src: newSources(r.seed),
		nsBufs: make([][]byte, 16), out: make([]outFrame, 0, r.lim.Pending+16), probes: make([]probeReq, 0, routing.MaxProbes)}
	for i := range w.pend {
		w.pend[i].buf = make([]byte, r.lim.MaxFrame)
	}
	for i := range w.nsBufs {
		w.nsBufs[i] = make([]byte, nsFrameLen)
	}
	r.mu.Lock()
	r.workers = append(r.workers, w)
	r.mu.Unlock()
	return w
}

// tokens is a per-worker token bucket of rate per second.
type tokens struct {
	n    int
	last uint32
}

func (t *tokens) take(rate int, now uint32) bool {
	if now != t.last {
		t.n, t.last = rate, now
	}
	if t.n <= 0 {
		return false
	}
	t.n--
	return true
}

// begin frees what the engine has sent since the last call.
func (w *Worker) begin(now int64) {
	w.sec, w.now = uint32(now/1e9), now
	w.out = w.out[:0]
	w.outHead = 0
	w.nsUsed = 0
	for i := range w.pend {
		if w.pend[i].state == 2 {
			w.pend[i].state = 0
		}
	}
}

// Output returns the next frame the worker wants transmitted besides the
// Results: neighbour solicitations (DAD probes among them), router
// solicitations and frames released from the queue, valid until the
// worker's next Process or Tick.
func (w *Worker) Output() (port int, b []byte, ok bool) {
	if w.outHead == len(w.out) {
		return 0, nil, false
	}
	o := w.out[w.outHead]
	w.outHead++
	return o.port, o.b, true
}

// Waiting reports frames queued for a neighbour: call Tick every few ms.
func (w *Worker) Waiting() bool { return w.waiting != 0 }

// Tick releases the frames whose next hop got resolved, fails those that
// waited too long, sends the WAN's due DAD probes and router solicitation
// and sweeps a slice of the connection table.
func (w *Worker) Tick(now int64) {
	w.begin(now)
	s := w.r.cfg.Load()
	if s != nil && w.waiting != 0 {
		w.flush(s)
	}
	if s != nil && w.r.wan.due.Load() {
		w.sendWAN(s, now)
	}
	if s != nil {
		w.refreshProbes(s)
	}
	// The sweep is paced by the worker's time, not its Ticks: a busy
	// worker ticks after every batch, an idle one once a second.
	if w.lastTick != 0 {
		w.sweepDue += now - w.lastTick
	}
	w.lastTick = now
	slices := min(w.sweepDue/sweepEvery, sweepMaxSlices)
	if slices == 0 {
		return
	}
	if w.sweepDue -= slices * sweepEvery; slices == sweepMaxSlices {
		w.sweepDue = 0 // an idle worker's second: no debt carried
	}
	n := int(slices) * sweepBuckets
	pos := w.r.sweepPos.Add(uint64(n)) - uint64(n)
	w.r.ct.sweep(&pos, n, w.sec)
}

// A worker sweeps sweepBuckets conntrack buckets per sweepEvery of its
// time, at most sweepMaxSlices times as many in one Tick: 640 buckets a
// second, the default table (65536 connections, 16384 buckets) in 26 s.
// Inserts reuse expired ways and lookups and counts skip them, so the
// sweep only returns the table's used count to zero once the connections
// are gone. A slice costs about 850 ns (BenchmarkTick), which a busy
// worker paid after every batch when the sweep was paced by Ticks.
const (
	sweepBuckets   = 64
	sweepEvery     = int64(100e6) // 100 ms
	sweepMaxSlices = 16
)

// Process handles one received IPv6 frame that frame.Parse parsed into f
// (successfully); pkt is rewritten in place when forwarded.
func (w *Worker) Process(now int64, inPort int, pkt []byte, f *frame.Frame) Result {
	w.begin(now)
	s := w.r.cfg.Load()
	var res Result
	switch {
	case s == nil:
		res = drop(ReasonOff)
	case inPort == s.side[LAN].ID:
		res = w.process(s, LAN, pkt, f)
	case inPort == s.side[WAN].ID:
		res = w.process(s, WAN, pkt, f)
	case s.host != 0 && inPort == s.host:
		res = w.fromHost(s, pkt, f)
	default:
		res = drop(ReasonUnknownPort)
	}
	if s != nil && w.waiting != 0 && w.r.neigh.resolved.Load() != w.pendGen {
		w.flush(s)
	}
	w.c.count(&res)
	return res
}
