package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Effect is what it takes to run a changed config: every change is
// classified once, here, and the supervisor and the dataplane act on it.
type Effect uint8

// The effects, from the least disruptive.
const (
	// Unchanged: nothing the box runs changed (a disabled port, the
	// dashboard's confirm timeout, the router services in bridge mode).
	Unchanged Effect = iota
	// Live: the dataplane takes the new settings between two batches;
	// nothing stops, connections and learned addresses stay.
	Live
	// RestartPorts: the ports in Changes.Restart restart their workers
	// (their frames pause for milliseconds); the other ports keep
	// forwarding, connections and learned addresses stay.
	RestartPorts
	// Restart: the dataplane is rebuilt; forwarding pauses and the
	// connection table and the learned addresses are lost.
	Restart
)

func (e Effect) String() string {
	switch e {
	case Unchanged:
		return "unchanged"
	case Live:
		return "live"
	case RestartPorts:
		return "restart-ports"
	}
	return "restart"
}

// MarshalText implements encoding.TextMarshaler.
func (e Effect) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// Changes says which parts of the config differ between two versions and
// what applying the new one takes.
type Changes struct {
	// Mode is set when the mode changed.
	Mode bool `json:"mode,omitempty"`
	// Ports are the names of data ports that were added, removed or
	// changed in any field, sorted.
	Ports     []string `json:"ports,omitempty"`
	HostPort  bool     `json:"hostPort,omitempty"`
	Bridge    bool     `json:"bridge,omitempty"`
	NAT       bool     `json:"nat,omitempty"`
	Rules     bool     `json:"rules,omitempty"`
	Tuning    bool     `json:"tuning,omitempty"`
	Dashboard bool     `json:"dashboard,omitempty"`
	// Services: the DHCP or DNS server or the NTP client changed (they
	// are reconfigured live; the dataplane is not touched).
	Services bool `json:"services,omitempty"`
	// FastPath: the fast path setting changed (the dataplane restarts:
	// it loads the fast path when it starts).
	FastPath bool `json:"fastPath,omitempty"`
	// PPPoE: nat.wan.pppoe changed; the router restarts the PPPoE client
	// (the session redials).
	PPPoE bool `json:"pppoe,omitempty"`

	// Effect is what applying the change takes.
	Effect Effect `json:"effect"`
	// Restart are the ports whose workers restart (Effect RestartPorts),
	// sorted.
	Restart []string `json:"restart,omitempty"`
	// Retune: the tuning plan must be applied again (tuning or a data
	// port changed).
	Retune bool `json:"retune,omitempty"`
	// Why explains every restart, naming the field: "nat.conntrack.size:
	// the connection table is allocated once".
	Why []string `json:"why,omitempty"`
}

// Diff compares two configs section by section (by their JSON form) and
// classifies the change. A nil old config (nothing runs yet) is a Restart.
func Diff(old, new *Config) Changes {
	var ch Changes
	if old == nil {
		ch = sections(&Config{}, new)
		ch.Retune = true
		ch.restart("the dataplane is not running")
		return ch
	}
	ch = sections(old, new)
	ch.Retune = ch.Tuning || len(ch.Ports) > 0
	running := slices.ContainsFunc(ch.Ports, func(name string) bool {
		o, p := old.Port(name), new.Port(name)
		return o != nil && o.IsEnabled() || p != nil && p.IsEnabled()
	})
	if ch.Rules || ch.Bridge || ch.Tuning || running || (ch.NAT || ch.Services) && new.Mode == ModeNAT {
		ch.raise(Live)
	}
	ch.classify(old, new)
	return ch
}

// classify finds the changes that restart ports or the dataplane: what
// the dataplane opens or allocates once.
func (ch *Changes) classify(old, new *Config) {
	if old.Mode != new.Mode {
		ch.restart("mode: %s → %s", old.Mode, new.Mode)
	}
	if old.FastPath != new.FastPath {
		ch.restart("fastPath: %s → %s; the fast path is loaded when the dataplane starts", old.FastPath, new.FastPath)
	}
	if a, b := enabledNames(old), enabledNames(new); !slices.Equal(a, b) {
		ch.restart("ports: the enabled ports changed (%s → %s); port ids follow their order", strings.Join(a, ","), strings.Join(b, ","))
	}
	nat := new.Mode == ModeNAT
	for i := range new.Ports {
		p := &new.Ports[i]
		o := old.Port(p.Name)
		if !p.IsEnabled() || o == nil || !o.IsEnabled() {
			continue
		}
		at := index("ports", i)
		switch {
		case nat && o.Role != p.Role:
			ch.restart("%s.role: the router's sides are fixed when it starts", at)
		case nat && (o.Interface != p.Interface || o.mtu() != p.mtu()):
			ch.restart("%s: in NAT mode the router's MACs and MTUs come from its ports' interfaces", at)
		case o.Interface != p.Interface || o.mtu() != p.mtu():
			ch.RestartPort(p.Name, "%s: a new interface or MTU reopens the port's rings", at)
		}
	}
	if !sameJSON(old.HostPort, new.HostPort) {
		ch.restart("hostPort: the host port's TAP device is created once")
	}
	if old.Bridge.size() != new.Bridge.size() {
		ch.restart("bridge.fdbSize: the forwarding database is allocated once")
	}
	if nat && old.Mode == ModeNAT && new.HostPort != nil && old.RouterLAN() != new.RouterLAN() {
		ch.restart("the router's LAN address: the box's own stack on the host port has it")
	}
	if nat && old.Mode == ModeNAT && old.NAT.Conntrack.size() != new.NAT.Conntrack.size() {
		ch.restart("nat.conntrack.size: the connection table is allocated once")
	}
	// The WAN link's VLAN and priorities apply live, between two batches;
	// tagging the WAN on or off restarts the WAN port, whose ring of
	// tagged frames is small on an untagged WAN.
	if a, b := old.NAT.WAN.VLAN.ID != 0, new.NAT.WAN.VLAN.ID != 0; nat && old.Mode == ModeNAT && a != b {
		if wan := new.WANPort(); wan != nil {
			ch.RestartPort(wan.Name, "nat.wan.vlan.id: tagging the WAN on or off resizes the WAN port's ring of tagged frames")
		}
	}
	// A PPPoE change restarts only the PPPoE client (the router's); a
	// PPPoE WAN on or off also restarts the WAN port, whose frames are
	// all PPPoE on a PPPoE link.
	if a, b := old.NAT.WAN.PPPoE != nil, new.NAT.WAN.PPPoE != nil; nat && old.Mode == ModeNAT && a != b {
		if wan := new.WANPort(); wan != nil {
			ch.RestartPort(wan.Name, "nat.wan.pppoe: a PPPoE WAN on or off restarts the WAN port")
		}
	}
	if nat && old.Mode == ModeNAT && old.IPv6.IsEnabled() != new.IPv6.IsEnabled() {
		ch.restart("ipv6.enabled: the IPv6 router's tables are allocated with the router")
	}
}

