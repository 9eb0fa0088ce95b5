package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// Paths are the files of a Store.
type Paths struct {
	// Factory is the factory config from the image (read only).
	Factory string
	// Live is the running config. Its directory also holds pending.json
	// (the commit-confirm marker) and history/ (saved versions).
	Live string
}

// DefaultPaths are the paths on the box.
func DefaultPaths() Paths {
	return Paths{Factory: "/etc/e1kbox/factory.json", Live: "/perm/e1kbox/config.json"}
}

// HistorySize is how many saved versions the history keeps (the running
// version and the one a pending change rolls back to are kept beyond it).
const HistorySize = 10

// Errors of Confirm and Rollback.
var (
	ErrNoPending = errors.New("no change is waiting for confirmation")
	ErrExpired   = errors.New("the change was not confirmed in time and has been rolled back")
)

// Store keeps the runtime config on disk: the live config, the last
// HistorySize versions and the commit-confirm marker. Every write is
// atomic. A Store is safe for concurrent use; call Load first.
//
// Commit-confirm: Apply saves a new config as live and writes a pending
// marker (the previous version and a deadline) and runs it on the box
// (Run); Confirm removes the marker. If the deadline passes first, the
// Store rolls back to the previous version by itself — in memory and on
// the box first, then on disk as far as the disk allows — and calls the
// OnRollback function. A marker found by Load (the process or box
// restarted during the window) also rolls back, whatever its deadline.
type Store struct {
	paths Paths
	env   Env
	now   func() time.Time

	mu         sync.Mutex
	st         storage
	cur        *Config
	curID      uint64
	lastID     uint64
	pending    *Pending
	source     string // where the running config came from (Source)
	timer      *time.Timer
	armed      uint64 // the change the timer rolls back, 0 when stopped
	warnings   []string
	onRollback func(*Config)

	// op serializes every change of the running config, from saving it
	// to running it on the box (Apply, Confirm, rollbacks, Reload), so the
	// config the box runs and the one the store holds cannot drift apart.
	// It is taken before mu, and run is called with op held but not mu.
	op  sync.Mutex
	run func(*Config) error
	// confirmed is the last confirmed config with its stored form: what a
	// rollback restores, from memory, whatever the disk does.
	confirmed    *Config
	confirmedRaw []byte
}

// NewStore returns a Store for paths; env is used to validate configs.
func NewStore(paths Paths, env Env) *Store {
	return &Store{paths: paths, env: env, now: time.Now}
}

// OnRollback sets the function called after an automatic or a manual
// rollback, with the config now live and run: a notification (the Run
// function has run it). It runs without the Store's lock (it may read the
// Store) on the rollback's goroutine. Load's rollbacks do not call it:
// Load's result is the config to run.
func (s *Store) OnRollback(f func(cfg *Config)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRollback = f
}

// Load picks the config to run and returns it with warnings for the
// dashboard (also kept in Warnings). The order: a pending marker means the
// last change was never confirmed, so the version before it; else the live
// config; else the newest good version of the history; else the factory
// config. A config is good when it parses and validates. A missing or
// unwritable live directory runs the chosen config in memory only. Load
// saves a config that is not yet in the history (first boot, a
// hand-written or older-version live file) as a new version in the
// current format. It fails only if nothing, not even the factory config,
// parses.
func (s *Store) Load() (*Config, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopTimer()
	s.cur, s.curID, s.lastID, s.pending, s.warnings = nil, 0, 0, nil, nil

	disk := dirStorage{live: s.paths.Live}
	s.st = disk
	if err := disk.prepare(); err != nil {
		s.warn("persistent storage %s is unusable (%v): changes are kept in memory only and are lost at reboot", disk.dir(), err)
		s.st = newMemStorage()
	}
	vs, _ := disk.versions()
	for _, v := range vs {
		s.lastID = max(s.lastID, v.ID)
	}

	c, marker, err := s.choose(disk)
	if err != nil {
		return nil, slices.Clone(s.warnings), err
	}
	s.source = c.source
	if err := s.adopt(c, marker); err != nil {
		s.warn("%v", err)
	}
	s.prune()
	return s.cur, slices.Clone(s.warnings), nil
}

// candidate is a config Load may run.
type candidate struct {
	cfg    *Config
	raw    []byte
	id     uint64 // its version, 0 if not from the history
	reason string // for a new version: ReasonFactory or ReasonImport
	source string // for Source
}

