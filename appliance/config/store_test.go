package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testStore returns a Store in a temp dir whose factory config is
// testdata/v1.json (a bridge of eth1 and eth2, fdbSize 8192).
func testStore(t *testing.T) (*Store, Paths) {
	t.Helper()
	dir := t.TempDir()
	paths := Paths{Factory: filepath.Join(dir, "factory.json"), Live: filepath.Join(dir, "perm", "e1kbox", "config.json")}
	b, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths.Factory, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(paths, testEnv)
	t.Cleanup(s.Close)
	return s, paths
}

// variant returns a valid bridge config identified by its FDB size.
func variant(t testing.TB, n int) *Config {
	t.Helper()
	c := bridgeConfig(t)
	c.Bridge.FDBSize = n
	return c
}

func load(t *testing.T, s *Store) (*Config, []string) {
	t.Helper()
	c, warnings, err := s.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c, warnings
}

func fdbSize(c *Config) int { return c.Bridge.FDBSize }

// liveFDBSize parses the live file on disk.
func liveFDBSize(t *testing.T, paths Paths) int {
	t.Helper()
	b, err := os.ReadFile(paths.Live)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatalf("live config does not parse: %v", err)
	}
	return fdbSize(c)
}

func markerExists(paths Paths) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(paths.Live), "pending.json"))
	return err == nil
}

func containsWarning(warnings []string, sub string) bool {
	return slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, sub) })
}

func TestStoreFirstBoot(t *testing.T) {
	s, paths := testStore(t)
	c, warnings := load(t, s)
	if len(warnings) != 0 {
		t.Errorf("first boot warnings: %q", warnings)
	}
	if c.Version != Version || c.Ports[0].Interface != "eth1" {
		t.Errorf("first boot config: %+v", c)
	}
	if got := liveFDBSize(t, paths); got != DefaultFDBSize {
		t.Errorf("live fdbSize %d", got)
	}
	h, err := s.History()
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || h[0].ID != 1 || h[0].Reason != ReasonFactory || !h[0].Current {
		t.Errorf("History() = %+v, want one current factory version", h)
	}
	// A second Load of the same files finds the live config in the history.
	s2 := NewStore(paths, testEnv)
	if _, warnings := load(t, s2); len(warnings) != 0 {
		t.Errorf("second boot warnings: %q", warnings)
	}
	if _, id := s2.Current(); id != 1 {
		t.Errorf("second boot current version %d, want 1", id)
	}
	if h, _ := s2.History(); len(h) != 1 {
		t.Errorf("second boot history has %d versions, want 1", len(h))
	}
}

