package config

import (
	"encoding/base64"
	"testing"
	"time"
)

// TestValidateDashboard checks the dashboard section (dashboard.go).
func TestValidateDashboard(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "dashboard",
			edit: func(c *Config) {
				c.Dashboard.Listen = "8080"
				c.Dashboard.ConfirmTimeout = Duration(time.Second)
			},
			want: map[string]string{
				"dashboard.listen":         `"8080" is not a listen address`,
				"dashboard.confirmTimeout": "1s out of range 5s..1h0m0s",
			},
		},
		{
			name: "dashboard host and port",
			edit: func(c *Config) { c.Dashboard.Listen = "example.com:99999" },
			want: map[string]string{"dashboard.listen": `port "99999": want a number 1..65535`},
		},
		{
			name: "update key not a key",
			edit: func(c *Config) { c.Dashboard.UpdateKey = "AAAA" },
			want: map[string]string{"dashboard.updateKey": "not an ed25519 public key"},
		},
		{
			name: "update key not base64",
			edit: func(c *Config) { c.Dashboard.UpdateKey = "not base64!" },
			want: map[string]string{"dashboard.updateKey": "not an ed25519 public key"},
		},
		{
			name: "internet probe IPv6",
			edit: func(c *Config) { c.Dashboard.InternetProbe = "2001:db8::1" },
			want: map[string]string{"dashboard.internetProbe": "the probe pings IPv4"},
		},
		{
			name: "internet probe not a name",
			edit: func(c *Config) { c.Dashboard.InternetProbe = "no such host!" },
			want: map[string]string{"dashboard.internetProbe": "neither an IPv4 address nor a host name"},
		},
	})
}

func TestUpdateKey(t *testing.T) {
	key := make([]byte, 32)
	key[0] = 7
	d := Dashboard{UpdateKey: base64.StdEncoding.EncodeToString(key)}
	if got := d.UpdatePublicKey(); len(got) != 32 || got[0] != 7 {
		t.Errorf("UpdatePublicKey = %v", got)
	}
	if (&Dashboard{}).UpdatePublicKey() != nil {
		t.Error("no key configured, but a key")
	}
}
