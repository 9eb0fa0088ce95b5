package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/rules"
	"e1kbox/tuning"
)

func TestDataplaneConfig(t *testing.T) {
	parse := func(t *testing.T, s string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte(s))
		if err != nil {
			t.Fatalf("config.Parse: %v", err)
		}
		return c
	}
	cpu := tuning.CPUPlan{Placement: tuning.PlacementSplit, CPUs: tuning.CPUSet{0, 1}, Ports: []tuning.PortCPU{{Port: "eth1", IRQCPU: 0, WorkerCPU: 1}}}
	t.Run("bridge", func(t *testing.T) {
		c := parse(t, `{"version": 2, "mode": "bridge",
			"ports": [{"name": "lan", "interface": "eth1", "mtu": 9000}, {"name": "off", "interface": "eth2", "enabled": false},
			          {"name": "dmz", "interface": "eth3"}],
			"hostPort": {"addresses": ["192.168.1.2/24"]},
			"bridge": {"fdbAging": "10s", "fdbSize": 1024, "static": [{"mac": "02:00:00:00:00:01", "port": "dmz", "vlan": 7}]},
			"rules": {"policy": {"forward": "drop"}, "rules": [{"l4proto": "tcp", "dport": "22", "action": "accept"}]}}`)
		got, err := dataplaneConfig(c, cpu)
		if err != nil {
			t.Fatal(err)
		}
		want := &dataplane.Config{
			Mode:     dataplane.ModeBridge,
			Ports:    []dataplane.Port{{Name: "lan", Interface: "eth1", MTU: 9000}, {Name: "dmz", Interface: "eth3", MTU: 1500}},
			HostPort: &dataplane.HostPort{Name: "host", Interface: "e1khost0", Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.2/24")}},
			Bridge: dataplane.Bridge{AgingTime: dataplane.Duration(10 * time.Second), FDBSize: 1024,
				Static: []dataplane.StaticEntry{{MAC: [6]byte{2, 0, 0, 0, 0, 1}, VLAN: 7, Port: "dmz"}}},
			Rules: &c.Rules,
			CPU:   cpu,
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
			cmp.Comparer(func(a, b *rules.Ruleset) bool { return rules.Format(a) == rules.Format(b) })); diff != "" {
			t.Errorf("dataplaneConfig (-want +got):\n%s", diff)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("translated config does not validate: %v", err)
		}
	})
	for _, tt := range []struct{ name, cfg, err string }{
		{"nat mode", `{"version": 2, "mode": "nat", "ports": [{"name": "wan", "interface": "eth1", "role": "wan"}]}`, `mode "nat"`},
		{"vlan filtering", `{"version": 2, "ports": [{"name": "lan", "interface": "eth1", "vlans": {"native": 1}}]}`, "ports[0].vlans"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dataplaneConfig(parse(t, tt.cfg), cpu)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("dataplaneConfig = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}