func (s *Store) choose(disk dirStorage) (candidate, *Pending, error) {
	var unconfirmed uint64
	p, err := disk.readPending()
	if err != nil {
		s.warn("ignoring the unreadable commit-confirm marker: %v", err)
	}
	if p != nil {
		unconfirmed = p.ID
		cfg, raw, err := s.version(disk, p.Previous)
		if err == nil {
			s.warn("change %d was not confirmed before the restart; rolled back to version %d", p.ID, p.Previous)
			return candidate{cfg: cfg, raw: raw, id: p.Previous, source: fmt.Sprintf("history version %d (change %d was not confirmed)", p.Previous, p.ID)}, p, nil
		}
		s.warn("change %d was not confirmed before the restart, and version %d before it is unusable: %v", p.ID, p.Previous, err)
	}

	liveMissing := false
	raw, err := disk.readLive()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		liveMissing = true
	case err != nil:
		s.warn("cannot read the live config: %v", err)
	default:
		cfg, err := s.check(raw)
		switch {
		case err != nil:
			s.warn("the live config %s is unusable: %v", s.paths.Live, err)
		case unconfirmed != 0 && s.matches(disk, unconfirmed, raw):
			// The live file is the unconfirmed change, and the version
			// before it is unusable: fall back to an older one.
		default:
			return candidate{cfg: cfg, raw: raw, id: s.find(disk, raw), reason: ReasonImport, source: s.paths.Live}, p, nil
		}
	}

	vs, err := disk.versions()
	if err != nil {
		s.warn("cannot list the config history: %v", err)
	}
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.ID == unconfirmed {
			continue
		}
		cfg, raw, err := s.version(disk, v.ID)
		if err != nil {
			s.warn("history version %d is unusable: %v", v.ID, err)
			continue
		}
		s.warn("running the last good config, version %d of %s", v.ID, v.Time.Format(time.RFC3339))
		return candidate{cfg: cfg, raw: raw, id: v.ID, source: fmt.Sprintf("history version %d", v.ID)}, p, nil
	}

	raw, err = os.ReadFile(s.paths.Factory)
	if err != nil {
		return candidate{}, nil, fmt.Errorf("read the factory config: %w", err)
	}
	cfg, err := Parse(raw)
	if err != nil {
		return candidate{}, nil, fmt.Errorf("factory config %s: %w", s.paths.Factory, err)
	}
	if err := cfg.Validate(s.env); err != nil {
		s.warn("the factory config does not validate on this box: %v", err)
	}
	if !liveMissing || len(vs) > 0 || p != nil {
		s.warn("no usable saved config: running the factory config")
	}
	return candidate{cfg: cfg, raw: raw, reason: ReasonFactory, source: s.paths.Factory}, p, nil
}

// adopt makes c the running config: saved in the history (if it is not
// there yet), written as live, the pending marker removed.
func (s *Store) adopt(c candidate, marker *Pending) error {
	s.cur, s.curID = c.cfg, c.id
	s.confirmed, s.confirmedRaw = c.cfg, c.raw
	if _, err := s.st.readVersion(c.id); c.id == 0 || err != nil {
		raw, err := Marshal(c.cfg)
		if err != nil {
			return err
		}
		id := c.id
		if id == 0 {
			id = s.lastID + 1
		}
		reason := c.reason
		if reason == "" {
			reason = ReasonImport
		}
		if err := s.st.addVersion(VersionInfo{ID: id, Time: s.now(), Reason: reason}, raw); err != nil {
			return fmt.Errorf("save the running config: %w", err)
		}
		s.lastID = max(s.lastID, id)
		s.curID, c.raw = id, raw
		s.confirmedRaw = raw
	}
	if live, err := s.st.readLive(); err != nil || !bytes.Equal(live, c.raw) {
		if err := s.keepReplaced(); err != nil {
			return err
		}
		if err := s.st.writeLive(c.raw); err != nil {
			return fmt.Errorf("write the live config: %w", err)
		}
	}
	if marker != nil {
		if err := s.st.writePending(nil); err != nil {
			return fmt.Errorf("remove the commit-confirm marker: %w", err)
		}
	}
	return nil
}

