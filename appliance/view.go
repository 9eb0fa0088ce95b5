package main

import (
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/system"
	"e1kbox/rules"
	"e1kbox/webui"
)

// boxView adapts the dataplane, the store's state and the kernel's
// counters to the web UI's small interfaces (Stats, Rules, Conntrack,
// FDB, Tuning, System, Health, Dataplane, Neighbours).
type boxView struct {
	dp *plane
	// source says where the running config came from (/healthz).
	source   func() string
	build    string // the running build's identity (gokrazy's BuildTimestamp)
	identity system.Identity
	started  time.Time
	hostname string
	procRoot string // "/" normally
	perm     system.Perm
	boots    *bootLog
}

func (v *boxView) engine() *dataplane.Engine {
	e, _ := v.dp.Engine()
	return e
}

func (v *boxView) Snapshot() webui.Snapshot {
	s := webui.Snapshot{Time: time.Now(), CPUs: readCPUs(v.procRoot), IRQs: readIRQs(v.procRoot)}
	e := v.engine()
	if e == nil {
		return s
	}
	snap := e.Snapshot()
	for _, p := range snap.Ports {
		s.Ports = append(s.Ports, webui.PortStats{
			Name: p.Name, Interface: p.Interface, Kind: p.Kind, Up: p.LinkUp, SpeedMbps: linkSpeed(v.procRoot, p.Interface),
			RxPackets: p.RxPackets, RxBytes: p.RxBytes, TxPackets: p.TxPackets, TxBytes: p.TxBytes,
			RingDrops: p.Ring.RxDrops, Blocked: p.Blocked, LoopWith: p.LoopWith,
		})
	}
	var ring, rulesDrop, malformed, natFull uint64
	other := map[string]uint64{}
	for r := dataplane.Drop(1); r < dataplane.NumDrops; r++ {
		n := snap.Drops[r]
		switch {
		case n == 0:
		case r == dataplane.DropRule || r == dataplane.DropReject:
			rulesDrop += n
		case r == dataplane.NATDrop(nat.ReasonTableFull):
			natFull += n
		case r < dataplane.Drop(frame.NumReasons):
			malformed += n
		default:
			other[r.String()] += n
		}
	}
	for _, p := range snap.Ports {
		ring += p.Ring.RxDrops
	}
	s.Drops = append(s.Drops,
		webui.DropStat{Reason: webui.DropRing, Packets: ring},
		webui.DropStat{Reason: webui.DropRules, Packets: rulesDrop},
		webui.DropStat{Reason: webui.DropMalformed, Packets: malformed},
	)
	if fp := snap.FastPath; fp != nil {
		s.FastPath = &webui.FastPathSummary{Mode: fp.Mode, Reason: fp.Reason, Flows: fp.NATFlows + fp.IPv6Flows + fp.Pairs + fp.Microflows, Packets: fp.Packets}
	}
	if snap.NAT != nil {
		s.Drops = append(s.Drops, webui.DropStat{Reason: webui.DropNATFull, Packets: natFull})
		s.Conntrack = &webui.ConntrackSummary{Entries: snap.NAT.Conns, Capacity: snap.NAT.MaxConns}
	}
	for reason, n := range other {
		if n > 0 {
			s.Drops = append(s.Drops, webui.DropStat{Reason: reason, Packets: n})
		}
	}
	for _, w := range snap.Workers {
		s.WorkerRestarts += w.Restarts
	}
	s.IPv6 = ipv6Counters(snap.IPv6)
	return s
}

func (v *boxView) Table() webui.RuleTable {
	e := v.engine()
	if e == nil {
		return webui.RuleTable{}
	}
	e.SyncFastPath() // the counters of what the fast path forwarded
	return ruleTable(e)
}

func (v *boxView) Entries() []webui.FDBEntry {
	e := v.engine()
	if e == nil {
		return nil
	}
	var out []webui.FDBEntry
	for _, en := range e.FDBEntries() {
		out = append(out, webui.FDBEntry{MAC: en.MAC.String(), Port: en.PortName, VLAN: en.VLAN, Age: en.Age, Static: en.Static})
	}
	return out
}