// RestartPort adds a port whose workers must restart (the supervisor adds
// ports whose workers the new tuning plan moves to other CPUs); why says
// why, as in Changes.Why.
func (ch *Changes) RestartPort(name, why string, args ...any) {
	ch.raise(RestartPorts)
	ch.Why = append(ch.Why, fmt.Sprintf(why, args...))
	if !slices.Contains(ch.Restart, name) {
		ch.Restart = append(ch.Restart, name)
		slices.Sort(ch.Restart)
	}
}

func (ch *Changes) restart(why string, args ...any) {
	ch.raise(Restart)
	ch.Why = append(ch.Why, fmt.Sprintf(why, args...))
}

func (ch *Changes) raise(e Effect) { ch.Effect = max(ch.Effect, e) }

// enabledNames lists the enabled data ports' names in order.
func enabledNames(c *Config) []string {
	var names []string
	for i := range c.Ports {
		if c.Ports[i].IsEnabled() {
			names = append(names, c.Ports[i].Name)
		}
	}
	return names
}

// sections compares two configs section by section.
func sections(old, new *Config) Changes {
	var ch Changes
	ch.Mode = old.Mode != new.Mode
	ch.FastPath = old.FastPath != new.FastPath
	ch.HostPort = !sameJSON(old.HostPort, new.HostPort)
	ch.Bridge = !sameJSON(old.Bridge, new.Bridge)
	ch.NAT = !sameJSON(old.NAT, new.NAT)
	ch.PPPoE = !sameJSON(old.NAT.WAN.PPPoE, new.NAT.WAN.PPPoE)
	ch.Rules = !sameJSON(old.Rules, new.Rules)
	ch.Tuning = !sameJSON(old.Tuning, new.Tuning)
	ch.Dashboard = !sameJSON(old.Dashboard, new.Dashboard)
	ch.Services = !sameJSON(old.DHCP, new.DHCP) || !sameJSON(old.DNS, new.DNS) || !sameJSON(old.Time, new.Time) ||
		!sameJSON(old.IPv6, new.IPv6)

	ports := map[string]*Port{}
	for i := range old.Ports {
		ports[old.Ports[i].Name] = &old.Ports[i]
	}
	for i := range new.Ports {
		p := &new.Ports[i]
		if o, ok := ports[p.Name]; !ok || !sameJSON(o, p) {
			ch.Ports = append(ch.Ports, p.Name)
		}
		delete(ports, p.Name)
	}
	for name := range ports {
		ch.Ports = append(ch.Ports, name)
	}
	slices.Sort(ch.Ports)
	ch.Ports = slices.Compact(ch.Ports)
	return ch
}

// IsZero reports whether nothing changed.
func (c Changes) IsZero() bool {
	return !c.Mode && len(c.Ports) == 0 && !c.HostPort && !c.Bridge && !c.NAT && !c.Rules && !c.Tuning && !c.Dashboard && !c.Services &&
		!c.FastPath
}

// String lists the changed parts and the effect, e.g. "ports(lan1,wan)
// rules: restart-ports(lan1)", or "none"; an Unchanged effect is not
// shown.
func (c Changes) String() string {
	var parts []string
	add := func(changed bool, name string) {
		if changed {
			parts = append(parts, name)
		}
	}
	add(c.Mode, "mode")
	if len(c.Ports) > 0 {
		parts = append(parts, "ports("+strings.Join(c.Ports, ",")+")")
	}
	add(c.HostPort, "hostPort")
	add(c.Bridge, "bridge")
	add(c.NAT, "nat")
	add(c.Rules, "rules")
	add(c.Tuning, "tuning")
	add(c.Dashboard, "dashboard")
	add(c.Services, "services")
	add(c.FastPath, "fastPath")
	add(c.PPPoE, "pppoe")
	if len(parts) == 0 {
		return "none"
	}
	s := strings.Join(parts, " ")
	switch c.Effect {
	case Unchanged:
		return s
	case RestartPorts:
		return s + ": restart-ports(" + strings.Join(c.Restart, ",") + ")"
	}
	return s + ": " + c.Effect.String()
}

// sameJSON compares two values by their JSON encoding (maps are encoded
// sorted, so this is deterministic). Values that do not marshal differ.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