// keepReplaced saves a live file that is about to be replaced and is not
// in the history (corrupt, invalid or hand-written) as config.json.replaced,
// for inspection.
func (s *Store) keepReplaced() error {
	if _, ok := s.st.(dirStorage); !ok {
		return nil
	}
	raw, err := os.ReadFile(s.paths.Live)
	if err != nil || s.find(s.st, raw) != 0 {
		return nil
	}
	bad := s.paths.Live + ".replaced"
	if err := writeFileAtomic(bad, raw); err != nil {
		return fmt.Errorf("keep the replaced live config: %w", err)
	}
	s.warn("the replaced live config was kept as %s", bad)
	return nil
}

// check parses and validates a saved config.
func (s *Store) check(raw []byte) (*Config, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(s.env); err != nil {
		return nil, err
	}
	return c, nil
}

// version reads, parses and validates a history version.
func (s *Store) version(st storage, id uint64) (*Config, []byte, error) {
	raw, err := st.readVersion(id)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.check(raw)
	return c, raw, err
}

// find returns the newest history version with exactly the bytes raw, or 0.
func (s *Store) find(st storage, raw []byte) uint64 {
	vs, _ := st.versions()
	for i := len(vs) - 1; i >= 0; i-- {
		if s.matches(st, vs[i].ID, raw) {
			return vs[i].ID
		}
	}
	return 0
}

func (s *Store) matches(st storage, id uint64, raw []byte) bool {
	b, err := st.readVersion(id)
	return err == nil && bytes.Equal(b, raw)
}

// maxWarnings bounds the warnings kept for the dashboard.
const maxWarnings = 32

// warn logs a warning and keeps it for Warnings: the newest maxWarnings,
// a repeat of the newest one not kept twice.
func (s *Store) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n := len(s.warnings); n > 0 && s.warnings[n-1] == msg {
		return
	}
	slog.Warn("config: " + msg)
	s.warnings = append(s.warnings, msg)
	if len(s.warnings) > maxWarnings {
		s.warnings = slices.Delete(s.warnings, 0, len(s.warnings)-maxWarnings)
	}
}

// Warnings returns the warnings of Load and of later automatic rollbacks.
func (s *Store) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.warnings)
}

// Source says where the running config came from: the live file's or
// the factory config's path as Load found it, "history version N" when
// Load fell back to the history, or "web" after a change through Apply
// (its version is in Current).
func (s *Store) Source() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.source
}

// Current returns the running config and its version. The config is
// shared: do not modify it.
func (s *Store) Current() (*Config, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.curID
}

// Pending returns the change waiting for confirmation, or nil.
func (s *Store) Pending() *Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return nil
	}
	p := *s.pending
	return &p
}

// Check parses and validates a config document with the Store's Env: what
// the API does with an upload before Apply. The error is an Errors.
func (s *Store) Check(data []byte) (*Config, error) {
	return s.check(data)
}

// Close stops the rollback timer and waits for a rollback the timer has
// begun, so that nothing runs on the Store's behalf after it returns. A
// pending change stays pending: the next Load rolls it back. The Run and
// OnRollback functions must not call it.
func (s *Store) Close() {
	s.mu.Lock()
	s.stopTimer()
	s.mu.Unlock()
	// A rollback in progress holds op; one whose timer fired but that has
	// not taken op yet finds the timer stopped.
	s.op.Lock()
	defer s.op.Unlock()
}

// History lists the saved versions, newest first.
func (s *Store) History() ([]VersionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return nil, errors.New("history: the store is not loaded")
	}
	vs, err := s.st.versions()
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	slices.Reverse(vs)
	for i := range vs {
		vs[i].Current = vs[i].ID == s.curID
	}
	return vs, nil
}

// Get returns the stored document of version id (for a backup download;
// Check and Apply restore one).
func (s *Store) Get(id uint64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return nil, errors.New("get: the store is not loaded")
	}
	b, err := s.st.readVersion(id)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return b, nil
}

// prune removes the oldest versions beyond HistorySize, but never the
// running version or the ones a pending change refers to.
func (s *Store) prune() {
	vs, err := s.st.versions()
	if err != nil || len(vs) <= HistorySize {
		return
	}
	for _, v := range vs[:len(vs)-HistorySize] {
		if v.ID == s.curID || s.pending != nil && (v.ID == s.pending.ID || v.ID == s.pending.Previous) {
			continue
		}
		if err := s.st.removeVersion(v.ID); err != nil {
			slog.Warn("config: prune history", "version", v.ID, "err", err)
		}
	}
}
