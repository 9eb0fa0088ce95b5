package dataplane

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

// The fast path (package fastpath) forwards established flows in the
// kernel: the workers offer the flows they forward (fpworker_linux.go),
// and the engine's fast path manager, one goroutine, installs them,
// reports what the kernel forwarded back into the tables every
// fpHarvestInterval and evicts flows that stopped being what the slow path
// would forward (fpflows_linux.go). docs/dataplane.md describes it.

// Timing and sizes of the fast path manager.
const (
	// fpHarvestInterval is how often the manager reads the kernel's flow
	// counters into conntrack, the FDB, the rules and the port counters.
	fpHarvestInterval = 500 * time.Millisecond
	// fpMaxTurns is the most harvests that pass between one flow's
	// turns, when its counts go into conntrack, the FDB and the rules and
	// it is judged (harvest, turnsFor); the port counters take every
	// harvest.
	fpMaxTurns = 16
	// fpIdle is how long a flow may go without a packet before it leaves
	// the kernel (a NAT flow leaves after half its timeout if that is
	// shorter): the maps hold the active flows.
	fpIdle = 30 * time.Second
	// fpOffers is the depth of the workers' offer queue; offers beyond
	// it are dropped (the flow is offered again by its next frames).
	fpOffers = 4096
	// fpReoffer is how long a worker waits before it offers the same
	// flow again (while the first offer is pending or was refused).
	fpReoffer = 250 * time.Millisecond
)

// fastPath is the engine's fast path: the loaded program, the flows it
// installed and the counters of what the kernel forwarded. One goroutine
// (run) owns the flows; the workers reach it through offers and, for the
// rare events that cannot wait (a TCP FIN or RST of an offloaded
// connection, a station that moved), through its lock.
type fastPath struct {
	prog   *fastpath.Program
	mode   fastpath.Mode
	reason string // why the fast path is off ("" while it runs)
	kernel fastpath.KernelReport
	e      *Engine

	offers chan fpOffer

	mu       sync.Mutex // the flows and everything below
	ifindex  []int      // by port id; 0 where the program is not attached
	nat      map[nat.Tuple]*fpNAT
	natRev   map[nat.Tuple]*fpNAT // by the other direction's tuple
	r6       map[route6.Flow]*fpR6
	r6Rev    map[route6.Flow]*fpR6 // by the other direction's flow
	hops6    map[fpHop6]bool       // a harvest's IPv6 next hops found fresh (or not)
	gw6      [16]byte              // a harvest's route6 gateway, when gw6ok
	gw6ok    bool
	closed   bool
	pairs    map[fastpath.PairKey]*fpPair
	micros   map[fastpath.MicroKey]*fpMicro
	free     []uint32 // free stats slots, the lowest last
	high     uint32   // slots below high have been used
	stats    []fastpath.Stats
	prev     []fastpath.Stats // what was counted of each slot so far
	reader   *fastpath.StatsReader
	dying    []fpDying // evicted flows whose last counts are still to read
	rw       *rules.Worker
	hops     map[fpHop]bool // a harvest's next hops found fresh (or not)
	slots    []fpSlot       // by stats slot
	turn     uint32         // the harvests so far (whose turn it is)
	turns    []uint32       // the turn pass's slots (reused)
	portSums fpPortSums     // the count pass's scratch
	gen      uint64         // the rule table the flows were judged by
	flagsOK  bool           // the table's forward chain does not match TCP flags

	// mark counts, by tuple hash, the NAT and IPv6 flows installed for
	// either direction of a connection: a worker that sees a TCP SYN, FIN
	// or RST of a marked tuple takes the connection out of the kernel
	// first.
	mark [fpMarks]atomic.Int32

	c fpCounters
}

const fpMarks = 1 << 16

// fpCounters are the fast path's counters, read by Snapshot.
type fpCounters struct {
	rxPackets, rxBytes [MaxPorts + 1]atomic.Uint64 // by port id
	txPackets, txBytes [MaxPorts + 1]atomic.Uint64
	installed, evicted atomic.Uint64
	refused, dropped   atomic.Uint64 // offers refused by the manager, lost on a full queue
	harvests           atomic.Uint64
	errors             atomic.Uint64
	lastErr            atomic.Pointer[string]
}

