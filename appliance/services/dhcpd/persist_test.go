package dhcpd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPersistRestart saves a table with every kind of entry, starts a
// second server from the file and checks it knows what the first knew.
func TestPersistRestart(t *testing.T) {
	cfg := testConfig()
	cfg.LeaseFile = filepath.Join(t.TempDir(), "leases.json")
	s1, clk := newTestServer(t, cfg)
	aIP := dora(t, s1, macA, clientID(1, 0xaa), hostname("laptop"))
	bIP := dora(t, s1, macB)
	s1.Handle(release(t, macB, bIP.String()))
	cIP := dora(t, s1, macC, hostname("tv"))
	if err := s1.MakeStatic(hw(macC)); err != nil {
		t.Fatal(err)
	}
	dIP := dora(t, s1, macD)
	s1.Handle(decline(t, macD, dIP.String()))
	s1.Handle(discover(t, "02:00:00:00:00:0e")) // an offer: not saved
	if err := s1.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s1.flush(); err != nil { // unchanged: not written again
		t.Fatal(err)
	}
	if got := s1.Stats().LeaseFileWrites; got != 1 {
		t.Errorf("%d writes, want 1", got)
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(cfg.LeaseFile), ".*tmp*")); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
	raw, err := os.ReadFile(cfg.LeaseFile)
	if err != nil {
		t.Fatal(err)
	}
	var f leaseFile
	if err := json.Unmarshal(raw, &f); err != nil || f.Version != 1 || len(f.Leases) != 3 || len(f.Pinned) != 1 || len(f.Declined) != 1 {
		t.Errorf("lease file: %v, version %d, %d leases, %d pinned, %d declined:\n%s", err, f.Version, len(f.Leases), len(f.Pinned), len(f.Declined), raw)
	}

	clk.Add(QuarantineTime / 2)
	s2, err := newServer(cfg, testLog(t), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		macA + " 10.70.0.2 bound laptop", macB + " 10.70.0.3 released", macC + " 10.70.0.4 bound static tv",
	}
	if diff := cmp.Diff(want, leaseLines(s2)); diff != "" {
		t.Errorf("Leases after the restart (-want +got):\n%s", diff)
	}
	l1, l2 := s1.Leases(), s2.Leases()
	if !l1[0].Expiry.Equal(l2[0].Expiry) || !l1[0].LastSeen.Equal(l2[0].LastSeen) || l2[0].ClientID != "01aa" {
		t.Errorf("A's lease changed: %+v, then %+v", l1[0], l2[0])
	}
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"A renews its address", summary(s2.Handle(renew(t, macA, aIP.String(), clientID(1, 0xaa)))), "ACK " + aIP.String()},
		{"another client cannot take A's address", summary(s2.Handle(initReboot(t, "02:00:00:00:00:0f", aIP.String()))), "NAK"},
		{"C keeps its pinned address", summary(s2.Handle(discover(t, macC))), "OFFER " + cIP.String()},
		{"the declined address stays quarantined", summary(s2.Handle(initReboot(t, "02:00:00:00:00:10", dIP.String()))), "NAK"},
		{"B is offered its address again", summary(s2.Handle(discover(t, macB))), "OFFER " + bIP.String()},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if got, _ := s2.Lookup("laptop"); got != aIP {
		t.Errorf("laptop is %v after the restart, want %v", got, aIP)
	}
	checkInvariants(t, s2)
}

