package plane

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/config"
	"e1kbox/tuning"
)

// The tuner's part: the config's tuning plan applied (or read back), the
// CPU plan the workers are pinned by, and the e1000e hang watcher.

// cpuMoves adds to ch the ports whose worker the new CPU plan pins to
// another CPU than the running one.
func (p *Plane) cpuMoves(ch *config.Changes, cfg *config.Config, old, new tuning.CPUPlan) {
	for _, port := range cfg.Ports {
		if !port.IsEnabled() {
			continue
		}
		a, aok := old.WorkerCPU(port.Interface)
		b, bok := new.WorkerCPU(port.Interface)
		if a != b || aok != bok {
			ch.RestartPort(port.Name, "tuning: the worker of %s moves to %s", port.Name, cpuName(b, bok))
		}
	}
}

func cpuName(cpu int, pinned bool) string {
	if !pinned {
		return "no pinned CPU"
	}
	return fmt.Sprintf("CPU %d", cpu)
}

// tuneFor applies the config's tuning plan (when enabled) and returns the
// CPU plan for the workers.
func (p *Plane) tuneFor(ctx context.Context, cfg *config.Config) tuning.CPUPlan {
	plan := cfg.TuningPlan()
	// e1000e requests its MSI-X vectors when the interface is opened: bring
	// the data ports up first so their IRQs exist to be pinned.
	for _, port := range cfg.Ports {
		if !port.IsEnabled() {
			continue
		}
		if l, err := netlink.LinkByName(port.Interface); err == nil {
			if err := netlink.LinkSetUp(l); err != nil {
				p.log.Warn("tuning: bringing up the port", "interface", port.Interface, "err", err)
			}
		}
	}
	if p.tune && p.et != nil {
		p.reports = p.tuner.Apply(ctx, plan)
		for _, r := range p.reports {
			level := slog.LevelInfo
			if r.Status == tuning.StatusError {
				level = slog.LevelWarn
			}
			p.log.Log(ctx, level, "tuning", "knob", r.Knob, "target", r.Target, "before", r.Before, "after", r.After, "status", r.Status, "message", r.Message)
		}
	} else {
		p.reports = p.tuner.Read(plan)
	}
	cpu, err := p.tuner.CPUPlan(plan)
	if err != nil {
		p.log.Warn("tuning: no CPU plan; workers run unpinned", "err", err)
		cpu = tuning.CPUPlan{}
	}
	return cpu
}

// TuningReports returns the reports of the last tuning apply, plus any
// hang mitigations since.
func (p *Plane) TuningReports() []tuning.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]tuning.Report(nil), p.reports...)
}

// addReports records reports made outside Apply (the hang watcher).
func (p *Plane) addReports(rs ...tuning.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, rs...)
}

// WatchHangs applies the e1000e "Detected Hardware Unit Hang" mitigation
// when the kernel log reports one for a data port of cfg, until ctx ends.
func (p *Plane) WatchHangs(ctx context.Context, cfg *config.Config) {
	var ports []string
	for _, port := range cfg.Ports {
		ports = append(ports, port.Interface)
	}
	kmsg, err := tuning.OpenKmsg()
	if err != nil {
		p.log.Warn("tuning: no kernel log; e1000e hang watcher off", "err", err)
		return
	}
	err = p.tuner.WatchHangs(ctx, kmsg, ports, func(r tuning.Report) {
		p.log.Warn("e1000e hardware unit hang: mitigation applied", "knob", r.Knob, "target", r.Target, "status", r.Status, "message", r.Message)
		p.addReports(r)
	})
	if err != nil && ctx.Err() == nil {
		p.log.Warn("tuning: hang watcher stopped", "err", err)
	}
}