// FastPathStats are the fast path's state and counters (Snapshot).
type FastPathStats struct {
	// Mode is the hook it runs in ("tcx", "xdp"), or "off".
	Mode string `json:"mode"`
	// Reason says why it is off: turned off in the config, or what the
	// kernel lacks or refused.
	Reason string `json:"reason,omitempty"`
	// Kernel is what the kernel offers (config options, BPF JIT).
	Kernel fastpath.KernelReport `json:"kernel"`
	// NATFlows, IPv6Flows (routed IPv6 connection directions), Pairs and
	// Microflows are the flows in the kernel now.
	NATFlows   int `json:"natFlows"`
	IPv6Flows  int `json:"ipv6Flows"`
	Pairs      int `json:"pairs"`
	Microflows int `json:"microflows"`
	// Packets and Bytes the kernel forwarded (also in the ports' counters).
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Installed and Evicted count flows; Refused offers the manager
	// turned down (the flow changed, or it is not one the fast path can
	// forward), Dropped offers lost on a full queue.
	Installed uint64 `json:"installed"`
	Evicted   uint64 `json:"evicted"`
	Refused   uint64 `json:"refused"`
	Dropped   uint64 `json:"dropped"`
	// Punts are the frames the kernel program left to the rings, by
	// reason (fastpath.Punt names).
	Punts     map[string]uint64 `json:"punts,omitempty"`
	Errors    uint64            `json:"errors"`
	LastError string            `json:"lastError,omitempty"`
}

// openFastPath loads and attaches the fast path for cfg (after the ports
// and tables, before the workers, whose RX rings get its socket filter).
// Failing that, it records why and the engine runs without it.
func (e *Engine) openFastPath(cfg *Config) {
	fp := &fastPath{e: e, kernel: fastpath.ReadKernel(), offers: make(chan fpOffer, fpOffers),
		nat: map[nat.Tuple]*fpNAT{}, natRev: map[nat.Tuple]*fpNAT{}, hops: map[fpHop]bool{},
		r6: map[route6.Flow]*fpR6{}, r6Rev: map[route6.Flow]*fpR6{}, hops6: map[fpHop6]bool{}, pairs: map[fastpath.PairKey]*fpPair{}, micros: map[fastpath.MicroKey]*fpMicro{}}
	e.fp = fp
	mode := fastpath.ModeTCX
	switch cfg.FastPath {
	case FastPathOff:
		fp.reason = "turned off in the config"
		return
	case FastPathXDP:
		mode = fastpath.ModeXDP
	}
	natFlows := fastpath.DefaultNATFlows
	if cfg.NAT != nil {
		natFlows = min(2*orDefault(cfg.NAT.MaxConns, nat.DefaultMaxConns), 1<<17)
	}
	r6Flows := 64 // no IPv6 router: the map stays empty
	if e.IPv6() != nil {
		// The maps hold the active flows (idle ones leave); a flow
		// beyond them stays on the rings.
		r6Flows = fastpath.DefaultIPv6Flows
	}
	prog, err := fastpath.Load(fastpath.Options{Mode: mode, NATFlows: natFlows, IPv6Flows: r6Flows})
	if err != nil {
		fp.reason = err.Error()
		e.log.Warn("dataplane: no fast path; the rings carry every frame", "err", err)
		return
	}
	h, ok := e.b.handles.get()
	if !ok {
		prog.Close()
		fp.reason = "no rules handle left for the fast path's counters"
		return
	}
	fp.rw = e.rules.Worker(h)
	fp.ifindex = make([]int, len(e.ports))
	for _, pi := range e.ports[1:] {
		if pi.host {
			continue
		}
		if err := fp.attach(prog, pi); err != nil {
			prog.Close()
			fp.ifindex = nil
			fp.reason = err.Error()
			e.log.Warn("dataplane: no fast path; the rings carry every frame", "err", err)
			return
		}
	}
	fp.prog, fp.mode = prog, mode
	if mode == fastpath.ModeTCX {
		e.b.bindAfterTCX(cfg, e.ports)
	}
	fp.reader = prog.NewStatsReader()
	fp.stats = make([]fastpath.Stats, prog.Slots())
	fp.prev = make([]fastpath.Stats, prog.Slots())
	fp.slots = make([]fpSlot, prog.Slots())
	fp.free = make([]uint32, prog.Slots())
	for i := range fp.free {
		fp.free[i] = uint32(len(fp.free) - 1 - i)
	}
	if v6 := e.IPv6(); v6 != nil {
		v6.OnChange(fp.v6Changed)
	}
	e.log.Info("dataplane fast path", "mode", mode, "jit", fp.kernel.JIT)
}

// attach runs the program on data port pi. In tcx mode it needs the
// port's kernel drop (ingressdrop), which drops what the fast path leaves
// to the rings once they have it.
func (fp *fastPath) attach(prog *fastpath.Program, pi *portInfo) error {
	if prog.Mode() == fastpath.ModeTCX && pi.kdrop == nil {
		return fmt.Errorf("fastpath: port %s has no tcx ingress (%s)", pi.name, pi.kdropErr)
	}
	ifi, err := net.InterfaceByName(pi.iface)
	if err != nil {
		return fmt.Errorf("fastpath: port %s: %w", pi.name, err)
	}
	if err := prog.Attach(ifi.Index); err != nil {
		return fmt.Errorf("fastpath: port %s: %w", pi.name, err)
	}
	fp.ifindex[pi.id] = ifi.Index
	return nil
}

