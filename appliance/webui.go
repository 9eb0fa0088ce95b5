package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/rules"
	"e1kbox/webui"
)

// This file adapts the supervisor's parts to the small interfaces the web
// UI defines (DESIGN.md §2: webui imports nothing from appliance/).

// storeAdapter is the config store with commit-confirm for the web UI: an
// applied config is saved, made pending and applied to the running box; a
// rollback (timer, API or restart) re-applies the previous config.
type storeAdapter struct {
	store *config.Store
	dp    *plane

	mu     sync.Mutex
	states map[uint64]webui.ApplyState
}

func newStoreAdapter(store *config.Store, dp *plane) *storeAdapter {
	return &storeAdapter{store: store, dp: dp, states: map[uint64]webui.ApplyState{}}
}

func versionOf(v config.VersionInfo) webui.Version {
	return webui.Version{ID: strconv.FormatUint(v.ID, 10), Time: v.Time, Source: v.Reason}
}

func (a *storeAdapter) version(id uint64) webui.Version {
	hist, _ := a.store.History()
	for _, v := range hist {
		if v.ID == id {
			return versionOf(v)
		}
	}
	return webui.Version{ID: strconv.FormatUint(id, 10)}
}

func (a *storeAdapter) Current() (json.RawMessage, webui.Version) {
	cfg, id := a.store.Current()
	b, err := config.Marshal(cfg)
	if err != nil {
		b = []byte("null")
	}
	return b, a.version(id)
}

func fieldErrors(err error) []webui.FieldError {
	var out []webui.FieldError
	for _, e := range config.AsErrors(err) {
		out = append(out, webui.FieldError{Path: e.Path, Message: e.Message})
	}
	if len(out) == 0 && err != nil {
		out = append(out, webui.FieldError{Message: err.Error()})
	}
	return out
}

func (a *storeAdapter) Validate(b []byte) []webui.FieldError {
	if _, err := a.store.Check(b); err != nil {
		return fieldErrors(err)
	}
	return nil
}

func (a *storeAdapter) Apply(b []byte, timeout time.Duration) (webui.PendingID, error) {
	cfg, err := a.store.Check(b)
	if err != nil {
		return "", webui.FieldErrors(fieldErrors(err))
	}
	id, err := a.store.Apply(cfg, timeout)
	if err != nil {
		if fe := config.AsErrors(err); len(fe) > 0 {
			return "", webui.FieldErrors(fieldErrors(err))
		}
		return "", err
	}
	a.setState(id, webui.ApplyPending)
	if err := a.dp.Apply(context.Background(), cfg); err != nil {
		// The box could not run it: go back at once, keep the reason.
		if _, rerr := a.store.Rollback(); rerr != nil {
			return "", fmt.Errorf("applying the config failed (%v), and so did the rollback: %w", err, rerr)
		}
		return "", webui.FieldErrors{{Message: "the box could not run this config: " + err.Error()}}
	}
	return webui.PendingID(strconv.FormatUint(id, 10)), nil
}

func parseID(id webui.PendingID) (uint64, error) {
	n, err := strconv.ParseUint(string(id), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", webui.ErrNotFound, id)
	}
	return n, nil
}

func (a *storeAdapter) Confirm(id webui.PendingID) error {
	n, err := parseID(id)
	if err != nil {
		return err
	}
	if err := a.store.Confirm(n); err != nil {
		if errors.Is(err, config.ErrNoPending) || errors.Is(err, config.ErrExpired) {
			return fmt.Errorf("%w: %v", webui.ErrNotFound, err)
		}
		return err
	}
	a.setState(n, webui.ApplyConfirmed)
	return nil
}

func (a *storeAdapter) Rollback(id webui.PendingID) error {
	n, err := parseID(id)
	if err != nil {
		return err
	}
	if p := a.store.Pending(); p == nil || p.ID != n {
		return fmt.Errorf("%w: no pending change %d", webui.ErrNotFound, n)
	}
	if _, err := a.store.Rollback(); err != nil {
		return err
	}
	return nil
}

