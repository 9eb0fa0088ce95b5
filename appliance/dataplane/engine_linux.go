package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/rules"
)

// ErrRestartRequired is returned by Apply for a configuration it cannot
// take over in place: another set of ports (count, names, order), mode,
// host port, router table size, MACs or roles. Close the engine and start
// a new one. The appliance knows this in advance (its config.Diff says
// which changes restart the engine); the error guards the engine's own
// invariants.
var ErrRestartRequired = errors.New("dataplane: configuration change needs a restart")

// pollTimeout is an idle worker's tick (its wait for frames): the
// housekeeping that can wait. What cannot (a port update, a loop probe,
// an IPv6 WAN probe) wakes it (worker.wake). With a tick of 100 ms the
// idle workers' wake-ups were half an appliance's context switches while
// the fast path carried its traffic (docs/dataplane.md, Measured). A
// variable for tests.
var pollTimeout = time.Second

// Timing of the control loops.
const (
	// downRetry is a worker's wait before it reads again from a port
	// whose link is down.
	downRetry = 100 * time.Millisecond
	// natTickInterval is a worker's idle tick while the router holds
	// frames of it waiting for ARP (nat.Worker.Waiting).
	natTickInterval = 2 * time.Millisecond
	linkPoll        = 250 * time.Millisecond
	sweepInterval   = time.Second
	minBackoff      = 100 * time.Millisecond
	maxBackoff      = 5 * time.Second
	stopTimeout     = 3 * time.Second
)

// Options are the engine's dependencies.
type Options struct {
	// Log receives worker restarts and link changes; nil uses slog.Default().
	Log *slog.Logger
}

// Engine runs the dataplane: one worker per RX ring, the FDB, the rules,
// the host port, the router (NAT mode) and the link monitor.
type Engine struct {
	tables
	log   *slog.Logger
	start time.Time
	cur   atomic.Pointer[settings]
	deps  *workerDeps
	b     *builder

	mu      sync.Mutex // Apply, Start, Close
	ports   []*portInfo
	workers []*worker
	// topo is what readers outside Apply see (ports, workers, closed
	// sockets' counters); replaced when ports restart.
	topo  atomic.Pointer[topology]
	links *linkWatch // nil: the monitor polls the links
	lan   lanConns   // the LAN hosts' connections, for LANActivity
	// relink asks the monitor for a full read of the links (after a
	// port restart, whose new portInfo may have missed a notification).
	relink  chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	started bool
	closed  bool
}

// New checks cfg, opens every port's rings (and the host port) in the
// calling thread's network namespace, sets the data ports up, and returns
// an engine ready to Start. On error nothing stays open.
func New(cfg *Config, opts Options) (e *Engine, err error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	e = &Engine{log: opts.Log, start: time.Now(), stop: make(chan struct{}), relink: make(chan struct{}, 1)}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.deps = &workerDeps{log: e.log, stop: e.stop, wg: &e.wg, start: e.start}
	if e.deps.loop, err = newLoopGuard(); err != nil {
		return nil, err
	}
	e.deps.loop.off.Store(cfg.Bridge.NoLoopProtect)
	defer func() {
		if err != nil {
			e.release()
		}
	}()
	nl, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("dataplane: netlink: %w", err)
	}
	e.b = &builder{log: e.log, nl: nl, t: &e.tables, cur: &e.cur, deps: e.deps}
	if e.ports, err = e.b.openPorts(cfg); err != nil {
		return nil, err
	}
	e.deps.host = e.host
	if err := e.openTables(cfg); err != nil {
		return nil, err
	}
	e.openFastPath(cfg)
	e.cur.Store(newSettings(cfg))
	e.workers, err = e.b.openWorkers(cfg, e.ports)
	if err != nil {
		return nil, err
	}
	e.topo.Store(&topology{ports: e.ports, workers: e.workers})
	// Subscribed before the first read, so that no change falls between.
	if e.links, err = watchLinks(); err != nil {
		e.log.Warn("dataplane: polling the links", "err", err)
		e.links, err = nil, nil
	}
	e.pollLinks()
	return e, nil
}

// Start starts the workers and the link monitor.
func (e *Engine) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("dataplane: engine closed")
	}
	if e.started {
		return errors.New("dataplane: engine already started")
	}
	e.started = true
	reservePs(len(e.workers))
	for _, w := range e.workers {
		e.wg.Add(1)
		go w.run()
	}
	e.wg.Add(1)
	go e.monitor()
	if e.fp.On() {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.fp.Run(e.stop)
		}()
	}
	e.log.Info("dataplane started", "ports", len(e.ports)-1, "workers", len(e.workers))
	return nil
}

