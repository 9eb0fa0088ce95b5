package ota

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
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

	"github.com/google/go-cmp/cmp"
)

// fakeBox speaks the part of gokrazy's update protocol that Update uses,
// plus the appliance's /healthz, and reboots according to its scenario.
type fakeBox struct {
	mu       sync.Mutex
	running  string // build timestamp gokrazy reports
	old, new string
	healthy  func(build string) bool
	// testbootStarts says whether a reboot after /update/testboot runs the
	// new build (false: the test boot never starts).
	testbootStarts bool
	// revertAfter is how many status polls the test-booted build answers
	// before the box reverts by itself (0: it never reverts).
	revertAfter int
	// downFor is how long the box answers nothing after the test-boot
	// reboot (a slow boot); negative: it never answers again (a hang).
	downFor   time.Duration
	downUntil time.Time
	hung      bool

	testboot, switched bool
	polls              int
	uploads            []string
	reboots            []string // "kexec" or "firmware"
}

func (f *fakeBox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hung || time.Now().Before(f.downUntil) {
		http.Error(w, "no route to host", http.StatusBadGateway)
		return
	}
	switch {
	case r.URL.Path == "/healthz":
		status := "degraded"
		if f.healthy(f.running) {
			status = "ok"
		}
		json.NewEncoder(w).Encode(map[string]string{"status": status, "build": f.running})
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		if f.running == f.new && f.testboot && !f.switched && f.revertAfter > 0 {
			if f.polls++; f.polls > f.revertAfter {
				f.running = f.old // the init's test-boot guard
			}
		}
		json.NewEncoder(w).Encode(map[string]string{"BuildTimestamp": f.running})
	case r.URL.Path == "/update/features":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"features":"partuuid,updatehash,gpt,"}`)
	case strings.HasPrefix(r.URL.Path, "/update/") && r.Method == http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		f.uploads = append(f.uploads, strings.TrimPrefix(r.URL.Path, "/update/"))
		sum := crc32.NewIEEE()
		sum.Write(b)
		io.WriteString(w, hex.EncodeToString(sum.Sum(nil)))
	case r.URL.Path == "/update/testboot":
		f.testboot = true
	case r.URL.Path == "/update/switch":
		f.switched = true
	case r.URL.Path == "/reboot":
		how := "kexec"
		if r.FormValue("kexec") == "off" {
			how = "firmware"
		}
		f.reboots = append(f.reboots, how)
		switch {
		case f.switched:
			f.running = f.new
		case f.testboot && f.testbootStarts:
			f.running = f.new
			if f.downFor < 0 {
				f.hung = true
			}
			f.downUntil = time.Now().Add(f.downFor)
		}
	default:
		http.NotFound(w, r)
	}
}

func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	var pieces []string
	for _, name := range []string{"boot.img", "root.squashfs", "mbr.img"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("contents of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p)
	}
	healthyAll := func(string) bool { return true }
	for _, tc := range []struct {
		name        string
		box         *fakeBox
		noKexec     bool
		wantOutcome string
		wantErr     error
		wantErrText string // a part of the error's text
		wantReboots []string
		wantRunning string
		bootTimeout time.Duration // default 10 s
	}{
		{
			name:        "good build is committed",
			box:         &fakeBox{healthy: healthyAll, testbootStarts: true},
			wantOutcome: "committed", wantReboots: []string{"kexec", "kexec"}, wantRunning: "new",
		},
		{
			name:        "through the firmware",
			box:         &fakeBox{healthy: healthyAll, testbootStarts: true},
			noKexec:     true,
			wantOutcome: "committed", wantReboots: []string{"firmware", "firmware"}, wantRunning: "new",
		},
		{
			name:        "unhealthy build reverts by itself",
			box:         &fakeBox{healthy: func(b string) bool { return b == "old" }, testbootStarts: true, revertAfter: 3},
			wantOutcome: "rolled back", wantErr: ErrRolledBack, wantErrText: "appliance health: status \"degraded\"",
			wantReboots: []string{"kexec"}, wantRunning: "old",
		},
		{
			name:        "a test boot slower than the health timeout is still committed",
			box:         &fakeBox{healthy: healthyAll, testbootStarts: true, downFor: 3 * time.Second},
			wantOutcome: "committed", wantReboots: []string{"kexec", "kexec"}, wantRunning: "new",
		},
		{
			name:        "a box that hangs in the test boot is reported, not waited for twice",
			box:         &fakeBox{healthy: healthyAll, testbootStarts: true, downFor: -1},
			bootTimeout: 3 * time.Second,
			wantOutcome: "no answer", wantErr: ErrNoAnswer, wantErrText: "power-cycle it",
			wantReboots: []string{"kexec"}, wantRunning: "new",
		},
		{
			name:        "test boot that never starts is named",
			box:         &fakeBox{healthy: healthyAll, testbootStarts: false},
			wantOutcome: "rolled back", wantErr: ErrRolledBack, wantErrText: "the box never ran the new build",
			wantReboots: []string{"kexec"}, wantRunning: "old",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box := tc.box
			box.old, box.new, box.running = "old", "new", "old"
			srv := httptest.NewServer(box)
			defer srv.Close()
			host := strings.TrimPrefix(srv.URL, "http://")
			if tc.bootTimeout == 0 {
				tc.bootTimeout = 10 * time.Second
			}
			start := time.Now()
			rep, err := Update(context.Background(), Options{
				BaseURL: "http://gokrazy:pw@" + host + "/", HealthURL: srv.URL + "/healthz",
				Boot: pieces[0], Root: pieces[1], MBR: pieces[2], BuildTimestamp: "new",
				HealthTimeout: 2 * time.Second, BootTimeout: tc.bootTimeout, NoKexec: tc.noKexec,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			took := time.Since(start)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("Update: %v", err)
			}
			if errors.Is(err, ErrNoAnswer) && took > 2*tc.bootTimeout {
				t.Errorf("a silent box was waited for %v, want one boot timeout (%v)", took, tc.bootTimeout)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Update: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErrText != "" && !strings.Contains(err.Error(), tc.wantErrText) {
				t.Errorf("Update: err = %v, want it to say %q", err, tc.wantErrText)
			}
			if rep.Outcome != tc.wantOutcome || rep.OldBuild != "old" || rep.NewBuild != "new" {
				t.Errorf("report = %+v, want outcome %q from old to new", rep, tc.wantOutcome)
			}
			box.mu.Lock()
			defer box.mu.Unlock()
			if diff := cmp.Diff([]string{"root", "bootonly", "mbr"}, box.uploads); diff != "" {
				t.Errorf("uploads (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReboots, box.reboots); diff != "" {
				t.Errorf("reboots (-want +got):\n%s", diff)
			}
			if box.running != tc.wantRunning {
				t.Errorf("box runs %q, want %q", box.running, tc.wantRunning)
			}
			if box.switched != (tc.wantOutcome == "committed") {
				t.Errorf("switched = %v, want it only for a committed update", box.switched)
			}
		})
	}
}
