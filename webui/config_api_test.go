package webui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestInvalidConfig(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		cfg  string
		want []FieldError
	}{
		{
			name: "bad fields",
			cfg:  `{"mode": "router", "ports": [{"name": "a", "interface": "eth1"}, {"name": "b", "interface": ""}]}`,
			want: []FieldError{
				{Path: "mode", Message: `must be bridge or nat, not "router"`},
				{Path: "ports[1].interface", Message: "required"},
			},
		},
		{
			name: "syntax",
			cfg:  `{"mode": "nat",`,
			want: []FieldError{{Path: "", Message: "invalid JSON at byte 15: unexpected end of JSON input"}},
		},
		{
			name: "not an object",
			cfg:  `["nat"]`,
			want: []FieldError{{Path: "", Message: "the config must be a JSON object"}},
		},
	}
	for _, tt := range tests {
		for _, path := range []string{"/api/config/validate", "/api/config/apply"} {
			t.Run(tt.name+path, func(t *testing.T) {
				_, before := f.store.Current()
				var got errorBody
				f.on(t).doJSON("POST", path, []byte(tt.cfg), http.StatusBadRequest, &got)
				if diff := cmp.Diff(tt.want, got.Errors); diff != "" {
					t.Errorf("field errors (-want +got):\n%s", diff)
				}
				if cfg, after := f.store.Current(); after != before || !bytes.Equal(cfg, []byte(factoryConfig)) {
					t.Errorf("running config changed: %v -> %v", before, after)
				}
			})
		}
	}
	var ok map[string]any
	f.doJSON("POST", "/api/config/validate", []byte(factoryConfig), http.StatusOK, &ok)
	if ok["valid"] != true {
		t.Errorf("valid config: %v", ok)
	}
}

func TestApplyConfirmRollback(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.ConfirmTimeout = time.Hour })
	bridge := strings.Replace(factoryConfig, `"mode": "nat"`, `"mode": "bridge"`, 1)
	if bridge == factoryConfig {
		t.Fatal("test config edit did nothing")
	}
	mode := func() string {
		var c ConfigAnswer
		f.doJSON("GET", "/api/config", nil, http.StatusOK, &c)
		var m struct{ Mode string }
		json.Unmarshal(c.Config, &m)
		return m.Mode
	}
	state := func(id PendingID) ApplyState {
		var a ChangeAnswer
		f.doJSON("GET", "/api/config/changes/"+string(id), nil, http.StatusOK, &a)
		return a.State
	}

	// Apply and confirm.
	var a ApplyAnswer
	f.doJSON("POST", "/api/config/apply", []byte(bridge), http.StatusAccepted, &a)
	if a.Pending == nil || a.Pending.ID == "" {
		t.Fatalf("apply answer without pending change: %+v", a)
	}
	if left := time.Until(a.Pending.Deadline); left < 59*time.Minute {
		t.Errorf("deadline in %v, want the default timeout (1h)", left)
	}
	if got := mode(); got != "bridge" {
		t.Errorf("mode after apply %q, want bridge (the change takes effect at once)", got)
	}
	var p map[string]*PendingInfo
	f.doJSON("GET", "/api/config/pending", nil, http.StatusOK, &p)
	if p["pending"] == nil || p["pending"].ID != a.Pending.ID {
		t.Errorf("pending %+v, want %s", p["pending"], a.Pending.ID)
	}
	// A second apply while one is pending is refused.
	f.doJSON("POST", "/api/config/apply", []byte(factoryConfig), http.StatusConflict, nil)
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusOK, nil)
	if got := state(a.Pending.ID); got != ApplyConfirmed {
		t.Errorf("state after confirm %q", got)
	}
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusNotFound, nil)

	// Apply without confirming: the store rolls back by itself.
	f.doJSON("POST", "/api/config/apply?confirm_timeout=1", []byte(factoryConfig), http.StatusAccepted, &a)
	if got := mode(); got != "nat" {
		t.Errorf("mode after second apply %q, want nat", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for state(a.Pending.ID) == ApplyPending && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := state(a.Pending.ID); got != ApplyRolledBack {
		t.Fatalf("state after the timeout %q, want rolled_back", got)
	}
	if got := mode(); got != "bridge" {
		t.Errorf("mode after rollback %q, want bridge again", got)
	}
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusNotFound, nil)

	// Roll back on request.
	f.doJSON("POST", "/api/config/apply", []byte(factoryConfig), http.StatusAccepted, &a)
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/rollback", nil, http.StatusOK, nil)
	if got := mode(); got != "bridge" {
		t.Errorf("mode after requested rollback %q, want bridge", got)
	}

	// Bad timeouts.
	for _, q := range []string{"0", "-1", "x", "3601"} {
		f.doJSON("POST", "/api/config/apply?confirm_timeout="+q, []byte(factoryConfig), http.StatusBadRequest, nil)
	}

	// History, versions, backup and restore.
	var h struct {
		Current  string
		Versions []Version
	}
	f.doJSON("GET", "/api/config/history", nil, http.StatusOK, &h)
	if len(h.Versions) != 4 || h.Current != "v2" {
		t.Errorf("history: current %s, %d versions %+v; want v2 of 4", h.Current, len(h.Versions), h.Versions)
	}
	res := f.req("GET", "/api/config/backup", nil)
	backup := readAll(t, res)
	if cd := res.Header.Get("Content-Disposition"); !strings.Contains(cd, `filename="e1kbox-config-v2.json"`) {
		t.Errorf("backup Content-Disposition %q", cd)
	}
	var cfg map[string]any
	if err := json.Unmarshal(backup, &cfg); err != nil || cfg["mode"] != "bridge" {
		t.Errorf("backup %s: %v", backup, err)
	}
	var v1 map[string]any
	f.doJSON("GET", "/api/config/history/v1", nil, http.StatusOK, &v1)
	if v1["mode"] != "nat" {
		t.Errorf("version v1: %v", v1)
	}
	f.doJSON("GET", "/api/config/history/v99", nil, http.StatusNotFound, nil)
	f.doJSON("POST", "/api/config/restore", []byte(factoryConfig), http.StatusAccepted, &a)
	if got := mode(); got != "nat" {
		t.Errorf("mode after restore %q, want nat", got)
	}
}
