package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidateTuning maps the tuning package's errors to their paths (tuning.go).
func TestValidateTuning(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "tuning errors",
			edit: func(c *Config) {
				c.Tuning.Ports[0].RxRing = 5
				c.Tuning.Ports = append(c.Tuning.Ports, c.Tuning.Ports[0])
				c.Tuning.Ports[1].Name = "eth9"
				c.Tuning.Placement = "random"
			},
			want: map[string]string{
				"tuning.placement":       `"random" is not one of`,
				"tuning.ports[0].rxRing": "5 out of range 64..4096",
				"tuning.ports[1].rxRing": "5 out of range 64..4096",
				"tuning.ports[1].name":   `unknown interface "eth9"`,
			},
		},
	})
}

func TestTuningPlan(t *testing.T) {
	c := example(t)
	p := c.TuningPlan()
	var names []string
	for _, pp := range p.Ports {
		if !pp.Data {
			t.Errorf("tuning port %s is not a data port", pp.Name)
		}
		names = append(names, pp.Name)
	}
	// eth1 is listed in tuning; eth2 is added; eth3 is disabled.
	if diff := cmp.Diff([]string{"eth1", "eth2"}, names); diff != "" {
		t.Errorf("TuningPlan ports (-want +got):\n%s", diff)
	}
	if p.Ports[1].Offloads["rx-gro"] {
		t.Error("added data port keeps GRO on")
	}
	if len(c.Tuning.Ports) != 1 {
		t.Errorf("TuningPlan modified the config: %d tuning ports", len(c.Tuning.Ports))
	}
}
