package route6

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// Protocol numbers and TCP flags used here.
const (
	protoTCP    = frame.ProtoTCP
	protoUDP    = frame.ProtoUDP
	protoICMPv6 = frame.ProtoICMPv6
	tcpFin      = frame.TCPFin
	tcpSyn      = frame.TCPSyn
	tcpRst      = frame.TCPRst
	tcpAck      = frame.TCPAck
)

// Router is the IPv6 router shared by the workers: the configuration,
// the connection table and the neighbour cache.
type Router struct {
	cfg      cfgPtr
	ct       *conntrack
	neigh    *neighbours
	lim      Limits
	gw       atomic.Pointer[gateway] // learnt from the WAN's RAs
	mu       sync.Mutex              // guards conf and workers
	conf     Config
	workers  []*Worker
	sweepPos atomic.Uint64
	off      offloadState // the fast path's (offload.go)
	wan      *wanTable    // the WAN addresses (wanaddr.go); lock order r.mu, then wan.mu
}

// gateway is a default router learnt from an RA, until a time.
type gateway struct {
	addr  [16]byte
	until uint32
}

// New checks cfg, allocates the tables and returns the router.
func New(cfg Config, lim Limits) (*Router, error) {
	if lim.MaxConns == 0 {
		lim.MaxConns = 65536
	}
	if lim.Neighbours == 0 {
		lim.Neighbours = 1024
	}
	if lim.Pending == 0 {
		lim.Pending = 64
	}
	if lim.MaxFrame == 0 {
		lim.MaxFrame = 9216 + 18
	}
	if lim.MaxConns < 0 || lim.Neighbours < 0 || lim.Pending < 0 || lim.MaxFrame < 1280+18 {
		return nil, fmt.Errorf("route6: limits %+v out of range", lim)
	}
	r := &Router{ct: newConntrack(lim.MaxConns), neigh: newNeighbours(lim.Neighbours), lim: lim, wan: &wanTable{}}
	if err := r.SetConfig(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// SetConfig replaces the configuration; connections, neighbours and the
// WAN addresses of SetWANAddressing stay (a new WAN link-local address is
// probed by DAD, but used at once).
func (r *Router) SetConfig(cfg Config) error {
	s, err := cfg.check()
	if err != nil {
		return fmt.Errorf("route6: %w", err)
	}
	r.mu.Lock()
	r.conf = cfg
	r.wan.mu.Lock()
	r.wan.linkLocal(s.side[WAN].Addrs[0].As16())
	r.storeLocked(s)
	r.wan.mu.Unlock()
	r.mu.Unlock()
	r.changed()
	return nil
}

// Config returns the configuration in force.
func (r *Router) Config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conf
}

// SetPrefixes changes what a delegation decides, keeping the ports: the
// LAN's prefixes, the delegated ones, and the box's global addresses on
// the LAN (after its link-local ones, which stay). The WAN's come from
// SetWANAddressing.
func (r *Router) SetPrefixes(lan, delegated []netip.Prefix, lanAddrs []netip.Addr) error {
	cfg := r.Config()
	cfg.LANPrefixes, cfg.Delegated = lan, delegated
	var a []netip.Addr
	for _, x := range cfg.LAN.Addrs {
		if x.IsLinkLocalUnicast() {
			a = append(a, x)
		}
	}
	cfg.LAN.Addrs = append(a, lanAddrs...)
	return r.SetConfig(cfg)
}

// Gateway is the WAN next hop in use (configured or learnt), if any.
func (r *Router) Gateway(now int64) (netip.Addr, bool) {
	a, ok := r.gateway(r.cfg.Load(), uint32(now/1e9))
	return netip.AddrFrom16(a), ok
}

func (r *Router) gateway(s *snapshot, now uint32) ([16]byte, bool) {
	if s.gateway != ([16]byte{}) {
		return s.gateway, true
	}
	if g := r.gw.Load(); g != nil && now < g.until {
		return g.addr, true
	}
	return [16]byte{}, false
}

// Stats sums the workers' counters.
func (r *Router) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s Stats
	for _, w := range r.workers {
		w.c.add(&s)
	}
	s.Actions[routing.Forward] += r.off.forwarded.Load()
	s.DADFailures = r.wan.dadFail.Load()
	return s
}

// Conns lists up to max live connections at now (Unix nanoseconds).
func (r *Router) Conns(max int, now int64) []Conn { return r.ct.list(nil, max, uint32(now/1e9)) }

// EachConn calls fn with every live connection at now (Unix
// nanoseconds) until fn returns false. It walks the table a bucket at a
// time, copying a bucket's few entries under its lock and calling fn
// without it, so a slow fn (a web page being built) never holds up a
// worker; a connection opened or closed during the walk may be missed.
// c is valid only during the call.
func (r *Router) EachConn(now int64, fn func(c *Conn) bool) { r.ct.each(uint32(now/1e9), fn) }

// ConnCount is the number of live connections at now.
func (r *Router) ConnCount(now int64) int { return r.ct.count(uint32(now / 1e9)) }

// Neighbours lists the neighbour cache at now.
func (r *Router) Neighbours(now int64) []Neighbour { return r.neigh.list(nil, uint32(now/1e9)) }

// pendFrame is a frame waiting for its next hop.
type pendFrame struct {
	buf   []byte
	n     int
	side  Side // egress
	hop   [16]byte
	since uint32
	state uint8 // 0 free, 1 waiting, 2 handed to Output
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
	scratch  []byte
	pend     []pendFrame
	waiting  int
	pendGen  uint64
	nsBufs   [][]byte
	nsUsed   int
	probes   []probeReq // scratch for the probes the fast path asked for
	out      []outFrame
	outHead  int
	errTok   tokens
	echoTok  tokens
	in       frame.Inner
	c        counters
}

// NewWorker returns a worker; rw (may be nil) is its rule set worker for
// the forward chain.
func (r *Router) NewWorker(rw *rules.Worker) *Worker {
	w := &Worker{r: r, rw: rw, scratch: make([]byte, r.lim.MaxFrame), pend: make([]pendFrame, r.lim.Pending),
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
	w.sec = uint32(now / 1e9)
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
