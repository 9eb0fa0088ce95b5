package router

import (
	"log/slog"
	"testing"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/wanclient"
)

// TestBridgeMode: in bridge mode only the NTP client runs; Live follows
// Apply and Close, and nothing is reported to the dataplane.
func TestBridgeMode(t *testing.T) {
	// An NTP server that never answers: the test must not set the clock.
	cfg, err := config.Parse([]byte(`{"version": 2, "mode": "bridge", "time": {"servers": ["127.0.0.1"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	reported := 0
	r := New(Options{Log: slog.New(slog.DiscardHandler), State: t.TempDir(), Hostname: "box",
		OnLease: func(*wanclient.Lease) { reported++ }})
	t.Cleanup(r.Close)
	if l := r.Live(); l != nil {
		t.Errorf("before Apply: %+v, want nothing", l)
	}
	if err := r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	l := r.Live()
	if l == nil || l.Config != cfg || l.NTP == nil || l.WAN != nil || l.DHCP != nil || l.DNS != nil || l.Probe != nil || l.DHCP6 != nil || l.RA != nil {
		t.Errorf("after Apply: %+v, want the config and the NTP client only", l)
	}
	r.Close()
	if l := r.Live(); l == nil || l.NTP != nil {
		t.Errorf("after Close: %+v, want nothing running", l)
	}
	r.Close() // a second Close is nothing
	if reported != 0 {
		t.Errorf("%d leases reported in bridge mode", reported)
	}
}