func TestApplyConfirm(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	rolledBack := make(chan *Config, 1)
	s.OnRollback(func(c *Config) { rolledBack <- c })
	id, err := s.Apply(variant(t, 1000), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pending()
	if p == nil || p.ID != id || p.Previous != 1 {
		t.Fatalf("Pending() = %+v, want id %d previous 1", p, id)
	}
	if !markerExists(paths) || liveFDBSize(t, paths) != 1000 {
		t.Fatal("Apply did not write the marker and the live config")
	}
	if err := s.Confirm(id + 1); err == nil {
		t.Error("Confirm of a wrong id succeeded")
	}
	if err := s.Confirm(id); err != nil {
		t.Fatalf("Confirm: %v", err)
	}
	if markerExists(paths) || s.Pending() != nil {
		t.Error("Confirm left the change pending")
	}
	time.Sleep(500 * time.Millisecond) // past the deadline
	select {
	case <-rolledBack:
		t.Fatal("confirmed change rolled back")
	default:
	}
	if c, cid := s.Current(); fdbSize(c) != 1000 || cid != id {
		t.Errorf("Current() = fdbSize %d version %d, want 1000 version %d", fdbSize(c), cid, id)
	}
	if err := s.Confirm(id); !errors.Is(err, ErrNoPending) {
		t.Errorf("second Confirm: %v, want ErrNoPending", err)
	}
}

func TestApplyTimeoutRollsBack(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	rolledBack := make(chan *Config, 1)
	s.OnRollback(func(c *Config) { rolledBack <- c })
	id, err := s.Apply(variant(t, 1000), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rolledBack:
		if fdbSize(c) != DefaultFDBSize {
			t.Errorf("rolled back to fdbSize %d, want %d", fdbSize(c), DefaultFDBSize)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no rollback 5s after a 100ms confirm timeout")
	}
	if got := liveFDBSize(t, paths); got != DefaultFDBSize {
		t.Errorf("live fdbSize after rollback %d", got)
	}
	if markerExists(paths) || s.Pending() != nil {
		t.Error("rollback left the marker")
	}
	if _, cid := s.Current(); cid != 1 {
		t.Errorf("current version %d after rollback, want 1", cid)
	}
	if !containsWarning(s.Warnings(), "not confirmed within its timeout") {
		t.Errorf("no rollback warning: %q", s.Warnings())
	}
	if err := s.Confirm(id); !errors.Is(err, ErrNoPending) {
		t.Errorf("Confirm after rollback: %v, want ErrNoPending", err)
	}
	// The rolled-back version stays in the history.
	if _, err := s.Get(id); err != nil {
		t.Errorf("Get(%d): %v", id, err)
	}
}

func TestConfirmAfterDeadline(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	id, err := s.Apply(variant(t, 1000), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if err := s.Confirm(id); !errors.Is(err, ErrExpired) {
		t.Fatalf("Confirm after the deadline: %v, want ErrExpired", err)
	}
	if got := liveFDBSize(t, paths); got != DefaultFDBSize {
		t.Errorf("live fdbSize %d, want the old config", got)
	}
}

func TestApplyRestartRollsBack(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	id, err := s.Apply(variant(t, 1000), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // the process dies mid-window
	s2 := NewStore(paths, testEnv)
	defer s2.Close()
	c, warnings := load(t, s2)
	if fdbSize(c) != DefaultFDBSize {
		t.Errorf("after restart fdbSize %d, want the old %d", fdbSize(c), DefaultFDBSize)
	}
	if !containsWarning(warnings, "was not confirmed before the restart") {
		t.Errorf("warnings %q lack the rollback", warnings)
	}
	if liveFDBSize(t, paths) != DefaultFDBSize || markerExists(paths) {
		t.Error("restart did not restore the live file and remove the marker")
	}
	if err := s2.Confirm(id); !errors.Is(err, ErrNoPending) {
		t.Errorf("Confirm after restart: %v, want ErrNoPending", err)
	}
	// A third start sees a clean state.
	s3 := NewStore(paths, testEnv)
	defer s3.Close()
	if _, warnings := load(t, s3); len(warnings) != 0 {
		t.Errorf("third start warnings: %q", warnings)
	}
}

func TestApplyWhilePending(t *testing.T) {
	s, _ := testStore(t)
	load(t, s)
	var called int
	s.OnRollback(func(*Config) { called++ })
	// More unconfirmed applies than the history keeps: the confirmed
	// version must survive pruning.
	var id uint64
	for n := range HistorySize + 3 {
		var err error
		if id, err = s.Apply(variant(t, 1000+n), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if p := s.Pending(); p.ID != id || p.Previous != 1 {
		t.Fatalf("Pending() = %+v, want id %d previous 1", p, id)
	}
	c, err := s.Rollback()
	if err != nil {
		t.Fatal(err)
	}
	if fdbSize(c) != DefaultFDBSize || called != 1 {
		t.Errorf("Rollback() gave fdbSize %d, callback called %d times", fdbSize(c), called)
	}
	if _, err := s.Rollback(); !errors.Is(err, ErrNoPending) {
		t.Errorf("second Rollback: %v, want ErrNoPending", err)
	}
}

func TestApplyInvalid(t *testing.T) {
	s, _ := testStore(t)
	load(t, s)
	c := variant(t, 1000)
	c.Ports[1].Interface = "eth9"
	_, err := s.Apply(c, time.Hour)
	want := Errors{{Path: "ports[1].interface", Message: `unknown interface "eth9" (this box has: eth0, eth1, eth2, eth3, lo); fix the name or set enabled to false`}}
	if diff := cmp.Diff(want, AsErrors(err)); diff != "" {
		t.Errorf("Apply errors (-want +got):\n%s", diff)
	}
	if h, _ := s.History(); len(h) != 1 || s.Pending() != nil {
		t.Errorf("invalid Apply changed the store: history %+v", h)
	}
	if _, err := s.Check([]byte(`{"version": 2, "ports": [{"name": "a", "interface": "eth7"}]}`)); len(AsErrors(err)) != 1 {
		t.Errorf("Check: %v, want one error", err)
	}
}

func TestHistory(t *testing.T) {
	s, _ := testStore(t)
	load(t, s)
	for n := range 15 {
		id, err := s.Apply(variant(t, 1000+n), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Confirm(id); err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.History()
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, v := range h {
		ids = append(ids, v.ID)
		if v.Current != (v.ID == 16) || v.Reason != ReasonApply || time.Since(v.Time) > time.Minute {
			t.Errorf("version %+v", v)
		}
	}
	if diff := cmp.Diff([]uint64{16, 15, 14, 13, 12, 11, 10, 9, 8, 7}, ids); diff != "" {
		t.Errorf("History ids (-want +got):\n%s", diff)
	}
	b, err := s.Get(12)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Check(b)
	if err != nil || fdbSize(c) != 1010 {
		t.Errorf("Get(12) = fdbSize %v, %v; want 1010", c, err)
	}
	if _, err := s.Get(3); err == nil {
		t.Error("Get of a pruned version succeeded")
	}
}

func TestCorruptLive(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	id, err := s.Apply(variant(t, 1000), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Confirm(id); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(paths.Live, []byte(`{"version": 2, "ports": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := NewStore(paths, testEnv)
	defer s2.Close()
	c, warnings := load(t, s2)
	if fdbSize(c) != 1000 {
		t.Errorf("after a corrupt live file fdbSize %d, want the last good 1000", fdbSize(c))
	}
	if !containsWarning(warnings, "live config") || !containsWarning(warnings, "last good config, version 2") {
		t.Errorf("warnings %q do not explain the fallback", warnings)
	}
	if liveFDBSize(t, paths) != 1000 {
		t.Error("the live file was not restored")
	}
	if b, err := os.ReadFile(paths.Live + ".replaced"); err != nil || string(b) != `{"version": 2, "ports": [` {
		t.Errorf("corrupt file not kept: %q, %v", b, err)
	}
}

func TestCorruptLiveAndHistory(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	for _, n := range []int{1000, 2000} {
		id, err := s.Apply(variant(t, n), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Confirm(id); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	os.WriteFile(paths.Live, []byte("garbage"), 0o644)
	newest, _ := filepath.Glob(filepath.Join(filepath.Dir(paths.Live), "history", "00000003-*.json"))
	if len(newest) != 1 {
		t.Fatalf("history file of version 3: %v", newest)
	}
	os.WriteFile(newest[0], []byte(`{"version": 2, "mode": "nat"}`), 0o644) // parses, does not validate
	s2 := NewStore(paths, testEnv)
	defer s2.Close()
	c, warnings := load(t, s2)
	if fdbSize(c) != 1000 {
		t.Errorf("fdbSize %d, want version 2's 1000", fdbSize(c))
	}
	if !containsWarning(warnings, "history version 3 is unusable") {
		t.Errorf("warnings %q", warnings)
	}
}

func TestCorruptEverything(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	s.Close()
	os.WriteFile(paths.Live, []byte("garbage"), 0o644)
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(paths.Live), "history", "*.json"))
	for _, f := range files {
		os.WriteFile(f, nil, 0o644)
	}
	s2 := NewStore(paths, testEnv)
	defer s2.Close()
	c, warnings := load(t, s2)
	if c.Ports[0].Name != "port1" || !containsWarning(warnings, "running the factory config") {
		t.Errorf("config %+v warnings %q, want the factory config with a warning", c.Ports, warnings)
	}
	// Without a usable factory config, Load fails.
	os.WriteFile(paths.Factory, []byte("{"), 0o644)
	os.WriteFile(paths.Live, []byte("garbage"), 0o644)
	files, _ = filepath.Glob(filepath.Join(filepath.Dir(paths.Live), "history", "*.json"))
	for _, f := range files {
		os.WriteFile(f, nil, 0o644)
	}
	if _, _, err := NewStore(paths, testEnv).Load(); err == nil {
		t.Error("Load succeeded without any usable config")
	}
}

func TestMissingPerm(t *testing.T) {
	_, paths := testStore(t)
	// /perm is "missing": its path runs through a regular file.
	blocker := filepath.Join(filepath.Dir(paths.Factory), "perm-is-a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths.Live = filepath.Join(blocker, "e1kbox", "config.json")
	s := NewStore(paths, testEnv)
	defer s.Close()
	c, warnings := load(t, s)
	if c.Ports[0].Name != "port1" {
		t.Errorf("config %+v, want the factory config", c.Ports)
	}
	if !containsWarning(warnings, "kept in memory only") {
		t.Errorf("warnings %q lack the memory-only warning", warnings)
	}
	// Commit-confirm works in memory.
	rolledBack := make(chan *Config, 1)
	s.OnRollback(func(c *Config) { rolledBack <- c })
	id, err := s.Apply(variant(t, 1000), time.Hour)
	if err != nil {
		t.Fatalf("Apply in memory: %v", err)
	}
	if err := s.Confirm(id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(variant(t, 2000), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rolledBack:
		if fdbSize(c) != 1000 {
			t.Errorf("in-memory rollback to fdbSize %d, want 1000", fdbSize(c))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no in-memory rollback")
	}
	if h, err := s.History(); err != nil || len(h) != 3 {
		t.Errorf("in-memory History() = %+v, %v; want 3 versions", h, err)
	}
}

func TestImportLive(t *testing.T) {
	s, paths := testStore(t)
	if err := os.MkdirAll(filepath.Dir(paths.Live), 0o755); err != nil {
		t.Fatal(err)
	}
	// A hand-written version-1 live config.
	v1 := `{"version": 1, "ports": [{"name": "a", "interface": "eth3"}], "fdbAgingSeconds": 30}`
	if err := os.WriteFile(paths.Live, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := load(t, s)
	if c.Ports[0].Interface != "eth3" || c.Bridge.FDBAging.D() != 30*time.Second {
		t.Errorf("imported config %+v", c)
	}
	h, _ := s.History()
	if len(h) != 1 || h[0].Reason != ReasonImport {
		t.Errorf("History() = %+v, want one import", h)
	}
	b, _ := os.ReadFile(paths.Live)
	if !strings.Contains(string(b), fmt.Sprintf(`"version": %d`, Version)) {
		t.Errorf("live file not rewritten as version %d:\n%s", Version, b)
	}
	if kept, _ := os.ReadFile(paths.Live + ".replaced"); string(kept) != v1 {
		t.Errorf("original live file not kept: %q", kept)
	}
}
