package ota

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"e1kbox/firmware/boxupdate"
)

// fakeBox serves gokrazy's status JSON, the appliance's /healthz and the
// dashboard's update API, and plays a test boot: down for a while, then on
// the new build (committed) or the old one (reverted), or never back.
type fakeBox struct {
	mu        sync.Mutex
	running   string
	next      string
	keep      bool // the test boot is kept
	hang      bool // the box never answers after the upload
	forget    bool // the box comes back without any record of the update (its /perm lost)
	refuse    int  // answer the upload with this status
	downUntil time.Time
	pending   *boxupdate.Record
	last      *boxupdate.Record
	upload    []byte
	sig       string
}

func (f *fakeBox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang && f.pending != nil || time.Now().Before(f.downUntil) {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	if f.pending != nil && f.forget { // back from the test boot, its record gone
		f.pending = nil
	}
	if f.pending != nil { // back from the test boot
		p := f.pending
		f.pending = nil
		p.Outcome = boxupdate.Reverted
		p.Reason = "the new build was not healthy within 2m0s"
		if f.keep {
			p.Outcome, p.Reason, f.running = boxupdate.Committed, "", f.next
		}
		p.Steps = []boxupdate.Step{{Name: "test boot to healthy", Seconds: 12}}
		f.last = p
	}
	if u, p, ok := r.BasicAuth(); r.URL.Path != "/healthz" && (!ok || u != "gokrazy" || p != "pw") {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch {
	case r.URL.Path == "/":
		json.NewEncoder(w).Encode(map[string]string{"BuildTimestamp": f.running, "SBOMHash": "sbom-" + f.running})
	case r.URL.Path == "/healthz":
		json.NewEncoder(w).Encode(map[string]string{"status": "ok", "build": f.running, "sbom_hash": "sbom-" + f.running})
	case r.URL.Path == "/api/system/update" && r.Method == http.MethodPost:
		if r.Header.Get("X-E1kbox-CSRF") == "" {
			http.Error(w, `{"error":"csrf"}`, http.StatusForbidden)
			return
		}
		f.upload, _ = io.ReadAll(r.Body)
		f.sig = r.Header.Get("X-E1kbox-Signature")
		if f.refuse != 0 {
			w.WriteHeader(f.refuse)
			w.Write([]byte(`{"error":"the update is not signed"}`))
			return
		}
		f.pending = &boxupdate.Record{ID: "u1", Outcome: boxupdate.Testing, BootWritten: true}
		f.downUntil = time.Now().Add(1500 * time.Millisecond)
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(f.pending)
	case r.URL.Path == "/api/system/update":
		json.NewEncoder(w).Encode(boxupdate.Status{Pending: f.pending, Last: f.last})
	default:
		http.NotFound(w, r)
	}
}

func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	g, sig := filepath.Join(dir, "e1kbox.gaf"), filepath.Join(dir, "e1kbox.gaf.sig")
	os.WriteFile(g, []byte("PK archive"), 0o644)
	os.WriteFile(sig, []byte("c2ln\n"), 0o644)
	for _, tc := range []struct {
		name    string
		box     *fakeBox
		want    error
		outcome string
	}{
		{"kept", &fakeBox{keep: true}, nil, "committed"},
		{"reverted", &fakeBox{}, ErrReverted, "reverted"},
		{"refused", &fakeBox{refuse: http.StatusForbidden}, ErrRefused, "refused"},
		{"hangs", &fakeBox{hang: true}, ErrNoAnswer, "no answer"},
		{"forgets", &fakeBox{forget: true}, ErrLost, "lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box := tc.box
			box.running, box.next = "old", "new"
			srv := httptest.NewServer(box)
			defer srv.Close()
			base := strings.Replace(srv.URL, "http://", "http://gokrazy:pw@", 1) + "/"
			rep, err := Update(context.Background(), Options{BaseURL: base, DashboardURL: srv.URL, GAF: g, Signature: sig,
				BuildTimestamp: "new", BootTimeout: 3 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Fatalf("Update: %v, want %v\n%s", err, tc.want, rep)
			}
			if rep.Outcome != tc.outcome || string(box.upload) != "PK archive" || box.sig != "c2ln" {
				t.Errorf("outcome %q (want %q), box got %q signed %q\n%s", rep.Outcome, tc.outcome, box.upload, box.sig, rep)
			}
			if tc.outcome == "committed" && (len(rep.BoxSteps) != 1 || !rep.BootWritten || !strings.Contains(rep.String(), "box: test boot to healthy")) {
				t.Errorf("report lacks the box's steps:\n%s", rep)
			}
		})
	}
}

func TestUpdateRefusesUnhealthyBox(t *testing.T) {
	box := &fakeBox{running: "old"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			json.NewEncoder(w).Encode(map[string]string{"status": "ok", "build": "dev"})
			return
		}
		box.ServeHTTP(w, r)
	}))
	defer srv.Close()
	base := strings.Replace(srv.URL, "http://", "http://gokrazy:pw@", 1) + "/"
	_, err := Update(context.Background(), Options{BaseURL: base, DashboardURL: srv.URL, GAF: "x", BuildTimestamp: "new",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), `appliance reports build "dev", gokrazy "old"`) {
		t.Errorf("Update of a box whose appliance does not know its build: %v", err)
	}
	if box.upload != nil {
		t.Error("uploaded to an unhealthy box")
	}
}
