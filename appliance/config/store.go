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

// retryRollback is how long an automatic rollback that failed waits
// before it tries again.
const retryRollback = 5 * time.Second

// Store keeps the runtime config on disk: the live config, the last
// HistorySize versions and the commit-confirm marker. Every write is
// atomic. A Store is safe for concurrent use; call Load first.
//
// Commit-confirm: Apply saves a new config as live and writes a pending
// marker (the previous version and a deadline); Confirm removes it. If
// the deadline passes first, the Store rolls back to the previous version
// by itself and calls the OnRollback function, which re-applies it to the
// running box. A marker found by Load (the process or box restarted during
// the window) also rolls back, whatever its deadline.
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
	warnings   []string
	onRollback func(*Config)
}

// NewStore returns a Store for paths; env is used to validate configs.
func NewStore(paths Paths, env Env) *Store {
	return &Store{paths: paths, env: env, now: time.Now}
}

// OnRollback sets the function called after an automatic or a manual
// rollback, with the config now live. It runs without the Store's lock
// (it may call the Store) on the rollback's goroutine. Load's rollbacks
// do not call it: Load's result is the config to run.
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

func (s *Store) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	slog.Warn("config: " + msg)
	s.warnings = append(s.warnings, msg)
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

// Apply validates cfg, saves it as a new version, writes the pending
// marker and makes it live. It returns the new version's id, which Confirm
// takes. Unless confirmed within timeout (0: the new config's
// dashboard.confirmTimeout) the Store rolls back to the last confirmed
// version. Applying while another change is pending replaces that change:
// a rollback still returns to the last confirmed version. Validation
// errors are an Errors. The caller applies the config to the running box.
func (s *Store) Apply(cfg *Config, timeout time.Duration) (uint64, error) {
	c, raw, err := s.normalize(cfg)
	if err != nil {
		return 0, err
	}
	if timeout == 0 {
		timeout = c.Dashboard.ConfirmTimeout.D()
	}
	if timeout < 0 {
		return 0, fmt.Errorf("apply: negative confirm timeout %s", timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0, errors.New("apply: the store is not loaded")
	}
	prev := s.curID
	if s.pending != nil {
		prev = s.pending.Previous
	}
	now := s.now()
	id := s.lastID + 1
	if err := s.st.addVersion(VersionInfo{ID: id, Time: now, Reason: ReasonApply}, raw); err != nil {
		return 0, fmt.Errorf("apply: save version %d: %w", id, err)
	}
	s.lastID = id
	p := &Pending{ID: id, Previous: prev, Deadline: now.Add(timeout)}
	if err := s.st.writePending(p); err != nil {
		return 0, fmt.Errorf("apply: write the commit-confirm marker: %w", err)
	}
	if err := s.st.writeLive(raw); err != nil {
		if err2 := s.st.writePending(s.pending); err2 != nil {
			s.warn("restore the commit-confirm marker after a failed apply: %v", err2)
		}
		return 0, fmt.Errorf("apply: %w", err)
	}
	s.cur, s.curID, s.pending, s.source = c, id, p, "web"
	s.arm(p, timeout)
	s.prune()
	return id, nil
}

// normalize validates cfg and returns a private copy with defaults and its
// stored form.
func (s *Store) normalize(cfg *Config) (*Config, []byte, error) {
	cp := *cfg
	if cp.Version == 0 {
		cp.Version = Version
	}
	c, err := cp.Clone()
	if err != nil {
		return nil, nil, err
	}
	if err := c.Validate(s.env); err != nil {
		return nil, nil, err
	}
	raw, err := Marshal(c)
	return c, raw, err
}

// Confirm keeps the pending change id. After its deadline it is too late:
// the change is rolled back (if the timer has not done it yet) and Confirm
// returns ErrExpired.
func (s *Store) Confirm(id uint64) error {
	s.mu.Lock()
	if s.pending == nil || s.pending.ID != id {
		defer s.mu.Unlock()
		if s.pending == nil {
			return fmt.Errorf("confirm %d: %w", id, ErrNoPending)
		}
		return fmt.Errorf("confirm %d: the change waiting for confirmation is %d", id, s.pending.ID)
	}
	if !s.now().Before(s.pending.Deadline) {
		cfg, err := s.rollbackLocked()
		s.finishRollback(cfg, err)
		if err != nil {
			return fmt.Errorf("confirm %d: %w", id, err)
		}
		return fmt.Errorf("confirm %d: %w", id, ErrExpired)
	}
	defer s.mu.Unlock()
	if err := s.st.writePending(nil); err != nil {
		return fmt.Errorf("confirm %d: remove the commit-confirm marker: %w", id, err)
	}
	s.stopTimer()
	s.pending = nil
	s.prune()
	return nil
}

// Rollback rolls the pending change back now and returns the config that
// is live again; it calls the OnRollback function as well.
func (s *Store) Rollback() (*Config, error) {
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("rollback: %w", ErrNoPending)
	}
	cfg, err := s.rollbackLocked()
	s.finishRollback(cfg, err)
	return cfg, err
}

// finishRollback unlocks s and calls the rollback function after a
// successful rollback.
func (s *Store) finishRollback(cfg *Config, err error) {
	f := s.onRollback
	s.mu.Unlock()
	if err == nil && f != nil {
		f(cfg)
	}
}

// rollbackLocked restores the pending change's previous version.
func (s *Store) rollbackLocked() (*Config, error) {
	p := s.pending
	raw, err := s.st.readVersion(p.Previous)
	if err != nil {
		return nil, fmt.Errorf("roll back to version %d: %w", p.Previous, err)
	}
	cfg, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("roll back to version %d: %w", p.Previous, err)
	}
	if err := s.st.writeLive(raw); err != nil {
		return nil, fmt.Errorf("roll back to version %d: %w", p.Previous, err)
	}
	s.stopTimer()
	s.cur, s.curID, s.pending = cfg, p.Previous, nil
	s.source = fmt.Sprintf("history version %d (change %d rolled back)", p.Previous, p.ID)
	if err := s.st.writePending(nil); err != nil {
		// The live config is the old one already; a marker left behind
		// makes the next Load roll back to the same version.
		s.warn("rolled back to version %d, but the commit-confirm marker stays: %v", p.Previous, err)
	}
	slog.Info("config: rolled back", "change", p.ID, "version", p.Previous)
	return cfg, nil
}

func (s *Store) arm(p *Pending, after time.Duration) {
	s.stopTimer()
	id := p.ID
	s.timer = time.AfterFunc(after, func() { s.expire(id) })
}

func (s *Store) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// expire rolls back change id when its deadline passed unconfirmed.
func (s *Store) expire(id uint64) {
	s.mu.Lock()
	if s.pending == nil || s.pending.ID != id {
		s.mu.Unlock()
		return
	}
	cfg, err := s.rollbackLocked()
	if err != nil {
		s.warn("automatic rollback of change %d failed, retrying in %s: %v", id, retryRollback, err)
		s.arm(s.pending, retryRollback)
	} else {
		s.warn("change %d was not confirmed within its timeout; rolled back to version %d", id, s.curID)
	}
	s.finishRollback(cfg, err)
}

// Close stops the rollback timer. A pending change stays pending: the next
// Load rolls it back.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopTimer()
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
