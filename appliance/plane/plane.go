// Package plane runs the dataplane's engine and tuner for the supervisor: it translates each config for the engine, applies it as config.Diff says, and applies the WAN lease and IPv6 addressing the router hands it.
package plane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/router"
	"e1kbox/appliance/services/pppoe"
	"e1kbox/appliance/services/wanclient"
	"e1kbox/tuning"
)

// Plane runs the dataplane for the appliance: it owns the engine and the
// tuner, and runs each config by what config.Diff says applying it takes
// (a live swap, a restart of some ports' workers, a new engine). The
// router calls SetLease, SetIPv6 and SetIPv6WAN under its own lock: the
// plane never calls the router (the decline it is handed does not block).
type Plane struct {
	log   *slog.Logger
	tune  bool               // apply the tuning plan (else only read it back)
	tuner *tuning.Tuner      // the one tuner: plans, hang mitigation
	et    io.Closer          // the tuner's ethtool socket, nil without one
	ring  dataplane.RingKind // "" is the dataplane's default

	// live is the running engine for the readers that must not wait
	// for an Apply (LANPort, LANActivity: the DHCP server's lock is
	// held); nil without one.
	live atomic.Pointer[dataplane.Engine]

	mu      sync.Mutex
	engine  *dataplane.Engine
	err     error                // why there is no engine
	applied *config.Config       // the config running now
	lease   *wanclient.Lease     // the WAN DHCP lease (nat.wanDHCP), nil without
	pppoe   *pppoe.Status        // the WAN's PPPoE client (SetPPPoE), nil: not a PPPoE WAN
	v6      ipv6Prefixes         // the delegation's prefixes for the IPv6 router (ipv6.enabled)
	v6wan   router.WANAddressing // the box's WAN addressing for it
	reports []tuning.Report
	cpu     tuning.CPUPlan
}

var errNoEngine = errors.New("dataplane not running")

// New returns a plane whose tuner applies plans when tune is set and
// otherwise only reads the knobs back (the e1000e hang mitigation works
// either way), and whose engines use RX rings of kind ring.
func New(log *slog.Logger, tune bool, ring dataplane.RingKind) *Plane {
	p := &Plane{log: log, tune: tune, ring: ring}
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
func (p *Plane) Apply(ctx context.Context, cfg *config.Config) error {
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
	dc, err := p.configLocked()
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
	p.live.Store(e)
	p.applyIPv6Locked()
	p.applyWAN6Locked()
	return nil
}

// SetLease takes the WAN DHCP client's lease (nil: none) and applies it
// to the running router live: its WAN address, gateway and MTU.
func (p *Plane) SetLease(l *wanclient.Lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lease = l
	if p.engine == nil || p.applied == nil || p.applied.Mode != config.ModeNAT || !p.applied.NAT.WANDHCP {
		return
	}
	dc, err := p.configLocked()
	if err == nil {
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

func (p *Plane) stopLocked() {
	if p.engine == nil {
		return
	}
	p.live.Store(nil)
	if err := p.engine.Close(); err != nil {
		p.log.Warn("dataplane close", "err", err)
	}
	p.engine = nil
	p.err = errNoEngine
}

// Close stops the engine and releases the tuner.
func (p *Plane) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
	if p.et != nil {
		p.et.Close()
		p.et = nil
	}
}

// Engine returns the running engine, or nil and why there is none.
func (p *Plane) Engine() (*dataplane.Engine, error) {
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
