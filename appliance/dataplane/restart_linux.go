package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/offload"
)

// updateTimeout bounds the wait for a running worker to take a port
// update; the worker is woken for it (worker.wake).
const updateTimeout = 2 * time.Second

// restartPorts restarts the workers of the ports cfg.Ports[i], i in
// changed, with their new settings; the other workers keep forwarding
// (they switch their TX paths to a reopened port between two batches).
// The caller holds e.mu. An error wrapping ErrRestartRequired means the
// engine is no longer in a known state for cfg: restart it.
func (e *Engine) restartPorts(cfg *Config, changed []int) (err error) {
	r := &reconfig{e: e, cfg: cfg, changed: changed, retire: map[uint16][]*worker{}, reopened: map[uint16]bool{}}
	defer func() {
		if err != nil {
			r.abort()
		}
	}()
	if err := r.stopOld(); err != nil {
		return err
	}
	if err := r.reopenLinks(); err != nil {
		return err
	}
	if err := r.openNew(); err != nil {
		return err
	}
	if err := r.switchTX(); err != nil {
		return err
	}
	r.commit()
	e.log.Info("dataplane ports restarted", "ports", len(changed), "workers", len(r.fresh))
	return nil
}

// reconfig is one restart of some ports' workers, in explicit steps:
// stop the old workers, reopen the links that changed, open the new
// workers, switch the running workers' TX paths, commit.
type reconfig struct {
	e       *Engine
	cfg     *Config
	changed []int

	keep     []*worker            // workers of the other ports
	retire   map[uint16][]*worker // by port id: the stopped workers
	retired  []retiredSocket      // closed sockets whose counters still count
	ports    []*portInfo          // the new port table
	reopened map[uint16]bool      // ports with a new portInfo (interface or MTU changed)
	attached []*portInfo          // new kernel drops, released on failure
	fresh    []*worker            // the new workers
}

// stopOld stops the old workers of the changed ports; once they have
// returned, it closes their sockets (their counters stay in the topology).
func (r *reconfig) stopOld() error {
	e := r.e
	ids := map[uint16]bool{}
	for _, i := range r.changed {
		ids[uint16(i+1)] = true
	}
	for _, w := range e.workers {
		if ids[w.port.id] {
			r.retire[w.port.id] = append(r.retire[w.port.id], w)
		} else {
			r.keep = append(r.keep, w)
		}
	}
	if old := e.topo.Load(); old != nil {
		r.retired = slices.Clone(old.retired)
	}
	for _, ws := range r.retire {
		for _, w := range ws {
			close(w.quit)
			w.rx.Close() // wakes its poll
			if !e.started {
				close(w.done)
			}
		}
	}
	deadline := time.After(stopTimeout)
	for _, ws := range r.retire {
		for _, w := range ws {
			select {
			case <-w.done:
			case <-deadline:
				return fmt.Errorf("%w: worker %d (%s) did not stop within %v", ErrRestartRequired, w.id, w.port.name, stopTimeout)
			}
			r.retired = append(r.retired, retiredSocket{port: w.port.id, sock: w.rx, rx: true})
			for id, s := range w.txSockets() {
				if s != nil && s != w.rx {
					s.Close()
					r.retired = append(r.retired, retiredSocket{port: uint16(id), sock: s})
				}
			}
		}
	}
	return nil
}

// reopenLinks prepares the changed ports' links; a port whose interface
// or MTU changed gets a new portInfo (and, on a new interface, its own
// kernel drop).
func (r *reconfig) reopenLinks() error {
	e := r.e
	r.ports = slices.Clone(e.ports)
	for _, i := range r.changed {
		p, old := &r.cfg.Ports[i], r.ports[i+1]
		mtu, err := e.b.prepareLink(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrRestartRequired, err)
		}
		if p.Interface == old.iface && mtu == old.mtu {
			continue
		}
		pi := &portInfo{id: old.id, name: old.name, iface: p.Interface, mtu: mtu}
		pi.up.Store(old.up.Load() && p.Interface == old.iface)
		if p.Interface == old.iface {
			pi.kdrop, pi.kdropErr = old.kdrop, old.kdropErr
		} else if e.b.attachDrop(pi, r.cfg.dropVLAN(i)); pi.kdrop != nil {
			r.attached = append(r.attached, pi)
		}
		r.ports[i+1] = pi
		r.reopened[pi.id] = true
	}
	return nil
}

// openNew opens the new workers of the changed ports; they take over the
// stopped workers' handles and counters.
func (r *reconfig) openNew() error {
	for _, i := range r.changed {
		ws, err := r.e.b.openPort(r.cfg, r.ports, i, r.retire[uint16(i+1)])
		r.fresh = append(r.fresh, ws...)
		if err != nil {
			for _, w := range r.fresh {
				w.closeSockets()
			}
			if errors.Is(err, ErrRestartRequired) {
				return err
			}
			return fmt.Errorf("%w: %v", ErrRestartRequired, err)
		}
	}
	return nil
}

// switchTX hands the running workers the reopened ports' new TX sockets,
// which they install between two batches; the old sockets close once they
// have.
func (r *reconfig) switchTX() error {
	if len(r.reopened) == 0 {
		return nil
	}
	e := r.e
	type pending struct {
		w   *worker
		u   *workerUpdate
		old map[uint16]*afpacket.Socket
	}
	var waits []pending
	for _, w := range r.keep {
		u := &workerUpdate{ports: r.ports, tx: map[uint16]txPort{}, applied: make(chan struct{})}
		txs := slices.Clone(w.txSockets())
		old := map[uint16]*afpacket.Socket{}
		for id := range r.reopened {
			s, err := e.b.openTXTo(r.cfg, r.ports[id])
			if err != nil {
				return fmt.Errorf("%w: worker %d (%s): TX to %s: %v", ErrRestartRequired, w.id, w.port.name, r.ports[id].name, err)
			}
			u.tx[id] = s
			old[id] = txs[id]
			txs[id] = s
		}
		w.txs.Store(&txs)
		if e.started {
			w.update.Store(u)
			w.wake()
		} else {
			w.install(u)
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
				r.retired = append(r.retired, retiredSocket{port: id, sock: s})
			}
		}
	}
	return nil
}

// commit gives a port that moved to another interface back to the
// kernel, publishes the new topology and starts the new workers.
func (r *reconfig) commit() {
	e := r.e
	for _, i := range r.changed {
		if old := e.ports[i+1]; old.kdrop != nil && old.kdrop != r.ports[i+1].kdrop {
			old.kdrop.Close()
		}
	}
	changed := make([]offload.Port, len(r.changed))
	for i, c := range r.changed {
		changed[i] = fpPort(r.ports[c+1])
	}
	e.fp.PortsChanged(changed)
	e.ports = r.ports
	e.workers = append(r.keep, r.fresh...)
	slices.SortStableFunc(e.workers, func(a, b *worker) int { return int(a.port.id) - int(b.port.id) })
	e.topo.Store(&topology{ports: r.ports, workers: e.workers, retired: r.retired})
	e.readLinks()
	if e.started {
		for _, w := range r.fresh {
			e.wg.Add(1)
			go w.run()
		}
	}
}

// abort releases the kernel drops a failed restart attached.
func (r *reconfig) abort() {
	for _, pi := range r.attached {
		pi.kdrop.Close()
	}
}
