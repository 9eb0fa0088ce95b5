package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/tuning"

	"github.com/vishvananda/netlink"
)

// dataplaneConfig translates the runtime config into the dataplane's.
// cpu is the CPU plan the tuning applied (its worker CPUs pin the
// workers). Disabled ports are left out.
//
// In NAT mode the router's addresses are the WAN port's first IPv4
// prefix and the LAN ports' IPv4 prefix (exactly one: the LAN ports are
// one segment with one router address), and the host port, which sits on
// the LAN segment, gets the smallest LAN port MTU.
func dataplaneConfig(c *config.Config, cpu tuning.CPUPlan) (*dataplane.Config, error) {
	var d *dataplane.Config
	switch c.Mode {
	case config.ModeBridge:
		d = &dataplane.Config{Mode: dataplane.ModeBridge, CPU: cpu}
	case config.ModeNAT:
		d = &dataplane.Config{Mode: dataplane.ModeNAT, CPU: cpu}
	default:
		return nil, fmt.Errorf("mode %q: want bridge or nat", c.Mode)
	}
	lanMTU := 0
	for i, p := range c.Ports {
		if !p.IsEnabled() {
			continue
		}
		dp := dataplane.Port{Name: p.Name, Interface: p.Interface, MTU: p.MTU}
		if !p.VLANs.IsZero() {
			if c.Mode == config.ModeNAT {
				return nil, fmt.Errorf("ports[%d].vlans: VLAN-aware ports are for bridge mode; the NAT router's ports are untagged", i)
			}
			dp.VLANs = &dataplane.VLANs{Native: p.VLANs.Native, Allowed: p.VLANs.Allowed}
		}
		if c.Mode == config.ModeNAT {
			dp.Role = dataplane.Role(p.Role)
			if p.Role == config.RoleLAN && (lanMTU == 0 || p.MTU < lanMTU) {
				lanMTU = p.MTU
			}
		}
		d.Ports = append(d.Ports, dp)
	}
	if h := c.HostPort; h != nil {
		d.HostPort = &dataplane.HostPort{Name: h.Name, Interface: h.Interface, Addresses: h.Addresses, MTU: lanMTU}
	}
	if c.Mode == config.ModeNAT {
		n, err := natConfig(c)
		if err != nil {
			return nil, err
		}
		d.NAT = n
	}
	d.Bridge = dataplane.Bridge{AgingTime: dataplane.Duration(c.Bridge.FDBAging), FDBSize: c.Bridge.FDBSize}
	for _, s := range c.Bridge.Static {
		d.Bridge.Static = append(d.Bridge.Static, dataplane.StaticEntry{MAC: [6]byte(s.MAC), VLAN: s.VLAN, Port: s.Port})
	}
	rs := c.Rules
	d.Rules = &rs
	return d, nil
}

// natConfig translates the router's part of a NAT mode config.
func natConfig(c *config.Config) (*dataplane.NAT, error) {
	cn := &c.NAT
	if cn.WANDHCP {
		return nil, errors.New("nat.wanDHCP: the dataplane has no DHCP client for the WAN address; give the WAN port a static address and nat.gateway")
	}
	n := &dataplane.NAT{Gateway: cn.Gateway, PortMin: cn.MasqueradePorts.First, PortMax: cn.MasqueradePorts.Last,
		MaxConns: cn.Conntrack.Size}
	for i, p := range c.Ports {
		if !p.IsEnabled() {
			continue
		}
		for j, a := range p.Addresses {
			if !a.Addr().Is4() {
				continue
			}
			switch {
			case p.Role == config.RoleWAN && !n.WANAddr.IsValid():
				n.WANAddr = a
			case p.Role == config.RoleLAN && n.LANAddr.IsValid():
				return nil, fmt.Errorf("ports[%d].addresses[%d]: the router has one LAN address (%s already); the LAN ports form one segment", i, j, n.LANAddr)
			case p.Role == config.RoleLAN:
				n.LANAddr = a
			}
		}
	}
	t := &cn.Conntrack.Timeouts
	secs := func(d config.Duration) int { return int((d.D() + time.Second - 1) / time.Second) }
	n.Timeouts = nat.Timeouts{
		TCPSynSent: secs(t.TCPSynSent), TCPSynRecv: secs(t.TCPSynRecv), TCPEstablished: secs(t.TCPEstablished),
		TCPFinWait: secs(t.TCPFinWait), TCPCloseWait: secs(t.TCPCloseWait), TCPLastAck: secs(t.TCPLastAck),
		TCPTimeWait: secs(t.TCPTimeWait), TCPClose: secs(t.TCPClose),
		UDPUnreplied: secs(t.UDP), UDPAssured: secs(t.UDPStream), ICMP: secs(t.ICMP), Generic: secs(t.Generic),
	}
	if !cn.MSSClampOn() {
		n.MSSClamp = -1
	}
	for _, f := range cn.Forwards {
		proto := uint8(frame.ProtoTCP)
		if f.Proto == "udp" {
			proto = frame.ProtoUDP
		}
		n.Forwards = append(n.Forwards, nat.PortForward{Proto: proto, Port: f.WANPorts.First, PortEnd: f.WANPorts.Last,
			To: netip.AddrPortFrom(f.LANHost, f.LANPort)})
	}
	return n, nil
}