// TestPersistBadFiles loads broken lease files: the server starts with
// what makes sense in them and logs the rest.
func TestPersistBadFiles(t *testing.T) {
	good := `{"mac":"02:00:00:00:00:0a","ip":"10.70.0.9","state":"bound","expiry":"2026-07-01T18:00:00Z","last_seen":"2026-07-01T11:00:00Z"}`
	for _, tc := range []struct {
		name    string
		content string
		want    []string
		wantLog string
	}{
		{"garbage", "\x00\x01 not json", nil, "ignoring the lease file"},
		{"truncated", `{"version":1,"leases":[` + good, nil, "ignoring the lease file"},
		{"wrong version", `{"version":7,"leases":[` + good + `]}`, nil, "version 7"},
		{"wrong types", `{"version":1,"leases":{"a":1}}`, nil, "ignoring the lease file"},
		{"empty", ``, nil, "ignoring the lease file"},
		{"bad entries", `{"version":1,"leases":[` + strings.Join([]string{
			good,
			`{"mac":"zz","ip":"10.70.0.10","state":"bound","expiry":"2026-07-01T18:00:00Z"}`,
			`{"mac":"03:00:00:00:00:01","ip":"10.70.0.11","state":"bound","expiry":"2026-07-01T18:00:00Z"}`,
			`{"mac":"02:00:00:00:00:0b","ip":"10.99.0.12","state":"bound","expiry":"2026-07-01T18:00:00Z"}`,
			`{"mac":"02:00:00:00:00:0c","ip":"10.70.0.1","state":"bound","expiry":"2026-07-01T18:00:00Z"}`,
			`{"mac":"02:00:00:00:00:0d","ip":"10.70.0.13","state":"offered","expiry":"2026-07-01T18:00:00Z"}`,
			`{"mac":"02:00:00:00:00:0e","ip":"10.70.0.14","client_id":"xyz","state":"bound","expiry":"2026-07-01T18:00:00Z"}`,
		}, ",") + `],"pinned":[{"mac":"nope","ip":"10.70.0.20"}],"declined":[{"ip":"10.70.0.30","until":"2099-01-01T00:00:00Z"}]}`,
			[]string{macA + " 10.70.0.9 bound"}, "count=7"},
		{"the same address twice: the one seen last wins", `{"version":1,"leases":[` + good + `,` +
			`{"mac":"02:00:00:00:00:0b","ip":"10.70.0.9","state":"bound","expiry":"2026-07-01T18:00:00Z","last_seen":"2026-07-01T11:30:00Z"}]}`,
			[]string{macB + " 10.70.0.9 bound"}, "leases=1"},
		{"the same client twice: the one seen last wins", `{"version":1,"leases":[` + good + `,` +
			`{"mac":"02:00:00:00:00:0a","ip":"10.70.0.8","state":"bound","expiry":"2026-07-01T18:00:00Z","last_seen":"2026-07-01T10:30:00Z"}]}`,
			[]string{macA + " 10.70.0.9 bound"}, "leases=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.LeaseFile = filepath.Join(t.TempDir(), "leases.json")
			if err := os.WriteFile(cfg.LeaseFile, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			s, err := newServer(cfg, slog.New(slog.NewTextHandler(&logs, nil)), newClock().Now)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if diff := cmp.Diff(tc.want, leaseLines(s)); diff != "" {
				t.Errorf("Leases (-want +got):\n%s", diff)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log has no %q:\n%s", tc.wantLog, logs.String())
			}
			checkInvariants(t, s)
			// The server still works and writes a good file over the bad one.
			dora(t, s, macC)
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := readLeaseFile(cfg.LeaseFile); err != nil {
				t.Errorf("the file written over it: %v", err)
			}
		})
	}
}

// TestPersistCoalesced runs the writer: a burst of changes is one write.
func TestPersistCoalesced(t *testing.T) {
	cfg := testConfig()
	cfg.LeaseFile = filepath.Join(t.TempDir(), "leases.json")
	// A temp file left by a crash is removed at start.
	stale := filepath.Join(filepath.Dir(cfg.LeaseFile), ".leases.json.tmp-123")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, clk := newTestServer(t, cfg)
	if _, err := os.Stat(stale); err == nil {
		t.Error("stale temp file not removed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.writer(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	a := dora(t, s, macA)
	for range 100 {
		clk.Add(time.Second)
		s.Handle(renew(t, macA, a.String()))
	}
	if got := s.Stats().LeaseFileWrites; got != 0 {
		t.Errorf("%d writes right after the burst, want 0 (coalesced)", got)
	}
	deadline := time.Now().Add(saveDelay + 3*time.Second)
	for s.Stats().LeaseFileWrites == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(saveDelay / 2)
	if got := s.Stats().LeaseFileWrites; got != 1 {
		t.Errorf("%d writes after the burst, want 1", got)
	}
	f, err := readLeaseFile(cfg.LeaseFile)
	if err != nil || len(f.Leases) != 1 || !f.Leases[0].Expiry.Equal(clk.Now().Add(DefaultLeaseTime)) {
		t.Errorf("lease file after the burst: %v %+v", err, f)
	}
}

// TestPersistUnwritable: a lease file that cannot be written is an error
// of flush, not of the server.
func TestPersistUnwritable(t *testing.T) {
	cfg := testConfig()
	cfg.LeaseFile = filepath.Join(t.TempDir(), "missing-dir", "leases.json")
	s, _ := newTestServer(t, cfg)
	dora(t, s, macA)
	if err := s.flush(); err == nil || !strings.Contains(err.Error(), "dhcpd: save leases") {
		t.Errorf("flush into a missing directory: %v", err)
	}
	dora(t, s, macB)
}
