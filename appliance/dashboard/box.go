// Package dashboard adapts the supervisor's parts (the plane's engine, the router's services, the config store, the box's tools and counters) to the small interfaces of the web UI.
package dashboard

import (
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/appliance/system"
	"e1kbox/tuning"
	"e1kbox/webui"
)

// Plane is the dataplane as the dashboard reads it (plane.Plane): the
// running engine, or why there is none, and the tuning's reports.
type Plane interface {
	Engine() (*dataplane.Engine, error)
	TuningReports() []tuning.Report
}

// Box adapts the dataplane, the store's state and the kernel's counters
// to the web UI's small interfaces (Stats, Rules, Conntrack, FDB, Tuning,
// System, Health, Dataplane, Neighbours).
type Box struct {
	Plane Plane
	// Source says where the running config came from (/healthz).
	Source func() string
	// Identity is the running build's (its Build is gokrazy's
	// BuildTimestamp).
	Identity system.Identity
	Started  time.Time
	Hostname string
	ProcRoot string // "/" normally
	Perm     system.Perm
	Boots    *system.BootLog
}

func (v *Box) engine() *dataplane.Engine {
	e, _ := v.Plane.Engine()
	return e
}

func (v *Box) Snapshot() webui.Snapshot {
	s := webui.Snapshot{Time: time.Now(), CPUs: readCPUs(v.ProcRoot), IRQs: readIRQs(v.ProcRoot)}
	e := v.engine()
	if e == nil {
		return s
	}
	snap := e.Snapshot()
	for _, p := range snap.Ports {
		s.Ports = append(s.Ports, webui.PortStats{
			Name: p.Name, Interface: p.Interface, Kind: p.Kind, Up: p.LinkUp, SpeedMbps: linkSpeed(v.ProcRoot, p.Interface),
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
		s.FastPath = &webui.FastPathSummary{Mode: fp.Mode, Reason: fp.Reason, Flows: fp.NATFlows + fp.IPv6Flows + fp.Pairs + fp.Microflows, Packets: fp.Packets,
			Cost: fastPathCost(fp.SelfTest, snap.NAT != nil)}
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

// ipv6Counters is the snapshot's IPv6 part; nil without an IPv6 router.
func ipv6Counters(st *dataplane.IPv6Stats) *webui.IPv6Counters {
	if st == nil {
		return nil
	}
	c := &webui.IPv6Counters{Forwarded: st.Actions[routing.Forward.String()], Conns: st.Conns, Neighbours: st.Neighbours,
		DADFailures: st.DADFailures, Drops: []webui.DropStat{}}
	for reason, n := range st.Drops {
		c.Drops = append(c.Drops, webui.DropStat{Reason: reason, Packets: n})
	}
	slices.SortFunc(c.Drops, func(a, b webui.DropStat) int { return strings.Compare(a.Reason, b.Reason) })
	return c
}

func (v *Box) Entries() []webui.FDBEntry {
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

func (v *Box) Reports() []webui.TuningReport {
	var out []webui.TuningReport
	for _, r := range v.Plane.TuningReports() {
		out = append(out, webui.TuningReport{Knob: r.Knob, Target: r.Target, Before: r.Before, Wanted: r.Wanted,
			After: r.After, Status: string(r.Status), Message: r.Message, ResetsLink: r.ResetsLink})
	}
	return out
}

func (v *Box) Info() webui.SystemInfo {
	info := webui.SystemInfo{Hostname: v.Hostname, Version: v.Identity.Build, BuildTimestamp: v.Identity.Build,
		GoVersion: goVersion(), Started: v.Started, PermProblem: v.Perm.Problem}
	var fp *dataplane.FastPathStats
	if e := v.engine(); e != nil {
		info.Mode = string(e.Config().Mode)
		fp = e.Snapshot().FastPath
	}
	info.Kernel = kernelInfo(v.ProcRoot, fp, info.Mode == string(dataplane.ModeNAT))
	info.MemTotal, info.MemAvailable = readMeminfo(v.ProcRoot)
	return info
}

// detail is the answer of GET /api/dataplane: the engine's own snapshot
// and the NIC vectors' interrupt counts per CPU, read now.
type detail struct {
	dataplane.Snapshot
	IRQs []webui.IRQStat `json:"irqs"`
}

// Detail is the engine's own snapshot (GET /api/dataplane).
func (v *Box) Detail() (any, error) {
	e, err := v.Plane.Engine()
	if err != nil {
		return nil, err
	}
	return detail{Snapshot: e.Snapshot(), IRQs: readIRQs(v.ProcRoot)}, nil
}

// Health is /healthz: healthy when the dataplane runs and every port
// forwards.
func (v *Box) Health() webui.HealthReport {
	h := webui.HealthReport{OK: true, Status: "ok", Build: v.Identity.Build, SBOMHash: v.Identity.SBOMHash, ConfigSource: v.Source(),
		UptimeSeconds: int(time.Since(v.Started).Seconds()), Perm: v.Perm}
	e, err := v.Plane.Engine()
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
func (v *Box) Version() webui.VersionReport {
	return webui.VersionReport{BuildTimestamp: v.Identity.Build, SBOMHash: v.Identity.SBOMHash, Identity: v.Identity, Go: goVersion(), Boots: v.Boots.List()}
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}
