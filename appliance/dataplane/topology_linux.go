package dataplane

import "e1kbox/appliance/dataplane/afpacket"

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

// health reports per port whether its workers run and its link is up;
// running says the engine is started and not closed.
func (t *topology) health(running bool) Health {
	h := Health{OK: true}
	for _, p := range t.ports[1:] {
		ph := PortHealth{Name: p.name, Interface: p.iface, Kind: kindOf(p), LinkUp: p.up.Load()}
		for _, w := range t.workers {
			if w.port == p {
				ph.Workers++
				if w.running.Load() {
					ph.Running++
				}
			}
		}
		ph.OK = running && ph.LinkUp && ph.Workers > 0 && ph.Running == ph.Workers
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

// snapshot sums the ports' and workers' counters: what the workers
// published (once per batch) and the sockets' kernel statistics, those of
// retired sockets included.
func (t *topology) snapshot() Snapshot {
	s := Snapshot{Ports: make([]PortStats, len(t.ports)-1), Workers: make([]WorkerStats, len(t.workers))}
	for i, p := range t.ports[1:] {
		s.Ports[i] = PortStats{ID: p.id, Name: p.name, Interface: p.iface, Kind: kindOf(p), MTU: p.mtu, LinkUp: p.up.Load(),
			KernelDrop: p.kdrop != nil, KernelDropError: p.kdropErr, AfterTCX: p.afterTCX(), Blocks: p.loop.blocks.Load()}
		if p.loop.blocked() {
			s.Ports[i].Blocked = true
			if peer := int(p.loop.peer.Load()); peer < len(t.ports) && t.ports[peer] != nil {
				s.Ports[i].LoopWith = t.ports[peer].name
			}
		}
	}
	for _, r := range t.retired {
		addSocketStats(&s.Ports[r.port-1].Ring, r.sock.Stats(), r.rx)
	}
	for i, w := range t.workers {
		s.Workers[i] = w.addStats(&s)
	}
	return s
}

// addStats adds the worker's counters to its ports' and the drops in s
// and returns its own stats.
func (w *worker) addStats(s *Snapshot) WorkerStats {
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
	return WorkerStats{ID: w.id, Port: w.port.name, CPU: int(w.pinned.Load()), Running: running,
		Batches: c.batches.Load(), Panics: w.panics.Load(), Restarts: w.restarts.Load(), LastPanic: last,
		CacheHits: c.cacheHits.Load(), CacheMisses: c.cacheMisses.Load()}
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
