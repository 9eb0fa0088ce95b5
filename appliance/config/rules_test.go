package config

import (
	"testing"

	"e1kbox/rules"
)

// TestValidateRules maps the rules package's errors to their paths (rules.go).
func TestValidateRules(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "rules errors",
			edit: func(c *Config) {
				c.Rules.Rules[0].DstPort = &rules.PortRange{Lo: 2000, Hi: 1000}
				c.Rules.Rules[2].InPort = "eth7"
				c.Rules.Policy[rules.Forward] = rules.Reject
			},
			want: map[string]string{
				"rules.rules[0].dport": "reversed",
				"rules.policy.forward": "a policy is accept or drop",
			},
		},
		{
			name: "rules name unknown ports",
			edit: func(c *Config) { c.Rules.Rules[2].InPort = "eth7" },
			want: map[string]string{"rules.rules[2].iif": `unknown port "eth7"`},
		},
	})
}
