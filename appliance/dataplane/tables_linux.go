package dataplane

import (
	"fmt"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/hostport"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/rules"
)

// tables are the state the engine's workers share: each has one owner
// that creates it (New) and changes its configuration (Apply); the
// workers read and update entries concurrently through the tables' own
// lock-free or striped schemes.
type tables struct {
	fdb     *bridge.FDB
	rules   *rules.Set
	host    *hostport.Port
	hostMAC [6]byte
	natr    *nat.Router      // NAT mode only
	natp    natPorts         // the router's ports as opened
	fp      *offload.Manager // the in-kernel fast path's flows (fastpath_linux.go)
	ppp     *pppoeQueue      // NAT mode: the PPPoE client's control frames (wanlink_pppoe.go)
	pppLink *PPPoELink       // NAT mode: the PPPoE client's endpoint
}

// openTables creates the FDB with its static entries, the rule set with a
// handle per worker (and spares) and, in NAT mode, the router.
func (e *Engine) openTables(cfg *Config) error {
	fdb, err := bridge.New(bridge.Options{Capacity: cfg.Bridge.FDBSize, AgingTime: cfg.Bridge.AgingTime,
		Full: fullOf(cfg), SharedVLAN: cfg.Bridge.SharedVLAN})
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	e.fdb = fdb
	if err := e.setStatics(nil, cfg); err != nil {
		return err
	}
	nworkers := 0
	for _, p := range cfg.Ports {
		nworkers += max(p.Workers, 1)
	}
	if e.host != nil {
		nworkers++
	}
	// Spare handles let a port restart with more workers without
	// restarting the engine.
	e.b.handles = newHandlePool(nworkers + spareWorkers)
	e.rules = rules.NewSet(rules.SetOptions{Workers: e.b.handles.size})
	t, err := compileRules(cfg)
	if err != nil {
		return err
	}
	e.rules.Swap(t)
	if modeOf(cfg) == ModeNAT {
		e.ppp = newPPPoEQueue()
		if err := e.b.openNAT(cfg, e.ports); err != nil {
			return err
		}
		e.pppLink, err = openPPPoELink(e.ports[e.natp.wanID].iface, e.natp.wanMAC, e.ppp, func() *settings { return e.cur.Load() })
		return err
	}
	return nil
}

func compileRules(cfg *Config) (*rules.Table, error) {
	rs := cfg.Rules
	if rs == nil {
		rs = &rules.Ruleset{}
	}
	t, err := rules.Compile(rs, rules.Options{Ports: cfg.PortNames()})
	if err != nil {
		return nil, fmt.Errorf("dataplane: rules: %w", err)
	}
	return t, nil
}

// setStatics replaces the static FDB entries of old (nil: none) with
// those of cfg, and keeps the host port's MAC static.
func (e *Engine) setStatics(old, cfg *Config) error {
	ids := cfg.PortNames()
	type key struct {
		mac  bridge.MAC
		vlan uint16
	}
	want := map[key]uint16{}
	for _, s := range cfg.Bridge.Static {
		want[key{s.MAC, s.VLAN}] = ids[s.Port]
	}
	if e.host != nil {
		want[key{e.hostMAC, 0}] = uint16(len(e.ports) - 1)
	}
	if old != nil {
		for _, s := range old.Bridge.Static {
			if _, ok := want[key{s.MAC, s.VLAN}]; !ok {
				e.fdb.Delete(s.MAC, s.VLAN)
			}
		}
	}
	for k, port := range want {
		if err := e.fdb.AddStatic(k.mac, k.vlan, port); err != nil {
			return fmt.Errorf("dataplane: static FDB entry %s vlan %d: %w", k.mac, k.vlan, err)
		}
	}
	return nil
}

func agingOf(cfg *Config) time.Duration {
	if cfg.Bridge.AgingTime == 0 {
		return bridge.DefaultAgingTime
	}
	return cfg.Bridge.AgingTime
}

func fullOf(cfg *Config) bridge.FullPolicy {
	if cfg.Bridge.Refuse {
		return bridge.Refuse
	}
	return bridge.EvictOldest
}