func (v *boxView) Reports() []webui.TuningReport {
	var out []webui.TuningReport
	for _, r := range v.dp.TuningReports() {
		out = append(out, webui.TuningReport{Knob: r.Knob, Target: r.Target, Before: r.Before, Wanted: r.Wanted,
			After: r.After, Status: string(r.Status), Message: r.Message, ResetsLink: r.ResetsLink})
	}
	return out
}

func (v *boxView) Info() webui.SystemInfo {
	info := webui.SystemInfo{Hostname: v.hostname, Version: v.build, BuildTimestamp: v.build,
		GoVersion: goVersion(), Started: v.started, PermProblem: v.perm.Problem}
	if e := v.engine(); e != nil {
		info.Mode = string(e.Config().Mode)
	}
	info.MemTotal, info.MemAvailable = readMeminfo(v.procRoot)
	return info
}

// Query lists connections for the web UI: the router's table, then the
// IPv6 router's, streamed in chunks through a selector that keeps only
// the page and the entries ranked before it, never a copy of a table.
func (v *boxView) Query(q webui.ConnQuery) ([]webui.Conn, int) {
	e := v.engine()
	if e == nil {
		return nil, 0
	}
	e.SyncFastPath() // the counters and deadlines of what the fast path forwarded
	sel := webui.NewConnSelector(q)
	now := time.Now()
	eachV6Conn(e.IPv6(), &q, sel, now)
	if !wantsV4(&q) {
		return sel.Page()
	}
	var wc webui.Conn
	err := dataplane.EachConn(e.NAT(), connFilter(q), func(c *dataplane.Conn) bool {
		wc = webui.Conn{ID: c.ID, Proto: c.Proto, State: c.State, Kind: c.Kind, Src: c.Orig.Src, Dst: c.Orig.Dst,
			Packets: c.Packets[0] + c.Packets[1], Bytes: c.Bytes[0] + c.Bytes[1], Created: c.Created,
			Expires: now.Add(time.Duration(c.ExpiresIn))}
		if c.Reply.Dst != c.Orig.Src {
			wc.NATSrc = c.Reply.Dst
		}
		if c.Reply.Src != c.Orig.Dst {
			wc.NATDst = c.Reply.Src
		}
		sel.Add(&wc)
		return true
	})
	if err != nil {
		return nil, 0
	}
	return sel.Page()
}

// Delete deletes a NAT connection; IPv6 ones (ID 0) are not deleted.
func (v *boxView) Delete(id uint64) error {
	e := v.engine()
	if e == nil || id == 0 {
		return webui.ErrNotFound
	}
	if e.NAT() == nil || !e.NAT().DeleteConn(nat.ConnID(id)) {
		return webui.ErrNotFound
	}
	e.SyncFastPath() // the deleted connection's flows leave the kernel
	return nil
}

// connFilter is the part of a web UI query the router's listing filters
// by itself: the rest (address prefixes, sort, paging) is FilterConns'.
func connFilter(q webui.ConnQuery) dataplane.ConnFilter {
	f := dataplane.ConnFilter{Proto: q.Proto, State: q.State, Kind: q.Kind, Port: q.Port}
	if q.Addr.IsValid() && q.Addr.IsSingleIP() {
		f.Addr = q.Addr.Addr()
	}
	return f
}

// DeleteMatching deletes the connections matching q: in the router's
// table directly, or (for an address prefix) by the IDs a listing finds.
// IPv6 connections are not deleted: a query only they match deletes none.
func (v *boxView) DeleteMatching(q webui.ConnQuery) (int, error) {
	e := v.engine()
	if e == nil || e.NAT() == nil || !wantsV4(&q) {
		return 0, nil
	}
	defer e.SyncFastPath() // the deleted connections' flows leave the kernel
	if !q.Addr.IsValid() || q.Addr.IsSingleIP() {
		return dataplane.DeleteConns(e.NAT(), connFilter(q))
	}
	var ids []nat.ConnID
	err := dataplane.EachConn(e.NAT(), connFilter(q), func(c *dataplane.Conn) bool {
		if q.Addr.Contains(c.Orig.Src.Addr()) || q.Addr.Contains(c.Orig.Dst.Addr()) ||
			q.Addr.Contains(c.Reply.Src.Addr()) || q.Addr.Contains(c.Reply.Dst.Addr()) {
			ids = append(ids, nat.ConnID(c.ID))
		}
		return true
	})
	n := 0
	for _, id := range ids {
		if e.NAT().DeleteConn(id) {
			n++
		}
	}
	return n, err
}

