package config

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Changes says which parts of the config differ between two versions, so
// that the supervisor applies only what changed.
type Changes struct {
	// Mode is set when the mode changed (everything must be rebuilt).
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
}

// Diff compares two configs section by section (by their JSON form). A
// nil old config counts as all changed.
func Diff(old, new *Config) Changes {
	if old == nil {
		old = &Config{}
	}
	var ch Changes
	ch.Mode = old.Mode != new.Mode
	ch.HostPort = !sameJSON(old.HostPort, new.HostPort)
	ch.Bridge = !sameJSON(old.Bridge, new.Bridge)
	ch.NAT = !sameJSON(old.NAT, new.NAT)
	ch.Rules = !sameJSON(old.Rules, new.Rules)
	ch.Tuning = !sameJSON(old.Tuning, new.Tuning)
	ch.Dashboard = !sameJSON(old.Dashboard, new.Dashboard)

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
	return !c.Mode && len(c.Ports) == 0 && !c.HostPort && !c.Bridge && !c.NAT && !c.Rules && !c.Tuning && !c.Dashboard
}

// String lists the changed parts, e.g. "ports(lan1,wan) rules", or "none".
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
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// sameJSON compares two values by their JSON encoding (maps are encoded
// sorted, so this is deterministic). Values that do not marshal differ.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
