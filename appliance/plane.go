package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/services/wanclient"
	"e1kbox/tuning"
)

// plane runs the dataplane for the appliance: it owns the engine and the
// tuner, and runs each config by what config.Diff says applying it takes
// (a live swap, a restart of some ports' workers, a new engine).
type plane struct {
	log   *slog.Logger
	tune  bool               // apply the tuning plan (else only read it back)
	tuner *tuning.Tuner      // the one tuner: plans, hang mitigation
	et    io.Closer          // the tuner's ethtool socket, nil without one
	ring  dataplane.RingKind // -rx-ring ("" is the dataplane's default)

	mu      sync.Mutex
	engine  *dataplane.Engine
	err     error            // why there is no engine
	applied *config.Config   // the config running now
	lease   *wanclient.Lease // the WAN DHCP lease (nat.wanDHCP), nil without
	v6      ipv6Prefixes     // the delegation's prefixes for the IPv6 router (ipv6.enabled)
	v6wan   wanAddr6         // the box's WAN addressing for it
	reports []tuning.Report
	cpu     tuning.CPUPlan
}

var errNoEngine = errors.New("dataplane not running")

// newPlane returns a plane whose tuner applies plans when tune is set
// and otherwise only reads the knobs back; the e1000e hang mitigation
// works either way.
func newPlane(log *slog.Logger, tune bool) *plane {
	p := &plane{log: log, tune: tune}
	var et tuning.Ethtool
	if sys, err := tuning.NewEthtool(); err != nil {
		log.Warn("tuning: no ethtool socket", "err", err)
	} else {
		et, p.et = sys, sys
	}
	p.tuner = tuning.New("/", et)
	p.tuner.Log = log
	return p
}

// Apply runs cfg: it classifies the change from the running config
// (config.Diff), re-tunes when the tuning plan or a port changed (ports
// whose workers the new plan moves to another CPU restart), and applies
// it to the running engine, or starts a new engine when there is none or
// the change needs one.
func (p *plane) Apply(ctx context.Context, cfg *config.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := config.Diff(p.applied, cfg)
	cpu := p.cpu
	if ch.Retune {
		cpu = p.tuneFor(ctx, cfg)
		p.cpuMoves(&ch, cfg, p.cpu, cpu)
		p.cpu = cpu
		if n, err := dataplane.SetHousekeeping(cpu.Housekeeping, cpu.CPUs); err != nil {
			p.log.Warn("housekeeping threads not placed", "cpus", cpu.Housekeeping, "err", err)
		} else {
			p.log.Info("housekeeping threads placed", "cpus", cpu.Housekeeping, "threads", n)
		}
	}
	p.applied = cfg
	dc, err := dataplaneConfig(cfg, cpu, p.lease)
	if err == nil {
		dc.Ring.Kind = p.ring
	}
	if err != nil {
		p.stopLocked()
		p.err = err
		return err
	}
	switch {
	case p.engine == nil || ch.Effect == config.Restart:
	case ch.Effect == config.Unchanged:
		return nil
	default:
		err := p.engine.Apply(dc, ch.Restart...)
		if err == nil {
			p.log.Info("dataplane config applied", "change", ch.String(), "why", ch.Why)
			return nil
		}
		if !errors.Is(err, dataplane.ErrRestartRequired) {
			return err
		}
		p.log.Warn("dataplane: the change needs a new engine after all", "change", ch.String(), "err", err)
	}
	p.log.Info("dataplane starting", "change", ch.String(), "why", ch.Why)
	p.stopLocked()
	e, err := dataplane.New(dc, dataplane.Options{Log: p.log})
	if err == nil {
		err = e.Start()
	}
	if err != nil {
		if e != nil {
			e.Close()
		}
		p.err = err
		return err
	}
	p.engine, p.err = e, nil
	p.applyIPv6Locked()
	p.applyWAN6Locked()
	return nil
}

// SetLease takes the WAN DHCP client's lease (nil: none) and applies it
// to the running router live: its WAN address, gateway and MTU.
func (p *plane) SetLease(l *wanclient.Lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lease = l
	if p.engine == nil || p.applied == nil || p.applied.Mode != config.ModeNAT || !p.applied.NAT.WANDHCP {
		return
	}
	dc, err := dataplaneConfig(p.applied, p.cpu, l)
	if err == nil {
		dc.Ring.Kind = p.ring
		err = p.engine.Apply(dc)
	}
	if err != nil {
		p.log.Error("dataplane: the WAN lease not applied", "err", err)
		return
	}
	if l == nil {
		p.log.Warn("dataplane: the WAN has no address")
		return
	}
	p.log.Info("dataplane: WAN address from DHCP", "address", l.Addr, "gateway", l.Gateway, "mtu", l.MTU)
}

// cpuMoves adds to ch the ports whose worker the new CPU plan pins to
// another CPU than the running one.
func (p *plane) cpuMoves(ch *config.Changes, cfg *config.Config, old, new tuning.CPUPlan) {
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
func (p *plane) tuneFor(ctx context.Context, cfg *config.Config) tuning.CPUPlan {
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
func (p *plane) TuningReports() []tuning.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]tuning.Report(nil), p.reports...)
}

// addReports records reports made outside Apply (the hang watcher).
func (p *plane) addReports(rs ...tuning.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, rs...)
}

// watchHangs applies the e1000e "Detected Hardware Unit Hang" mitigation
// when the kernel log reports one for a data port.
func (p *plane) watchHangs(ctx context.Context, ports []string) {
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

func (p *plane) stopLocked() {
	if p.engine == nil {
		return
	}
	if err := p.engine.Close(); err != nil {
		p.log.Warn("dataplane close", "err", err)
	}
	p.engine = nil
	p.err = errNoEngine
}

// Close stops the engine and releases the tuner.
func (p *plane) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
	if p.et != nil {
		p.et.Close()
		p.et = nil
	}
}

// Engine returns the running engine, or nil and why there is none.
func (p *plane) Engine() (*dataplane.Engine, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.engine == nil {
		if p.err == nil {
			return nil, errNoEngine
		}
		return nil, p.err
	}
	return p.engine, nil
}
