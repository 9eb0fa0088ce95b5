package offload

import (
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/rules"
)

// What takes flows in and out besides the harvest: the workers' offers
// and events, and the engine's changes (links, ports, the FDB, rules,
// configuration).

// install takes an offered flow into the kernel if it still is one the
// fast path can forward exactly as the slow path did.
func (m *Manager) install(o *offer) {
	var ok bool
	switch {
	case !o.routed:
		ok = m.installPair(o)
	case o.pre.v6:
		ok = m.installV6(o)
	default:
		ok = m.installNAT(o)
	}
	if !ok {
		m.c.refused.Add(1)
	}
}

// evictConn takes both directions of p's connection out of the kernel (a
// worker, before the router sees a TCP SYN, FIN or RST of it).
func (m *Manager) evictConn(p *Pre) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.v6 {
		evictBoth(&m.v6, p.flow6, m.evictV6)
	} else {
		evictBoth(&m.nat, p.tuple, m.evictNAT)
	}
}

// macMoved takes the flows to mac out of the kernel: pairs to it in VLAN
// vid, and NAT and IPv6 flows to it on the LAN (VLAN 0).
func (m *Manager) macMoved(mac [6]byte, vid uint16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pairs {
		if p.key.Dst == mac && p.vid == vid {
			m.evictPair(p)
		}
	}
	if vid == 0 {
		m.evictRoutes(func(r *route) bool { return r.toLAN && r.nhMAC == mac })
	}
}

// FDBFlushed follows a flush of the whole FDB (loop protection blocked
// or opened a port): every pair and every routed flow to or from the LAN
// leaves the kernel, so that the slow path learns the stations again
// instead of the harvest learning them back where they were.
func (m *Manager) FDBFlushed() {
	if !m.On() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pairs {
		m.evictPair(p)
	}
	m.evictRoutes(func(r *route) bool { return r.toLAN || r.fromLAN }) // every IPv6 flow is
}

// PortDown takes the flows from and to port id out of the kernel.
func (m *Manager) PortDown(id uint16) {
	if !m.On() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evictPort(id)
}

func (m *Manager) evictPort(id uint16) {
	for _, p := range m.pairs {
		if p.in == id || p.out == id {
			m.evictPair(p)
		}
	}
	m.evictRoutes(func(r *route) bool { return r.uses(id) })
}

// PortsChanged follows a restart of ports: their flows leave the kernel,
// and a port on a new interface gets the program there.
func (m *Manager) PortsChanged(ports []Port) {
	if !m.On() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ports {
		m.evictPort(p.ID)
		if m.ifaces[p.ID] == p.Iface {
			continue
		}
		if m.ifindex[p.ID] != 0 {
			m.prog.Detach(m.ifindex[p.ID])
			m.ifindex[p.ID] = 0
		}
		if err := m.attach(p); err != nil {
			m.fail(err)
		}
	}
}

// SwapRules judges the bridged flows under table t, which swap makes the
// rules' table: those whose verdict changes leave the kernel, and their
// counts go to the current table's rules, before swap runs; the others
// count under their new verdicts after it. The manager holds its lock
// throughout, so that no counts are attributed across the swap. Rules do
// not evict routed flows: the routers pass the packets of known
// connections without a rule lookup, and so does the fast path.
func (m *Manager) SwapRules(t *rules.Table, swap func()) {
	if !m.On() {
		swap()
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.harvest(true)
	flagsOK := !t.Uses(rules.Forward, rules.FieldTCPFlags)
	evicted := false
	for _, p := range m.pairs {
		v, l2only := pairVerdict(t, &p.rk)
		if l2only != p.flow.L2Only {
			m.evictPair(p)
			evicted = true
			continue
		}
		p.next = v
	}
	for _, mf := range m.micros {
		v, ok := microVerdict(t, &mf.rk, flagsOK)
		if !ok {
			m.evictMicro(mf)
			evicted = true
			continue
		}
		mf.next = v
	}
	if evicted {
		// Once no program run can still see the evicted flows, their
		// last counts are final: read them for the current table.
		graceRCU()
		m.harvest(true)
	}
	m.gen, m.flagsOK = t.Generation(), flagsOK
	swap()
	for _, p := range m.pairs {
		p.v = p.next
	}
	for _, mf := range m.micros {
		mf.v = mf.next
	}
}

// Revalidate takes out the flows an applied configuration changed: NAT
// flows of another PPPoE session (the program stops forwarding them
// first: syncPPPoE), NAT and IPv6 connections whose translation, next
// hop or MTU differ (or that are gone), pairs whose ports' VLAN settings
// or FDB entries changed.
func (m *Manager) Revalidate() {
	if !m.On() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	clk := m.clock()
	set := m.o.View.Settings()
	m.syncPPPoE(set)
	m.revalidateNAT(clk)
	m.revalidateV6(clk)
	for _, p := range m.pairs {
		if !m.pairValid(p, clk, set) {
			m.evictPair(p)
		}
	}
}

// graceRCU waits until every BPF program run that started before it has
// ended (the programs run in RCU read-side sections; the global
// membarrier waits for an RCU grace period), or a few milliseconds where
// membarrier is missing.
func graceRCU() {
	const membarrierCmdGlobal = 1
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0); errno != 0 {
		time.Sleep(10 * time.Millisecond)
	}
}
