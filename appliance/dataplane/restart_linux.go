package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"e1kbox/appliance/dataplane/afpacket"
)

// spareWorkers is how many rules handles beyond the configured workers an
// engine keeps, so that a port can restart with more workers in place.
const spareWorkers = 16

// updateTimeout bounds the wait for a running worker to take a port
// update; a worker looks for one at least every pollTimeout.
const updateTimeout = 2 * time.Second

// topology is the engine's ports and workers as readers outside Apply
// see them (Snapshot, Health, the link monitor). It is replaced, never
// changed, when ports restart.
type topology struct {
	ports   []*portInfo // by id; [0] nil
	workers []*worker
	// retired are the sockets of stopped workers: their counters still
	// count, so a port's totals only grow.
	retired []retiredSocket
}

type retiredSocket struct {
	port uint16
	sock *afpacket.Socket
	rx   bool // an RX ring (its own TX ring counts too)
}

// addSocketStats adds st to r: the RX ring's counters when rx is set, and
// the TX ring's.
func addSocketStats(r *RingStats, st afpacket.Stats, rx bool) {
	if rx {
		r.RxDrops += st.RxDrops
		r.RxFreezes += st.RxFreezes
		r.RxTruncated += st.RxTruncated
		r.RxCorrupt += st.RxCorrupt
	}
	r.TxENOBUFS += st.TxENOBUFS
	r.TxEAGAIN += st.TxEAGAIN
	r.TxStalls += st.TxStalls
	r.TxWrongFormat += st.TxWrongFormat
	r.TxOversize += st.TxOversize
	r.TxDropped += st.TxDropped
}

// portChanges reports which data ports (indexes into b.Ports) differ
// between a and b only in what restarting their workers can change:
// interface and MTU (bridge mode), worker count and the CPUs the plan
// gives them. ok is false when anything else that the engine opened
// differs (then the whole engine must restart).
func portChanges(a, b *Config) (changed []int, ok bool) {
	if len(a.Ports) != len(b.Ports) {
		return nil, false
	}
	// b2 is b with the restartable per-port differences taken back.
	b2 := *b
	b2.Ports = slices.Clone(b.Ports)
	b2.CPU = a.CPU
	for i := range b.Ports {
		p, q := &a.Ports[i], &b2.Ports[i]
		differs := max(p.Workers, 1) != max(q.Workers, 1) || !slices.Equal(workerCPUs(a, i), workerCPUs(b, i))
		if modeOf(a) != ModeNAT { // NAT derives the router's MACs and MTUs from them
			differs = differs || p.Interface != q.Interface || p.MTU != q.MTU
			q.Interface, q.MTU = p.Interface, p.MTU
		}
		q.Workers = p.Workers
		if differs {
			changed = append(changed, i)
		}
	}
	return changed, sameTopology(a, &b2)
}

// workerCPUs lists the CPUs the plan pins port i's workers to (-1: none).
func workerCPUs(c *Config, i int) []int {
	p := &c.Ports[i]
	n := max(p.Workers, 1)
	cpus := make([]int, n)
	cpu, pinned := c.CPU.WorkerCPU(p.Interface)
	for m := range cpus {
		cpus[m] = -1
		if pinned {
			cpus[m] = memberCPU(c.CPU.CPUs, cpu, m)
		}
	}
	return cpus
}

