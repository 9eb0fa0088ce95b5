package config

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrRun wraps the error of the Run function when the box could not run
// an applied config (Apply then rolled it back).
var ErrRun = errors.New("the box could not run this config")

// Run sets the function that makes a config run on the box (the
// supervisor's dataplane apply). The Store calls it for every change of
// the running config — an Apply, a rollback (automatic, manual, or after
// a failed run), a Reload — serialized with the change itself, so that
// what the box runs is always what the store holds. It must not call the
// Store's Apply, Confirm, Rollback or Reload.
func (s *Store) Run(f func(cfg *Config) error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.run = f
}

// Reload is Load followed by running the chosen config, as one change:
// what SIGHUP does.
func (s *Store) Reload() (*Config, []string, error) {
	s.op.Lock()
	defer s.op.Unlock()
	c, warnings, err := s.Load()
	if err != nil {
		return nil, warnings, err
	}
	if err := s.runConfig(c); err != nil {
		return c, warnings, fmt.Errorf("%w: %w", ErrRun, err)
	}
	return c, warnings, nil
}

func (s *Store) runConfig(c *Config) error {
	if s.run == nil {
		return nil
	}
	return s.run(c)
}

// Apply validates cfg, saves it as a new version, writes the pending
// marker, makes it live and runs it (see Run). It returns the new
// version's id, which Confirm takes. Unless confirmed within timeout (0:
// the new config's dashboard.confirmTimeout) the Store rolls back to the
// last confirmed version. Applying while another change is pending
// replaces that change: a rollback still returns to the last confirmed
// version. Validation errors are an Errors; when the box cannot run the
// config, Apply rolls it back at once and returns an error wrapping
// ErrRun.
func (s *Store) Apply(cfg *Config, timeout time.Duration) (uint64, error) {
	s.op.Lock()
	defer s.op.Unlock()
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
	id, err := s.save(c, raw, timeout)
	if err != nil {
		return 0, err
	}
	if err := s.runConfig(c); err != nil {
		s.mu.Lock()
		s.rollback(fmt.Sprintf("the box could not run change %d (%v)", id, err))
		return 0, fmt.Errorf("%w: %w", ErrRun, err)
	}
	return id, nil
}

// save stores c as a new pending version and makes it the current one.
func (s *Store) save(c *Config, raw []byte, timeout time.Duration) (uint64, error) {
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
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if s.pending == nil || s.pending.ID != id {
		defer s.mu.Unlock()
		if s.pending == nil {
			return fmt.Errorf("confirm %d: %w", id, ErrNoPending)
		}
		return fmt.Errorf("confirm %d: the change waiting for confirmation is %d", id, s.pending.ID)
	}
	if !s.now().Before(s.pending.Deadline) {
		s.rollback(fmt.Sprintf("change %d was confirmed after its deadline", id))
		return fmt.Errorf("confirm %d: %w", id, ErrExpired)
	}
	defer s.mu.Unlock()
	if err := s.st.writePending(nil); err != nil {
		return fmt.Errorf("confirm %d: remove the commit-confirm marker: %w", id, err)
	}
	s.stopTimer()
	s.pending = nil
	s.confirmed = s.cur
	if raw, err := Marshal(s.cur); err == nil {
		s.confirmedRaw = raw
	}
	s.prune()
	return nil
}

// Rollback rolls the pending change back now and returns the config that
// is live again; it runs it and calls the OnRollback function as well.
func (s *Store) Rollback() (*Config, error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("rollback: %w", ErrNoPending)
	}
	return s.rollback("rolled back through the API"), nil
}

// expire rolls back change id when its deadline passed unconfirmed and
// its timer was not stopped meanwhile (a Close, Confirm or new change).
func (s *Store) expire(id uint64) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if s.armed != id || s.pending == nil || s.pending.ID != id {
		s.mu.Unlock()
		return
	}
	s.rollback(fmt.Sprintf("change %d was not confirmed within its timeout", id))
}

// rollback restores the last confirmed config: first in memory, then on
// the box (Run), then on disk as far as the disk lets it, and finally
// calls the OnRollback function. The caller holds op and mu; rollback
// releases mu. A disk that refuses the writes (full, read-only) cannot
// keep the unconfirmed config running: the box runs the confirmed one,
// and the commit-confirm marker, removed only once the live file is the
// confirmed one again, makes the next Load roll back too.
func (s *Store) rollback(why string) *Config {
	p := s.pending
	cfg, raw := s.confirmed, s.confirmedRaw
	s.stopTimer()
	s.cur, s.curID, s.pending = cfg, p.Previous, nil
	s.source = fmt.Sprintf("history version %d (change %d rolled back)", p.Previous, p.ID)
	f := s.onRollback
	s.mu.Unlock()

	if err := s.runConfig(cfg); err != nil {
		slog.Error("config: the box could not run the rolled-back config", "version", p.Previous, "err", err)
	}

	s.mu.Lock()
	if err := s.st.writeLive(raw); err != nil {
		s.warn("%s; rolled back to version %d, but the live config could not be rewritten (it is rolled back again at the next start): %v", why, p.Previous, err)
	} else if err := s.st.writePending(nil); err != nil {
		s.warn("%s; rolled back to version %d, but the commit-confirm marker stays: %v", why, p.Previous, err)
	} else {
		s.warn("%s; rolled back to version %d", why, p.Previous)
	}
	s.mu.Unlock()
	slog.Info("config: rolled back", "change", p.ID, "version", p.Previous)
	if f != nil {
		f(cfg)
	}
	return cfg
}

func (s *Store) arm(p *Pending, after time.Duration) {
	s.stopTimer()
	id := p.ID
	s.armed = id
	s.timer = time.AfterFunc(after, func() { s.expire(id) })
}

// stopTimer stops the rollback timer; a timer that has fired already
// finds it stopped (armed) and does nothing.
func (s *Store) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.armed = 0
}