// reservePs makes room for the workers in the Go scheduler: a P for each
// on top of one per CPU. A worker holds a thread of its own and, while it
// forwards, a P; it gives the P up while it waits in poll and needs one
// back the moment a frame arrives. With as many Ps as CPUs, the other
// goroutines (the fast path's harvest, the dashboard, the router
// services, GC workers) can hold them all — the more so when they run on
// the housekeeping CPUs only — and a worker that woke waits for a P, up
// to a scheduler quantum: the first packets of new connections took
// 5.8–8 ms at p99 instead of 0.4–0.6 ms (docs/dataplane.md, Measured).
func reservePs(workers int) {
	if want := runtime.NumCPU() + workers; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}

// Close stops the workers (within a few seconds) and closes every ring
// and the host port. It is safe to call more than once.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	close(e.stop)
	// Wake the workers: RX rings and the host port return ErrClosed.
	for _, w := range e.workers {
		if w.rx != nil {
			w.rx.Close()
		}
	}
	if e.host != nil {
		e.host.Close()
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-time.After(stopTimeout):
		err = fmt.Errorf("dataplane: workers did not stop within %v", stopTimeout)
	}
	return errors.Join(err, e.release())
}

// release closes everything New opened.
func (e *Engine) release() error {
	var errs []error
	for _, w := range e.workers {
		errs = append(errs, w.closeSockets())
	}
	if e.host != nil {
		errs = append(errs, e.host.Close())
	}
	errs = append(errs, e.fp.Close(), e.pppLink.close())
	for _, pi := range e.ports {
		if pi != nil && pi.kdrop != nil {
			errs = append(errs, pi.kdrop.Close())
		}
	}
	e.links.close()
	if e.b != nil && e.b.nl != nil {
		e.b.nl.Close()
	}
	return errors.Join(errs...)
}

// Apply replaces the configuration without stopping forwarding: aging
// time, static entries, rules, per-port learning, flooding and VLANs, and
// in NAT mode the router's addresses, gateways (IPv4 and IPv6), port
// forwards, timeouts, masquerade ports and MSS clamp (nat.Router.Update: connections stay,
// except those through an address that changed). The ports named in
// restart (by Port.Name) restart their own workers with their new
// interface, MTU, worker count and CPUs while the others keep forwarding;
// like New, that opens sockets in the calling thread's network namespace.
// A port's interface, MTU, workers or CPUs change only when it is named.
// Anything else New opened (see ErrRestartRequired) cannot change.
func (e *Engine) Apply(cfg *Config, restart ...string) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Load().cfg
	if !e.sameShape(old, cfg) {
		return ErrRestartRequired
	}
	changed, err := portIndexes(cfg, restart)
	if err != nil {
		return err
	}
	if i := e.natp.wanID - 1; e.natr != nil && ((old.NAT.WANVLAN.ID == 0) != (cfg.NAT.WANVLAN.ID == 0) ||
		old.NAT.WANPPPoE != cfg.NAT.WANPPPoE) && !slices.Contains(changed, i) {
		changed = append(changed, i) // its ring of tagged frames (routedOnly)
	}
	t, err := compileRules(cfg)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		if err := e.restartPorts(cfg, changed); err != nil {
			return err
		}
	}
	if e.natr != nil {
		// The connections, mappings and neighbours stay.
		if err := e.natr.Update(cfg.natConfig(e.natp)); err != nil {
			return fmt.Errorf("dataplane: %w", err)
		}
		if v6 := e.natp.v6; v6 != nil {
			if err := setRoute6WAN(v6, e.natp, cfg.NAT); err != nil {
				return fmt.Errorf("dataplane: %w", err)
			}
		}
	}
	if err := e.setStatics(old, cfg); err != nil {
		return err
	}
	e.fdb.SetAgingTime(agingOf(cfg))
	e.deps.loop.off.Store(cfg.Bridge.NoLoopProtect)
	if err := e.fdb.SetFullPolicy(fullOf(cfg)); err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	e.fp.SwapRules(t, func() { e.rules.Swap(t) })
	e.cur.Store(newSettings(cfg))
	if e.natr != nil && (old.NAT.WANVLAN != cfg.NAT.WANVLAN || old.NAT.WANPPPoE != cfg.NAT.WANPPPoE) {
		// The kernel's flows over the WAN carry the old link's headers.
		e.fp.PortDown(e.wanID())
	}
	e.retagDrop(cfg)
	e.fp.Revalidate()
	return nil
}