// on reports whether the fast path runs.
func (fp *fastPath) on() bool { return fp != nil && fp.prog != nil }

// filterFD is the socket filter for the RX rings, 0 for none.
func (fp *fastPath) filterFD() int {
	if !fp.on() {
		return 0
	}
	return max(fp.prog.FilterFD(), 0)
}

// close detaches the program and releases it.
func (fp *fastPath) close() error {
	if !fp.on() {
		return nil
	}
	if v6 := fp.e.IPv6(); v6 != nil {
		v6.OnChange(nil)
	}
	fp.mu.Lock()
	fp.closed = true
	fp.mu.Unlock()
	return fp.prog.Close()
}

// run is the manager goroutine: it installs offered flows and harvests
// the counters until the engine stops.
func (fp *fastPath) run(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	t := time.NewTicker(fpHarvestInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case o := <-fp.offers:
			fp.mu.Lock()
			fp.install(&o)
			for n := 0; n < 256; n++ { // the offers queued meanwhile, in one go
				select {
				case o := <-fp.offers:
					fp.install(&o)
					continue
				default:
				}
				break
			}
			fp.mu.Unlock()
		case <-t.C:
			fp.mu.Lock()
			fp.harvest(false)
			fp.rw.Sync() // lets the rules reuse counter slots of removed rules
			fp.mu.Unlock()
		}
	}
}

// sync harvests every flow now: the tables are up to date when it
// returns (for the API's listings).
func (fp *fastPath) sync() {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	fp.harvest(true)
	fp.mu.Unlock()
}

// syncCounts brings the port and router counters up to date: the
// harvest's count pass alone (Snapshot, which the dashboard and the
// metrics read every second).
func (fp *fastPath) syncCounts() {
	if !fp.on() {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.high == 0 {
		return
	}
	if err := fp.reader.Read(fp.stats[:fp.high]); err != nil {
		fp.fail(err)
		return
	}
	fp.countSlots()
}

// fail counts an error of the manager (a map update the kernel refused).
func (fp *fastPath) fail(err error) {
	fp.c.errors.Add(1)
	s := err.Error()
	fp.c.lastErr.Store(&s)
}

// snapshot adds the fast path's frames to the ports' counters and its
// state to s.
func (fp *fastPath) snapshot(s *Snapshot) {
	if fp == nil {
		return
	}
	st := &FastPathStats{Mode: "off", Reason: fp.reason, Kernel: fp.kernel}
	s.FastPath = st
	if !fp.on() {
		return
	}
	st.Mode = string(fp.mode)
	for i := range s.Ports {
		id := s.Ports[i].ID
		rp, rb := fp.c.rxPackets[id].Load(), fp.c.rxBytes[id].Load()
		s.Ports[i].RxPackets += rp
		s.Ports[i].RxBytes += rb
		s.Ports[i].TxPackets += fp.c.txPackets[id].Load()
		s.Ports[i].TxBytes += fp.c.txBytes[id].Load()
		st.Packets += rp
		st.Bytes += rb
	}
	fp.mu.Lock()
	st.NATFlows, st.IPv6Flows, st.Pairs, st.Microflows = len(fp.nat), len(fp.r6), len(fp.pairs), len(fp.micros)
	fp.mu.Unlock()
	st.Installed, st.Evicted = fp.c.installed.Load(), fp.c.evicted.Load()
	st.Refused, st.Dropped = fp.c.refused.Load(), fp.c.dropped.Load()
	st.Errors = fp.c.errors.Load()
	if p := fp.c.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	if punts, err := fp.prog.Punts(); err == nil {
		st.Punts = map[string]uint64{}
		for i, n := range punts {
			if n > 0 {
				st.Punts[fastpath.Punt(i).String()] = n
			}
		}
	}
}

// wanID is the WAN port's id in NAT mode, 0 in bridge mode.
func (e *Engine) wanID() uint16 {
	if e.natr == nil {
		return 0
	}
	return uint16(e.natp.wanID)
}

// SyncFastPath carries what the fast path forwarded into the tables now
// (conntrack counters and deadlines, the FDB, the rules' counters, the
// port counters) and takes out flows whose connection is gone: call it
// before listing them, or after deleting connections. Without the fast
// path it does nothing.
func (e *Engine) SyncFastPath() { e.fp.sync() }
