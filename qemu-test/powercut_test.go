package qemutest

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"e1kbox/firmware/vm"
)

// TestPowerCut pulls the power (kills QEMU) while a config save is in
// flight, a few times; after each boot the config is the old or the new
// one, never broken, and the box is healthy (its dataplane forwarding).
func TestPowerCut(t *testing.T) {
	requireQEMU(t)
	bs := theBuilds(t)
	disk := copyImage(t, bs.good.Image)
	aging := func(b *box) string {
		var cur struct {
			Config struct {
				Bridge struct {
					FDBAging string `json:"fdbAging"`
				} `json:"bridge"`
			} `json:"config"`
		}
		if err := b.api(http.MethodGet, "/api/config", nil, &cur); err != nil {
			t.Fatalf("reading the config: %v", err)
		}
		return cur.Config.Bridge.FDBAging
	}
	b := boot(t, bs.good, vm.Options{Image: disk})
	for i := 0; i < 3; i++ {
		old := aging(b)
		want := (time.Duration(100+i) * time.Second).String()
		var cur map[string]any
		if err := b.api(http.MethodGet, "/api/config", nil, &cur); err != nil {
			t.Fatal(err)
		}
		cfg := cur["config"].(map[string]any)
		cfg["bridge"].(map[string]any)["fdbAging"] = want
		body, _ := json.Marshal(cfg)
		applied := joined(t, func() error { return b.api(http.MethodPost, "/api/config/apply?confirm_timeout=300", body, nil) })
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		b.Kill() // power cut
		t.Logf("cut %d: the save in flight answered %v", i+1, applied())
		b = boot(t, bs.good, vm.Options{Image: disk})
		got := aging(b)
		if got != old && got != want {
			t.Fatalf("cut %d: after the reboot fdbAging is %q, want the old %q or the new %q", i+1, got, old, want)
		}
		t.Logf("cut %d: config after reboot is the %s one (fdbAging %s)", i+1, map[bool]string{true: "old", false: "new"}[got == old], got)
	}
}