// sameShape reports whether b keeps what the running engine opened once:
// the mode, the ports by name and order, the host port, the FDB, and in
// NAT mode the roles, the router's MACs and its table size.
func (e *Engine) sameShape(a, b *Config) bool {
	if modeOf(a) != modeOf(b) || len(a.Ports) != len(b.Ports) || (a.HostPort == nil) != (b.HostPort == nil) ||
		a.Ring != b.Ring || a.Bridge.FDBSize != b.Bridge.FDBSize ||
		a.Bridge.SharedVLAN != b.Bridge.SharedVLAN {
		return false
	}
	for i := range a.Ports {
		p, q := &a.Ports[i], &b.Ports[i]
		if p.portName() != q.portName() || modeOf(a) == ModeNAT && (p.Role != q.Role || p.Interface != q.Interface || p.MTU != q.MTU) {
			return false
		}
	}
	if h, k := a.HostPort, b.HostPort; h != nil && (h.portName() != k.portName() || h.Interface != k.Interface ||
		h.MTU != k.MTU || h.MAC != k.MAC || fmt.Sprint(h.Addresses) != fmt.Sprint(k.Addresses)) {
		return false
	}
	if e.natr != nil {
		m, n := a.NAT, b.NAT
		if m.LANMAC != n.LANMAC || m.WANMAC != n.WANMAC || m.IPv6 != n.IPv6 || orDefault(n.MaxConns, nat.DefaultMaxConns) != e.natr.Config().MaxConns {
			return false
		}
		if a.HostPort != nil && m.LANAddr != n.LANAddr {
			return false // the box's stack has the LAN address (boxStack)
		}
	}
	return true
}

// portIndexes maps port names to their indexes in cfg.Ports.
func portIndexes(cfg *Config, names []string) ([]int, error) {
	var out []int
	for _, n := range names {
		i := -1
		for j := range cfg.Ports {
			if cfg.Ports[j].portName() == n {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("dataplane: restart of unknown port %q", n)
		}
		out = append(out, i)
	}
	return out, nil
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// Config returns the configuration in force. Do not modify it.
func (e *Engine) Config() *Config { return e.cur.Load().cfg }

// Rules returns the rule set (tables, per-rule counters, logs).
func (e *Engine) Rules() *rules.Set { return e.rules }

// FDB returns the forwarding database.
func (e *Engine) FDB() *bridge.FDB { return e.fdb }

// NAT returns the router in NAT mode, nil in bridge mode: its connection
// table, mappings and neighbours (see ListConns for paging).
func (e *Engine) NAT() *nat.Router { return e.natr }

// Now is the engine's monotonic clock, as the FDB sees it.
func (e *Engine) Now() int64 { return int64(time.Since(e.start)) }

// FDBEntries lists the live FDB entries with their port names.
func (e *Engine) FDBEntries() []FDBEntry {
	e.fp.Sync()
	ents := e.fdb.Entries(nil, e.Now())
	out := make([]FDBEntry, len(ents))
	ports := e.topo.Load().ports
	for i, en := range ents {
		out[i] = FDBEntry{Entry: en}
		if int(en.Port) < len(ports) && en.Port > 0 {
			out[i].PortName = ports[en.Port].name
		}
	}
	return out
}

// Health reports per port whether its workers run and its link is up.
func (e *Engine) Health() Health {
	e.mu.Lock()
	running := e.started && !e.closed
	e.mu.Unlock()
	return e.topo.Load().health(running)
}

// Snapshot returns the engine's counters and state. It takes no lock the
// workers use: it loads their published counters (updated once per
// batch) and reads the sockets' kernel statistics.
func (e *Engine) Snapshot() Snapshot {
	e.fp.SyncCounts()
	now := time.Now()
	s := e.topo.Load().snapshot()
	e.addFastPath(&s)
	s.Time = now
	s.Uptime = Duration(now.Sub(e.start).Round(time.Millisecond))
	s.Mode = modeOf(e.cur.Load().cfg)
	s.FDB = e.fdb.Stats()
	t := e.rules.Table()
	s.Rules = RuleStats{Generation: t.Generation(), Rules: len(t.Rules()), RejectsLimited: e.rules.RejectsLimited()}
	s.IPv6 = e.ipv6Stats(s.Time)
	if e.natr != nil {
		ns := e.natr.Stats()
		s.NAT = natStats(&ns)
		c := e.natr.Config()
		s.NAT.addrs(&c)
		// The router's own counts: they include the frames it answered
		// (ttl_exceeded, too_big, rule_reject) and queued frames dropped
		// later (neigh_failed), which no port's Drops count.
		for r := range ns.Drops {
			s.Drops[NATDrop(nat.Reason(r))] = ns.Drops[r]
		}
	}
	return s
}
