package dataplane

import (
	"e1kbox/appliance/dataplane/ingressdrop"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/hostport"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/rules"
)

// ErrRestartRequired is returned by Apply for a configuration that
// changes what the engine opened (ports, interfaces, MTUs, worker counts,
// host port, ring sizes, FDB size or policy, CPU plan): close the engine
// and start a new one.
var ErrRestartRequired = errors.New("dataplane: configuration change needs a restart")

// Timing of the control loops.
const (
	pollTimeout = 100 * time.Millisecond // a worker's wait for a block; its idle tick
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

// Engine runs the bridge: one worker per RX ring, the FDB, the rules, the
// host port, and the link monitor.
type Engine struct {
	log   *slog.Logger
	start time.Time
	cur   atomic.Pointer[settings]

	mu      sync.Mutex // Apply, Start, Close
	ports   []*portInfo
	fdb     *bridge.FDB
	rules   *rules.Set
	host    *hostport.Port
	hostMAC [6]byte
	nl      *netlink.Handle
	natr    *nat.Router // NAT mode only
	natp    natPorts    // the router's ports as opened
	workers []*worker
	// topo is what readers outside Apply see (ports, workers, closed
	// sockets' counters); replaced when ports restart.
	topo atomic.Pointer[topology]
	// Worker ids and rules handles: handles of stopped workers are
	// reused by the next ones.
	nextID, nextRules, rulesHandles int
	freeRules                       []int
	stop                            chan struct{}
	wg                              sync.WaitGroup
	started                         bool
	closed                          bool
}

// New checks cfg, opens every port's rings (and the host port) in the
// calling thread's network namespace, sets the data ports up, and returns
// an engine ready to Start. On error nothing stays open.
func New(cfg *Config, opts Options) (e *Engine, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	e = &Engine{log: opts.Log, start: time.Now(), stop: make(chan struct{})}
	if e.log == nil {
		e.log = slog.Default()
	}
	defer func() {
		if err != nil {
			e.release()
		}
	}()
	if e.nl, err = netlink.NewHandle(); err != nil {
		return nil, fmt.Errorf("dataplane: netlink: %w", err)
	}
	e.ports = make([]*portInfo, len(cfg.Ports)+1, len(cfg.Ports)+2)
	for i := range cfg.Ports {
		p := &cfg.Ports[i]
		mtu, err := e.prepareLink(p)
		if err != nil {
			return nil, err
		}
		e.ports[i+1] = &portInfo{id: uint16(i + 1), name: p.portName(), iface: p.Interface, mtu: mtu}
		e.attachDrop(e.ports[i+1])
	}
	if h := cfg.HostPort; h != nil {
		hc := hostport.Config{Name: h.Interface, MTU: h.MTU, Addrs: h.Addresses}
		if h.MAC != "" {
			m, _ := bridge.ParseMAC(h.MAC) // validated
			hc.MAC = net.HardwareAddr(m[:])
		}
		if e.host, err = hostport.Open(hc); err != nil {
			return nil, fmt.Errorf("dataplane: host port: %w", err)
		}
		copy(e.hostMAC[:], e.host.MAC())
		e.ports = append(e.ports, &portInfo{id: uint16(len(e.ports)), name: h.portName(), iface: e.host.Name(), host: true, mtu: e.host.MTU()})
	}
	full := bridge.EvictOldest
	if cfg.Bridge.Refuse {
		full = bridge.Refuse
	}
	if e.fdb, err = bridge.New(bridge.Options{Capacity: cfg.Bridge.FDBSize, AgingTime: time.Duration(cfg.Bridge.AgingTime),
		Full: full, SharedVLAN: cfg.Bridge.SharedVLAN}); err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	if err := e.setStatics(nil, cfg); err != nil {
		return nil, err
	}
	nworkers := 0
	for _, p := range cfg.Ports {
		nworkers += max(p.Workers, 1)
	}
	if e.host != nil {
		nworkers++
	}
	// Spare handles let a port restart with more workers without
	// restarting the engine.
	e.rulesHandles = nworkers + spareWorkers
	e.rules = rules.NewSet(rules.SetOptions{Workers: e.rulesHandles})
	if err := e.setRules(cfg); err != nil {
		return nil, err
	}
	if modeOf(cfg) == ModeNAT {
		if err := e.openNAT(cfg); err != nil {
			return nil, err
		}
	}
	e.cur.Store(newSettings(cfg))
	if err := e.openWorkers(cfg); err != nil {
		return nil, err
	}
	e.pollLinks()
	return e, nil
}

// attachDrop keeps the kernel's network stack off data port pi's received
// frames once the rings have them (ingressdrop): the data ports carry no
// kernel address, and in NAT mode the kernel would otherwise route every
// frame to the router's MAC only to drop it. Without it (no tcx in the
// kernel) forwarding works the same, at that cost.
func (e *Engine) attachDrop(pi *portInfo) {
	d, err := ingressdrop.Attach(pi.iface)
	if err != nil {
		pi.kdropErr = err.Error()
		e.log.Warn("dataplane: the kernel keeps processing this port's frames", "port", pi.name, "err", err)
		return
	}
	pi.kdrop = d
}

// prepareLink sets port p's interface up and to the port's MTU (the
// kernel's TX length check follows the interface MTU) and returns the MTU
// in force.
func (e *Engine) prepareLink(p *Port) (int, error) {
	link, err := e.nl.LinkByName(p.Interface)
	if err != nil {
		return 0, fmt.Errorf("dataplane: port %s: interface %s: %w", p.portName(), p.Interface, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := e.nl.LinkSetUp(link); err != nil {
			return 0, fmt.Errorf("dataplane: port %s: set %s up: %w", p.portName(), p.Interface, err)
		}
	}
	mtu := p.MTU
	if mtu == 0 {
		mtu = link.Attrs().MTU
	} else if mtu != link.Attrs().MTU {
		if err := e.nl.LinkSetMTU(link, mtu); err != nil {
			return 0, fmt.Errorf("dataplane: port %s: set %s MTU %d: %w", p.portName(), p.Interface, mtu, err)
		}
	}
	return mtu, nil
}

// openNAT creates the router: its WAN port is the RoleWAN port, its LAN
// side the LAN segment, named by the first LAN port's id. The MACs default
// to the interfaces'; the LAN MTU is the smallest of the segment's ports.
func (e *Engine) openNAT(cfg *Config) error {
	p := natPorts{lanMTU: maxNATMTU}
	for i := range cfg.Ports {
		pi := e.ports[i+1]
		link, err := e.nl.LinkByName(pi.iface)
		if err != nil {
			return fmt.Errorf("dataplane: port %s: interface %s: %w", pi.name, pi.iface, err)
		}
		var mac [6]byte
		copy(mac[:], link.Attrs().HardwareAddr)
		switch cfg.Ports[i].Role {
		case RoleWAN:
			p.wanID, p.wanMAC, p.wanMTU = int(pi.id), mac, pi.mtu
		case RoleLAN:
			if p.lanID == 0 {
				p.lanID, p.lanMAC = int(pi.id), mac
			}
			p.lanMTU = min(p.lanMTU, pi.mtu)
		}
	}
	if e.host != nil {
		p.lanMTU = min(p.lanMTU, e.ports[len(e.ports)-1].mtu)
	}
	if m := cfg.NAT.LANMAC; m != "" {
		mac, _ := bridge.ParseMAC(m) // validated
		p.lanMAC = [6]byte(mac)
	}
	if m := cfg.NAT.WANMAC; m != "" {
		mac, _ := bridge.ParseMAC(m)
		p.wanMAC = [6]byte(mac)
	}
	r, err := nat.New(cfg.natConfig(p))
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	e.natr, e.natp = r, p
	return nil
}

// openWorkers opens each worker's RX socket and its TX sockets: one TX-only
// socket per (worker, other data port) and a stage into the host port.
func (e *Engine) openWorkers(cfg *Config) error {
	for i := range cfg.Ports {
		ws, err := e.openPort(cfg, e.ports, i, nil)
		e.workers = append(e.workers, ws...) // release closes what they hold
		if err != nil {
			return err
		}
	}
	if e.host != nil {
		w := e.newWorker(cfg, e.ports, e.ports[len(e.ports)-1], nil, e.nextRules, nil)
		e.nextRules++
		e.workers = append(e.workers, w)
		if err := e.openTX(cfg, w, e.ports); err != nil {
			return err
		}
		w.buf = make([]byte, 65536+64)
	}
	e.topo.Store(&topology{ports: e.ports, workers: e.workers})
	return nil
}

// openPort opens the workers of cfg.Ports[i] (port id i+1 in ports): an
// RX ring each (a fanout group when there are several) and their TX
// sockets. reuse are the stopped workers of the port's previous
// incarnation: the new ones take over their rules and NAT handles and
// their counters. It returns what it opened, also on error.
func (e *Engine) openPort(cfg *Config, ports []*portInfo, i int, reuse []*worker) ([]*worker, error) {
	p := &cfg.Ports[i]
	in := ports[i+1]
	n := max(p.Workers, 1)
	cpu, pinned := cfg.CPU.WorkerCPU(p.Interface)
	rc := cfg.Ring
	var fanout *afpacket.Fanout
	if n > 1 {
		// The previous incarnation's group is gone: its sockets are closed.
		fanout = &afpacket.Fanout{ID: uint16(os.Getpid()*MaxPorts + i), Mode: afpacket.FanoutHash}
	}
	var ws []*worker
	for m := range n {
		ac := afpacket.Config{MTU: in.mtu, BlockSize: rc.BlockSize, BlockCount: rc.BlockCount,
			BlockTimeout: time.Duration(rc.BlockTimeout), TxFrames: DefaultReplyFrames, Fanout: fanout}
		if ac.BlockSize == 0 && ac.BlockCount == 0 {
			ac.BlockSize, ac.BlockCount = DefaultRxBlockSize, DefaultRxBlocks
		}
		var prev *worker
		if m < len(reuse) {
			prev = reuse[m]
		}
		rulesID := 0
		switch {
		case prev != nil:
			rulesID = prev.rulesID
		case len(e.freeRules) > 0:
			rulesID = e.freeRules[len(e.freeRules)-1]
			e.freeRules = e.freeRules[:len(e.freeRules)-1]
		case e.nextRules < e.rulesHandles:
			rulesID = e.nextRules
			e.nextRules++
		default:
			return ws, fmt.Errorf("%w: port %s: no free worker handle for %d workers", ErrRestartRequired, in.name, n)
		}
		rx, err := afpacket.Open(p.Interface, ac)
		if err != nil {
			if prev == nil {
				e.freeRules = append(e.freeRules, rulesID)
			}
			return ws, fmt.Errorf("dataplane: port %s: %w", in.name, err)
		}
		w := e.newWorker(cfg, ports, in, rx, rulesID, prev)
		ws = append(ws, w)
		if err := e.openTX(cfg, w, ports); err != nil {
			return ws, err
		}
		if pinned {
			w.cpu = memberCPU(cfg.CPU.CPUs, cpu, m)
		}
	}
	// The counters of the previous incarnation's extra workers fold into
	// the first new one: the port's totals keep growing.
	for _, old := range reuse[min(n, len(reuse)):] {
		ws[0].fwd.c.add(&old.fwd.c)
		e.freeRules = append(e.freeRules, old.rulesID)
	}
	return ws, nil
}

// newWorker makes the worker of port in on ring rx (nil: the host port)
// with rules handle rulesID. prev, when set, is the stopped worker it
// replaces: it inherits its counters and its NAT worker.
func (e *Engine) newWorker(cfg *Config, ports []*portInfo, in *portInfo, rx *afpacket.Socket, rulesID int, prev *worker) *worker {
	w := &worker{id: e.nextID, rulesID: rulesID, e: e, port: in, rx: rx, cpu: -1, shared: newSharedCounters(len(ports)),
		quit: make(chan struct{}), done: make(chan struct{})}
	e.nextID++
	tx := make([]txPort, len(ports))
	rw := e.rules.Worker(rulesID)
	w.fwd = newFwd(in, ports, tx, e.fdb, rw, &e.cur)
	if prev != nil {
		w.shared = prev.shared
		w.fwd.c.add(&prev.fwd.c)
	}
	if e.natr != nil {
		nw := (*nat.Worker)(nil)
		if prev != nil {
			nw = prev.fwd.nw
		} else {
			nw = e.natr.NewWorker(rw)
		}
		w.fwd.setNAT(nw, uint16(e.natp.wanID), e.natp.lanID, e.natp.lanMAC)
	}
	return w
}

// openTX opens w's TX paths: its own ring for replies on its ingress
// port, a TX-only socket to each other data port, a stage into the host
// port.
func (e *Engine) openTX(cfg *Config, w *worker, ports []*portInfo) error {
	txs := make([]*afpacket.Socket, len(ports))
	w.txs.Store(&txs)
	for _, out := range ports[1:] {
		switch {
		case out.host:
			w.stage = newHostStage(e.host.Write, out.mtu+frame.EthernetHeaderLen+2*frame.VLANTagLen)
			w.fwd.tx[out.id] = w.stage
		case out == w.port:
			if w.rx != nil {
				w.fwd.tx[out.id] = w.rx // its own TX ring answers rejects
				txs[out.id] = w.rx
			}
		default:
			s, err := e.openTXTo(cfg, out)
			if err != nil {
				return fmt.Errorf("dataplane: worker %d (%s): TX to %s: %w", w.id, w.port.name, out.name, err)
			}
			txs[out.id] = s
			w.fwd.tx[out.id] = s
		}
	}
	return nil
}

func (e *Engine) openTXTo(cfg *Config, out *portInfo) (*afpacket.Socket, error) {
	txFrames := cfg.Ring.TxFrames
	if txFrames == 0 {
		txFrames = DefaultTxFrames
	}
	return afpacket.Open(out.iface, afpacket.Config{NoRX: true, MTU: out.mtu, TxFrames: txFrames, TxCopy: e.txCopy(out.iface)})
}

// txCopy reports whether frames to iface are better copied than sent from
// a mapped TX ring (see afpacket.Config.TxCopy): on veth, whose peer copies
// zero-copy frames again; a NIC takes the ring's pages as they are.
func (e *Engine) txCopy(iface string) bool {
	link, err := e.nl.LinkByName(iface)
	return err == nil && link.Type() == "veth"
}

// memberCPU spreads the fanout members of a port over the CPUs, starting
// at the port's planned CPU.
func memberCPU(cpus []int, first, m int) int {
	if m == 0 || len(cpus) == 0 {
		return first
	}
	i := slices.Index(cpus, first)
	if i < 0 {
		return first
	}
	return cpus[(i+m)%len(cpus)]
}

// setStatics replaces the static FDB entries of old (nil: none) with
// those of cfg, and keeps the host port's MAC static.
func (e *Engine) setStatics(old, cfg *Config) error {
	ids := cfg.PortNames()
	type key struct {
		mac  bridge.MAC
		vlan uint16
	}
	want := map[key]uint16{}
	for _, s := range cfg.Bridge.Static {
		want[key{s.MAC, s.VLAN}] = ids[s.Port]
	}
	if e.host != nil {
		want[key{e.hostMAC, 0}] = uint16(len(e.ports) - 1)
	}
	if old != nil {
		for _, s := range old.Bridge.Static {
			if _, ok := want[key{s.MAC, s.VLAN}]; !ok {
				e.fdb.Delete(s.MAC, s.VLAN)
			}
		}
	}
	for k, port := range want {
		if err := e.fdb.AddStatic(k.mac, k.vlan, port); err != nil {
			return fmt.Errorf("dataplane: static FDB entry %s vlan %d: %w", k.mac, k.vlan, err)
		}
	}
	return nil
}

func (e *Engine) setRules(cfg *Config) error {
	rs := cfg.Rules
	if rs == nil {
		rs = &rules.Ruleset{}
	}
	t, err := rules.Compile(rs, rules.Options{Ports: cfg.PortNames()})
	if err != nil {
		return fmt.Errorf("dataplane: rules: %w", err)
	}
	e.rules.Swap(t)
	return nil
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
	for _, w := range e.workers {
		e.wg.Add(1)
		go w.run()
	}
	e.wg.Add(1)
	go e.monitor()
	e.log.Info("dataplane started", "ports", len(e.ports)-1, "workers", len(e.workers))
	return nil
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
		if w.rx != nil {
			if err := w.rx.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		for _, s := range w.txSockets() {
			if s != nil && s != w.rx {
				if err := s.Close(); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if e.host != nil {
		if err := e.host.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pi := range e.ports {
		if pi != nil && pi.kdrop != nil {
			if err := pi.kdrop.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if e.nl != nil {
		e.nl.Close()
	}
	return errors.Join(errs...)
}

// Apply replaces the configuration without stopping forwarding: aging
// time, static entries, rules, per-port learning and flooding, and in NAT
// mode the router's addresses, gateway, port forwards, timeouts and MSS
// clamp (nat.Router.Update: connections stay, except those through a WAN
// address that changed). A port whose interface or MTU (bridge mode),
// worker count or worker CPUs changed restarts only its own workers; the
// others keep forwarding (like New, Apply then opens sockets in the
// calling thread's network namespace). A change of anything else the engine opened
// (the set of ports, the host port, rings, FDB size or policy, the mode,
// the roles, the router's MACs or its table size) returns
// ErrRestartRequired and changes nothing.
func (e *Engine) Apply(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Load().cfg
	changed, ok := portChanges(old, cfg)
	if !ok {
		return ErrRestartRequired
	}
	rs := cfg.Rules
	if rs == nil {
		rs = &rules.Ruleset{}
	}
	t, err := rules.Compile(rs, rules.Options{Ports: cfg.PortNames()})
	if err != nil {
		return fmt.Errorf("dataplane: rules: %w", err)
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
	}
	if err := e.setStatics(old, cfg); err != nil {
		return err
	}
	e.fdb.SetAgingTime(agingOf(cfg))
	e.rules.Swap(t)
	e.cur.Store(newSettings(cfg))
	return nil
}

func agingOf(cfg *Config) time.Duration {
	if cfg.Bridge.AgingTime == 0 {
		return bridge.DefaultAgingTime
	}
	return time.Duration(cfg.Bridge.AgingTime)
}

// Config returns the configuration in force. Do not modify it.
func (e *Engine) Config() *Config { return e.cur.Load().cfg }

// Rules returns the rule set (tables, per-rule counters, logs).
func (e *Engine) Rules() *rules.Set { return e.rules }

// FDB returns the forwarding database.
func (e *Engine) FDB() *bridge.FDB { return e.fdb }

// Now is the engine's monotonic clock, as the FDB sees it.
func (e *Engine) Now() int64 { return int64(time.Since(e.start)) }

// FDBEntries lists the live FDB entries with their port names.
func (e *Engine) FDBEntries() []FDBEntry {
	ents := e.fdb.Entries(nil, e.Now())
	out := make([]FDBEntry, len(ents))
	for i, en := range ents {
		out[i] = FDBEntry{Entry: en}
		if ports := e.topo.Load().ports; int(en.Port) < len(ports) && en.Port > 0 {
			out[i].PortName = ports[en.Port].name
		}
	}
	return out
}

// monitor polls the links and sweeps the FDB until the engine stops.
func (e *Engine) monitor() {
	defer e.wg.Done()
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		e.pollLinks()
		if time.Since(lastSweep) >= sweepInterval {
			e.fdb.Sweep(e.Now())
			lastSweep = time.Now()
		}
	}
}

// pollLinks updates each port's link state: administratively up with a
// carrier (IFF_UP and IFF_LOWER_UP). A port that goes down loses its
// learned FDB entries.
func (e *Engine) pollLinks() {
	for _, p := range e.topo.Load().ports[1:] {
		up := false
		if link, err := e.nl.LinkByName(p.iface); err == nil {
			a := link.Attrs()
			up = a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
		}
		if was := p.up.Swap(up); was != up {
			e.log.Info("dataplane link", "port", p.name, "interface", p.iface, "up", up)
			if !up {
				e.fdb.Flush(p.id, false)
			}
		}
	}
}

// Health is whether every port forwards: its workers run and its link is up.
type Health struct {
	OK    bool         `json:"ok"`
	Ports []PortHealth `json:"ports"`
}

// PortHealth is one port's part of Health.
type PortHealth struct {
	Name      string `json:"name"`
	Interface string `json:"interface"`
	Kind      string `json:"kind"`
	LinkUp    bool   `json:"linkUp"`
	Workers   int    `json:"workers"`
	Running   int    `json:"running"`
	OK        bool   `json:"ok"`
}

// Health reports per port whether its workers run and its link is up.
func (e *Engine) Health() Health {
	h := Health{OK: true}
	e.mu.Lock()
	stopped := !e.started || e.closed
	e.mu.Unlock()
	topo := e.topo.Load()
	for _, p := range topo.ports[1:] {
		ph := PortHealth{Name: p.name, Interface: p.iface, Kind: kindOf(p), LinkUp: p.up.Load()}
		for _, w := range topo.workers {
			if w.port == p {
				ph.Workers++
				if w.running.Load() {
					ph.Running++
				}
			}
		}
		ph.OK = !stopped && ph.LinkUp && ph.Workers > 0 && ph.Running == ph.Workers
		h.OK = h.OK && ph.OK
		h.Ports = append(h.Ports, ph)
	}
	return h
}

func kindOf(p *portInfo) string {
	if p.host {
		return "host"
	}
	return "data"
}

// Snapshot returns the engine's counters and state. It takes no lock the
// workers use: it loads their published counters (updated once per
// batch) and reads the sockets' kernel statistics.
func (e *Engine) Snapshot() Snapshot {
	now := time.Now()
	topo := e.topo.Load()
	s := Snapshot{
		Time:    now,
		Uptime:  Duration(now.Sub(e.start).Round(time.Millisecond)),
		Mode:    modeOf(e.cur.Load().cfg),
		Ports:   make([]PortStats, len(topo.ports)-1),
		Workers: make([]WorkerStats, len(topo.workers)),
		FDB:     e.fdb.Stats(),
	}
	t := e.rules.Table()
	s.Rules = RuleStats{Generation: t.Generation(), Rules: len(t.Rules()), RejectsLimited: e.rules.RejectsLimited()}
	for i, p := range topo.ports[1:] {
		s.Ports[i] = PortStats{ID: p.id, Name: p.name, Interface: p.iface, Kind: kindOf(p), MTU: p.mtu, LinkUp: p.up.Load(),
			KernelDrop: p.kdrop != nil, KernelDropError: p.kdropErr}
	}
	for _, r := range topo.retired {
		addSocketStats(&s.Ports[r.port-1].Ring, r.sock.Stats(), r.rx)
	}
	for i, w := range topo.workers {
		c := w.shared
		ps := &s.Ports[w.port.id-1]
		ps.Workers++
		running := w.running.Load()
		if running {
			ps.Running++
		}
		ps.RxPackets += c.rxPackets.Load()
		ps.RxBytes += c.rxBytes.Load()
		ps.Flooded += c.flooded.Load()
		ps.RejectsSent += c.rejectsSent.Load()
		ps.Ring.TxErrors += c.txFlushErrors.Load()
		for r := range c.drops {
			v := c.drops[r].Load()
			ps.Drops[r] += v
			s.Drops[r] += v
		}
		for id := 1; id < len(c.txPackets); id++ {
			s.Ports[id-1].TxPackets += c.txPackets[id].Load()
			s.Ports[id-1].TxBytes += c.txBytes[id].Load()
		}
		if w.rx != nil {
			addSocketStats(&ps.Ring, w.rx.Stats(), true)
		}
		for id, sock := range w.txSockets() {
			if sock != nil && sock != w.rx {
				addSocketStats(&s.Ports[id-1].Ring, sock.Stats(), false)
			}
		}
		if w.stage != nil {
			s.Ports[len(s.Ports)-1].Ring.TxErrors += w.stage.errs.Load()
		}
		w.mu.Lock()
		last := w.lastPanic
		w.mu.Unlock()
		s.Workers[i] = WorkerStats{ID: w.id, Port: w.port.name, CPU: int(w.pinned.Load()), Running: running,
			Batches: c.batches.Load(), Panics: w.panics.Load(), Restarts: w.restarts.Load(), LastPanic: last,
			CacheHits: c.cacheHits.Load(), CacheMisses: c.cacheMisses.Load()}
	}
	if e.natr != nil {
		ns := e.natr.Stats()
		s.NAT = natStats(&ns)
		// The router's own counts: they include the frames it answered
		// (ttl_exceeded, too_big, rule_reject) and queued frames dropped
		// later (neigh_failed), which no port's Drops count.
		for r := range ns.Drops {
			s.Drops[NATDrop(nat.Reason(r))] = ns.Drops[r]
		}
	}
	return s
}