// plane runs the dataplane engine for the appliance: it tunes the ports,
// starts the engine from a runtime config, applies later configs (a new
// engine when the change needs one) and stops it. It is the seam between
// the runtime config and the dataplane for the web UI.
type plane struct {
	log  *slog.Logger
	tune bool

	mu      sync.Mutex
	engine  *dataplane.Engine
	err     error          // why there is no engine
	applied *config.Config // the config running now
	reports []tuning.Report
	cpu     tuning.CPUPlan
}

var errNoEngine = errors.New("dataplane not running")

// Apply runs cfg: it applies it to the running engine, or (re)starts the
// engine when there is none or the change needs a restart.
func (p *plane) Apply(ctx context.Context, cfg *config.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cpu := p.cpu
	if p.applied == nil || config.Diff(p.applied, cfg).Tuning || len(config.Diff(p.applied, cfg).Ports) > 0 {
		cpu = p.tuneFor(ctx, cfg)
	}
	p.applied = cfg
	dc, err := dataplaneConfig(cfg, cpu)
	if err != nil {
		p.stopLocked()
		p.err = err
		return err
	}
	if p.engine != nil {
		err := p.engine.Apply(dc)
		if err == nil {
			p.log.Info("dataplane config applied")
			return nil
		}
		if !errors.Is(err, dataplane.ErrRestartRequired) {
			return err
		}
		p.log.Info("dataplane restarting for the new config")
		p.stopLocked()
	}
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
	return nil
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
	var et tuning.Ethtool
	if p.tune {
		sys, err := tuning.NewEthtool()
		if err != nil {
			p.log.Warn("tuning: no ethtool socket", "err", err)
		} else {
			defer sys.Close()
			et = sys
		}
	}
	t := tuning.New("/", et)
	t.Log = p.log
	if p.tune && et != nil {
		p.reports = t.Apply(ctx, plan)
		for _, r := range p.reports {
			level := slog.LevelInfo
			if r.Status == tuning.StatusError {
				level = slog.LevelWarn
			}
			p.log.Log(ctx, level, "tuning", "knob", r.Knob, "target", r.Target, "before", r.Before, "after", r.After, "status", r.Status, "message", r.Message)
		}
	} else {
		p.reports = t.Read(plan)
	}
	cpu, err := t.CPUPlan(plan)
	if err != nil {
		p.log.Warn("tuning: no CPU plan; workers run unpinned", "err", err)
		cpu = tuning.CPUPlan{}
	}
	p.cpu = cpu
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
	var et tuning.Ethtool
	if sys, err := tuning.NewEthtool(); err == nil {
		defer sys.Close()
		et = sys
	}
	t := tuning.New("/", et)
	t.Log = p.log
	err = t.WatchHangs(ctx, kmsg, ports, func(r tuning.Report) {
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

// Close stops the engine.
func (p *plane) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
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