// restartPorts restarts the workers of the ports cfg.Ports[i], i in
// changed, with their new settings; the other workers keep forwarding
// (they switch their TX paths to a reopened port between two batches).
// The caller holds e.mu. An error wrapping ErrRestartRequired means the
// engine is no longer in a known state for cfg: restart it.
func (e *Engine) restartPorts(cfg *Config, changed []int) (err error) {
	var attached []*portInfo // new interfaces' kernel drops, released on failure
	defer func() {
		if err != nil {
			for _, pi := range attached {
				pi.kdrop.Close()
			}
		}
	}()
	ids := map[uint16]bool{}
	for _, i := range changed {
		ids[uint16(i+1)] = true
	}
	var keep []*worker
	retire := map[uint16][]*worker{}
	for _, w := range e.workers {
		if ids[w.port.id] {
			retire[w.port.id] = append(retire[w.port.id], w)
		} else {
			keep = append(keep, w)
		}
	}
	// Stop the old workers of the changed ports; once they have returned,
	// close their sockets (their counters stay in the topology).
	var retired []retiredSocket
	if old := e.topo.Load(); old != nil {
		retired = slices.Clone(old.retired)
	}
	for _, ws := range retire {
		for _, w := range ws {
			close(w.quit)
			w.rx.Close() // wakes its poll
			if !e.started {
				close(w.done)
			}
		}
	}
	deadline := time.After(stopTimeout)
	for _, ws := range retire {
		for _, w := range ws {
			select {
			case <-w.done:
			case <-deadline:
				return fmt.Errorf("%w: worker %d (%s) did not stop within %v", ErrRestartRequired, w.id, w.port.name, stopTimeout)
			}
			retired = append(retired, retiredSocket{port: w.port.id, sock: w.rx, rx: true})
			for id, s := range w.txSockets() {
				if s != nil && s != w.rx {
					s.Close()
					retired = append(retired, retiredSocket{port: uint16(id), sock: s})
				}
			}
		}
	}

	// Ports whose interface or MTU changed get a new portInfo.
	ports := slices.Clone(e.ports)
	reopened := map[uint16]bool{}
	for _, i := range changed {
		p, old := &cfg.Ports[i], ports[i+1]
		mtu, err := e.prepareLink(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrRestartRequired, err)
		}
		if p.Interface != old.iface || mtu != old.mtu {
			pi := &portInfo{id: old.id, name: old.name, iface: p.Interface, mtu: mtu}
			pi.up.Store(old.up.Load() && p.Interface == old.iface)
			if p.Interface == old.iface {
				pi.kdrop, pi.kdropErr = old.kdrop, old.kdropErr
			} else if e.attachDrop(pi); pi.kdrop != nil {
				attached = append(attached, pi)
			}
			ports[i+1] = pi
			reopened[pi.id] = true
		}
	}

	// The new workers of the changed ports.
	var fresh []*worker
	for _, i := range changed {
		ws, err := e.openPort(cfg, ports, i, retire[uint16(i+1)])
		fresh = append(fresh, ws...)
		if err != nil {
			for _, w := range fresh {
				e.closeWorker(w)
			}
			if errors.Is(err, ErrRestartRequired) {
				return err
			}
			return fmt.Errorf("%w: %v", ErrRestartRequired, err)
		}
	}

	// The running workers switch to the reopened ports' new TX sockets
	// between two batches; the old sockets close once they have.
	if len(reopened) > 0 {
		type pending struct {
			w   *worker
			u   *workerUpdate
			old map[uint16]*afpacket.Socket
		}
		var waits []pending
		for _, w := range keep {
			u := &workerUpdate{ports: ports, tx: map[uint16]txPort{}, applied: make(chan struct{})}
			txs := slices.Clone(w.txSockets())
			old := map[uint16]*afpacket.Socket{}
			for id := range reopened {
				s, err := e.openTXTo(cfg, ports[id])
				if err != nil {
					return fmt.Errorf("%w: worker %d (%s): TX to %s: %v", ErrRestartRequired, w.id, w.port.name, ports[id].name, err)
				}
				u.tx[id] = s
				old[id] = txs[id]
				txs[id] = s
			}
			w.txs.Store(&txs)
			if e.started {
				w.update.Store(u)
			} else {
				w.fwd.ports = ports
				for id, t := range u.tx {
					w.fwd.tx[id] = t
				}
				close(u.applied)
			}
			waits = append(waits, pending{w, u, old})
		}
		timeout := time.After(updateTimeout)
		for _, p := range waits {
			select {
			case <-p.u.applied:
			case <-timeout:
				return fmt.Errorf("%w: worker %d (%s) did not take the port update", ErrRestartRequired, p.w.id, p.w.port.name)
			}
			for id, s := range p.old {
				if s != nil {
					s.Close()
					retired = append(retired, retiredSocket{port: id, sock: s})
				}
			}
		}
	}
	for _, i := range changed { // a port moved to another interface: give the old one back to the kernel
		if old := e.ports[i+1]; old.kdrop != nil && old.kdrop != ports[i+1].kdrop {
			old.kdrop.Close()
		}
	}
	e.ports = ports
	e.workers = append(keep, fresh...)
	slices.SortStableFunc(e.workers, func(a, b *worker) int { return int(a.port.id) - int(b.port.id) })
	e.topo.Store(&topology{ports: ports, workers: e.workers, retired: retired})
	if e.started {
		for _, w := range fresh {
			e.wg.Add(1)
			go w.run()
		}
	}
	e.log.Info("dataplane ports restarted", "ports", len(changed), "workers", len(fresh))
	return nil
}

// closeWorker closes the sockets of a worker that never ran.
func (e *Engine) closeWorker(w *worker) {
	if w.rx != nil {
		w.rx.Close()
	}
	for _, s := range w.txSockets() {
		if s != nil && s != w.rx {
			s.Close()
		}
	}
}
