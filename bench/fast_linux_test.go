package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIPv6StateCheck reads /api/dataplane's ipv6 section as the IPv6
// rows do and refuses a router that is not routing the bench's setup.
func TestIPv6StateCheck(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       string // "" for no error, else a part of it
	}{
		{"routed", `{"ipv6": {"lan": ["2001:db8:60::/64"], "gateway": "fe80::e1:b0ff:fe00:4", "conns": 8192}}`, ""},
		{"nearly every flow", `{"ipv6": {"lan": ["2001:db8:60::/64"], "gateway": "fe80::e1:b0ff:fe00:4", "conns": 8111}}`, ""},
		{"no IPv6", `{"fastPath": {}}`, "routes no IPv6"},
		{"no prefix", `{"ipv6": {"lan": [], "gateway": "fe80::e1:b0ff:fe00:4", "conns": 8192}}`, "LAN prefixes are []"},
		{"learnt gateway", `{"ipv6": {"lan": ["2001:db8:60::/64"], "gateway": "fe80::1", "conns": 8192}}`, `next hop is "fe80::1"`},
		{"flows missing", `{"ipv6": {"lan": ["2001:db8:60::/64"], "gateway": "fe80::e1:b0ff:fe00:4", "conns": 100, "drops": {"firewall": 3}}}`,
			"tracks 100 connections, want 8192 (drops map[firewall:3])"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st ipv6State
			if err := json.Unmarshal([]byte(tc.json), &st); err != nil {
				t.Fatal(err)
			}
			err := st.check(8192)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("check: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