// rolledBack is called by the store's rollback hook.
func (a *storeAdapter) rolledBack() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, st := range a.states {
		if st == webui.ApplyPending {
			a.states[id] = webui.ApplyRolledBack
		}
	}
}

func (a *storeAdapter) setState(id uint64, st webui.ApplyState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.states[id] = st
}

func (a *storeAdapter) Pending() *webui.PendingInfo {
	p := a.store.Pending()
	if p == nil {
		return nil
	}
	return &webui.PendingInfo{ID: webui.PendingID(strconv.FormatUint(p.ID, 10)),
		Version: a.version(p.ID), Previous: a.version(p.Previous), Deadline: p.Deadline}
}

func (a *storeAdapter) State(id webui.PendingID) webui.ApplyState {
	n, err := parseID(id)
	if err != nil {
		return webui.ApplyUnknown
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.states[n]; ok {
		return st
	}
	return webui.ApplyUnknown
}

func (a *storeAdapter) History() []webui.Version {
	hist, _ := a.store.History()
	out := make([]webui.Version, 0, len(hist))
	for i := len(hist) - 1; i >= 0; i-- { // newest first
		out = append(out, versionOf(hist[i]))
	}
	if len(out) > 1 && out[0].Time.Before(out[len(out)-1].Time) {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func (a *storeAdapter) Get(id string) (json.RawMessage, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: version %q", webui.ErrNotFound, id)
	}
	b, err := a.store.Get(n)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", webui.ErrNotFound, err)
	}
	return b, nil
}

// boxView adapts the dataplane and the kernel's counters.
type boxView struct {
	dp       *plane
	started  time.Time
	hostname string
	procRoot string // "/" normally
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
			Name: p.Name, Interface: p.Interface, Up: p.LinkUp, SpeedMbps: linkSpeed(v.procRoot, p.Interface),
			RxPackets: p.RxPackets, RxBytes: p.RxBytes, TxPackets: p.TxPackets, TxBytes: p.TxBytes,
			RingDrops: p.Ring.RxDrops,
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
	return s
}

func (v *boxView) Table() webui.RuleTable {
	e := v.engine()
	if e == nil {
		return webui.RuleTable{}
	}
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
	info := webui.SystemInfo{Hostname: v.hostname, Version: buildTimestamp, BuildTimestamp: buildTimestamp,
		GoVersion: goVersion(), Started: v.started}
	if e := v.engine(); e != nil {
		info.Mode = string(e.Config().Mode)
	}
	info.MemTotal, info.MemAvailable = readMeminfo(v.procRoot)
	return info
}

// Query lists connections for the web UI: the engine's listing, then the
// web UI's filter, sort and paging.
func (v *boxView) Query(q webui.ConnQuery) ([]webui.Conn, int) {
	e := v.engine()
	if e == nil {
		return nil, 0
	}
	var all []webui.Conn
	f := dataplane.ConnFilter{Proto: q.Proto, State: q.State, Port: q.Port}
	if q.Addr.IsValid() && q.Addr.IsSingleIP() {
		f.Addr = q.Addr.Addr()
	}
	now := time.Now()
	for cursor := 0; ; {
		page, err := e.Conns(f, cursor, dataplane.MaxConnPage)
		if err != nil {
			return nil, 0
		}
		for _, c := range page.Conns {
			wc := webui.Conn{ID: c.ID, Proto: c.Proto, State: c.State, Src: c.Orig.Src, Dst: c.Orig.Dst,
				Packets: c.Packets[0] + c.Packets[1], Bytes: c.Bytes[0] + c.Bytes[1], Created: c.Created,
				Expires: now.Add(time.Duration(c.ExpiresIn))}
			if c.Reply.Dst != c.Orig.Src {
				wc.NATSrc = c.Reply.Dst
			}
			if c.Reply.Src != c.Orig.Dst {
				wc.NATDst = c.Reply.Src
			}
			all = append(all, wc)
		}
		if page.Next == 0 {
			break
		}
		cursor = page.Next
	}
	return webui.FilterConns(all, q)
}

func (v *boxView) Delete(id uint64) error {
	e := v.engine()
	if e == nil {
		return webui.ErrNotFound
	}
	ok, err := e.DeleteConn(id)
	if err != nil {
		return err
	}
	if !ok {
		return webui.ErrNotFound
	}
	return nil
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

// readCPUs reads cumulative busy/idle seconds per core from /proc/stat.
func readCPUs(root string) []webui.CPUStat {
	f, err := os.Open(filepath.Join(root, "proc/stat"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []webui.CPUStat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(fields[0][3:])
		if err != nil {
			continue
		}
		var v [10]float64
		for i := 1; i < len(fields) && i <= 10; i++ {
			x, _ := strconv.ParseFloat(fields[i], 64)
			v[i-1] = x / 100 // USER_HZ
		}
		idle := v[3] + v[4]
		busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
		out = append(out, webui.CPUStat{CPU: n, BusySeconds: busy, IdleSeconds: idle})
	}
	return out
}

// readIRQs reads the interrupt counts of NIC vectors (named eth*) from
// /proc/interrupts.
func readIRQs(root string) []webui.IRQStat {
	f, err := os.Open(filepath.Join(root, "proc/interrupts"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []webui.IRQStat
	sc := bufio.NewScanner(f)
	ncpu := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if ncpu == 0 {
			ncpu = len(fields)
			continue
		}
		if len(fields) < ncpu+2 {
			continue
		}
		irq, err := strconv.Atoi(strings.TrimSuffix(fields[0], ":"))
		if err != nil {
			continue
		}
		name := fields[len(fields)-1]
		if !strings.HasPrefix(name, "eth") && !strings.HasPrefix(name, "enp") {
			continue
		}
		var total uint64
		for _, c := range fields[1 : 1+ncpu] {
			n, _ := strconv.ParseUint(c, 10, 64)
			total += n
		}
		out = append(out, webui.IRQStat{IRQ: irq, Name: name, Count: total})
	}
	return out
}

// irqCPUs is one NIC vector's interrupt count per CPU.
type irqCPUs struct {
	IRQ    int      `json:"irq"`
	Name   string   `json:"name"`
	PerCPU []uint64 `json:"per_cpu"`
}

// readIRQCPUs reads the per-CPU counts of the NIC vectors (eth*) from
// /proc/interrupts, so a pinned vector's counts can be seen to follow its
// CPU.
func readIRQCPUs(root string) []irqCPUs {
	b, err := os.ReadFile(filepath.Join(root, "proc/interrupts"))
	if err != nil {
		return nil
	}
	return parseIRQCPUs(string(b))
}

func parseIRQCPUs(text string) []irqCPUs {
	var out []irqCPUs
	ncpu := 0
	for i, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if i == 0 {
			ncpu = len(fields)
			continue
		}
		if len(fields) < ncpu+2 {
			continue
		}
		irq, err := strconv.Atoi(strings.TrimSuffix(fields[0], ":"))
		if err != nil {
			continue
		}
		name := fields[len(fields)-1]
		if !strings.HasPrefix(name, "eth") {
			continue
		}
		v := irqCPUs{IRQ: irq, Name: name}
		for _, c := range fields[1 : 1+ncpu] {
			n, _ := strconv.ParseUint(c, 10, 64)
			v.PerCPU = append(v.PerCPU, n)
		}
		out = append(out, v)
	}
	return out
}

func linkSpeed(root, iface string) int {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/net", iface, "speed"))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func readMeminfo(root string) (total, avail uint64) {
	f, err := os.Open(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseUint(fields[1], 10, 64)
		switch fields[0] {
		case "MemTotal:":
			total = n * 1024
		case "MemAvailable:":
			avail = n * 1024
		}
	}
	return total, avail
}