// Neighbours lists the router's ARP cache, then the IPv6 router's
// neighbour cache.
func (v *boxView) Neighbours() ([]webui.Neighbour, error) {
	e, err := v.dp.Engine()
	if err != nil {
		return nil, err
	}
	ns, err := dataplane.Neighbours(e.NAT())
	if err != nil {
		return nil, err
	}
	out := make([]webui.Neighbour, len(ns))
	for i, n := range ns {
		out[i] = webui.Neighbour{Side: n.Side, IP: n.IP, MAC: n.MAC, Resolved: n.Resolved, Confirmed: n.Confirmed}
	}
	return append(out, v6Neighbours(e.IPv6(), portNames(e), time.Now())...), nil
}

// detail is the answer of GET /api/dataplane: the engine's own snapshot
// and the NIC vectors' interrupt counts per CPU, read now.
type detail struct {
	dataplane.Snapshot
	IRQs []webui.IRQStat `json:"irqs"`
}

// Detail is the engine's own snapshot (GET /api/dataplane).
func (v *boxView) Detail() (any, error) {
	e, err := v.dp.Engine()
	if err != nil {
		return nil, err
	}
	return detail{Snapshot: e.Snapshot(), IRQs: readIRQs(v.procRoot)}, nil
}

// Health is /healthz: healthy when the dataplane runs and every port
// forwards.
func (v *boxView) Health() webui.HealthReport {
	h := webui.HealthReport{OK: true, Status: "ok", Build: v.build, SBOMHash: v.identity.SBOMHash, ConfigSource: v.source(),
		UptimeSeconds: int(time.Since(v.started).Seconds()), Perm: v.perm}
	e, err := v.dp.Engine()
	if err != nil {
		h.OK, h.DataplaneError = false, err.Error()
	} else {
		dh := e.Health()
		h.Dataplane, h.OK = dh, dh.OK
	}
	if !h.OK {
		h.Status = "degraded"
	}
	return h
}

// Version is /version.
func (v *boxView) Version() webui.VersionReport {
	return webui.VersionReport{BuildTimestamp: v.build, SBOMHash: v.identity.SBOMHash, Identity: v.identity, Go: goVersion(), Boots: v.boots.List()}
}

// ruleTable reads the running rule table and its counters.
func ruleTable(e *dataplane.Engine) webui.RuleTable {
	set := e.Rules()
	if set == nil {
		return webui.RuleTable{}
	}
	t, counters := set.Counters()
	now, since := time.Now(), e.Now()
	rt := webui.RuleTable{Subtables: t.Subtables(), Generation: t.Generation()}
	for _, c := range []rules.Chain{rules.Forward, rules.Input, rules.Output} {
		pk, by := set.PolicyCounter(c)
		rt.Policies = append(rt.Policies, webui.PolicyStat{Chain: c.String(), Action: t.Policy(c).String(), Packets: pk, Bytes: by})
	}
	byRule := map[int]rules.RuleCounter{}
	for _, c := range counters {
		byRule[c.Rule] = c
	}
	for i, r := range t.Rules() {
		rs := webui.RuleStat{Chain: r.Chain.String(), Text: ruleText(r), Counted: r.Counter}
		if c, ok := byRule[i]; ok {
			rs.Packets, rs.Bytes = c.Packets, c.Bytes
			if c.LastHit > 0 {
				rs.LastHit = now.Add(-time.Duration(since - c.LastHit))
			}
		}
		rt.Rules = append(rt.Rules, rs)
	}
	return rt
}

// ruleText is a rule's canonical text without its chain.
func ruleText(r rules.Rule) string {
	r.Chain = rules.Forward
	return r.String()
}
