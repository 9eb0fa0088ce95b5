package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/rules"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want Changes
	}{
		{"nothing", func(c *Config) {}, Changes{}},
		{"port mtu", func(c *Config) { c.Ports[1].MTU = 9000 }, Changes{Ports: []string{"lan1"}}},
		{"port removed and added", func(c *Config) { c.Ports[2].Name = "lan3" }, Changes{Ports: []string{"lan2", "lan3"}}},
		{"port order only", func(c *Config) { c.Ports[0], c.Ports[1] = c.Ports[1], c.Ports[0] }, Changes{}},
		{"rules", func(c *Config) { c.Rules.Rules[0].Comment = "x" }, Changes{Rules: true}},
		{"policy", func(c *Config) { c.Rules.Policy[rules.Forward] = rules.Drop }, Changes{Rules: true}},
		{"nat", func(c *Config) { c.NAT.Forwards = c.NAT.Forwards[:1] }, Changes{NAT: true}},
		{"tuning", func(c *Config) { c.Tuning.Ports[0].RxRing = 2048 }, Changes{Tuning: true}},
		{"bridge", func(c *Config) { c.Bridge.FDBSize = 100 }, Changes{Bridge: true}},
		{"dashboard", func(c *Config) { c.Dashboard.Listen = ":9090" }, Changes{Dashboard: true}},
		{"host port", func(c *Config) { c.HostPort = nil }, Changes{HostPort: true}},
		{"mode", func(c *Config) { c.Mode = ModeBridge }, Changes{Mode: true}},
		{"several", func(c *Config) {
			c.Ports[0].Enabled = ptr(false)
			c.Tuning.Placement = "same"
			c.NAT.MSSClamp = ptr(false)
		},
			Changes{Ports: []string{"wan"}, NAT: true, Tuning: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, new := example(t), example(t)
			tt.edit(new)
			got := Diff(old, new)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if got.IsZero() != (tt.name == "nothing" || tt.name == "port order only") {
				t.Errorf("IsZero() = %v for %s", got.IsZero(), got)
			}
		})
	}
	all := Diff(nil, example(t))
	if !all.Mode || !all.Rules || len(all.Ports) != 3 {
		t.Errorf("Diff(nil, c) = %s, want everything", all)
	}
	if s := (Changes{Ports: []string{"a", "b"}, Rules: true}).String(); s != "ports(a,b) rules" {
		t.Errorf("String() = %q", s)
	}
}
