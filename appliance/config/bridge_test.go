package config

import (
	"testing"
	"time"

	"e1kbox/rules"
)

// TestValidateBridge checks the bridge section (bridge.go).
func TestValidateBridge(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "static FDB entries",
			edit: func(c *Config) {
				c.Bridge.Static = append(c.Bridge.Static,
					StaticFDB{MAC: rules.MAC{0x01, 0, 0x5e, 0, 0, 1}, Port: "nope", VLAN: 4095},
					StaticFDB{Port: "host"},
					c.Bridge.Static[0])
			},
			want: map[string]string{
				"bridge.static[1].mac":  "multicast",
				"bridge.static[1].port": `unknown port "nope" (ports: host, lan1, lan2, wan)`,
				"bridge.static[1].vlan": "VLAN 4095 out of range",
				"bridge.static[2].mac":  "missing",
				"bridge.static[3]":      "duplicate entry for 02:00:5e:10:00:01 (VLAN 10), already at bridge.static[0]",
			},
		},
		{
			name: "bridge limits",
			edit: func(c *Config) {
				c.Bridge.FDBAging = Duration(500 * time.Millisecond)
				c.Bridge.FDBSize = 8
				c.Bridge.FDBFull = "oldest"
			},
			want: map[string]string{
				"bridge.fdbAging": "500ms out of range 1s..",
				"bridge.fdbSize":  "8 out of range 16..4194304",
				"bridge.fdbFull":  `unknown policy "oldest"; want "evict" or "refuse"`,
			},
		},
	})
}
