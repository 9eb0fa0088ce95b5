package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/webui"
)

// Store is the config store with commit-confirm for the web UI (its
// ConfigStore): the store saves, runs (its Run function applies the
// config to the box's parts) and rolls back each change as one
// serialized step.
type Store struct {
	store *config.Store

	mu     sync.Mutex
	states map[uint64]webui.ApplyState
	cur    atomic.Pointer[cachedVersion] // Version's last answer
}

// cachedVersion is the version of the store's config id.
type cachedVersion struct {
	id uint64
	v  webui.Version
}

// NewStore adapts store; have the store's rollback hook call RolledBack.
func NewStore(store *config.Store) *Store {
	return &Store{store: store, states: map[uint64]webui.ApplyState{}}
}

func versionOf(v config.VersionInfo) webui.Version {
	return webui.Version{ID: strconv.FormatUint(v.ID, 10), Time: v.Time, Source: v.Reason}
}

func (a *Store) version(id uint64) webui.Version {
	hist, _ := a.store.History()
	for _, v := range hist {
		if v.ID == id {
			return versionOf(v)
		}
	}
	return webui.Version{ID: strconv.FormatUint(id, 10)}
}

// Version is the running config's version, looked up in the history only
// when the store's current id changed (Current encodes the whole config:
// 10k rules made that a quarter of a megabyte a second for the
// dashboard's publisher).
func (a *Store) Version() webui.Version {
	_, id := a.store.Current()
	if c := a.cur.Load(); c != nil && c.id == id {
		return c.v
	}
	v := a.version(id) // outside a.mu: the store's hooks take it
	a.cur.Store(&cachedVersion{id: id, v: v})
	return v
}

func (a *Store) Current() (json.RawMessage, webui.Version) {
	cfg, id := a.store.Current()
	b, err := config.Marshal(cfg)
	if err != nil {
		b = []byte("null")
	}
	return redact(b), a.version(id)
}

func fieldErrors(err error) []webui.FieldError {
	var out []webui.FieldError
	for _, e := range config.AsErrors(err) {
		out = append(out, webui.FieldError{Path: e.Path, Message: e.Message})
	}
	if len(out) == 0 && err != nil {
		out = append(out, webui.FieldError{Message: err.Error()})
	}
	return out
}

func (a *Store) Validate(b []byte) []webui.FieldError {
	cur, _ := a.store.Current()
	b = unredact(b, cur, a.store.Get)
	if _, err := a.store.Check(b); err != nil {
		return fieldErrors(err)
	}
	return nil
}

func (a *Store) Apply(b []byte, timeout time.Duration) (webui.PendingID, error) {
	cur, _ := a.store.Current()
	b = unredact(b, cur, a.store.Get) // the password the API showed as a placeholder stays
	cfg, err := a.store.Check(b)
	if err != nil {
		return "", webui.FieldErrors(fieldErrors(err))
	}
	// The store saves it, runs it on the box and, if the box cannot run
	// it, goes back at once: one serialized change.
	id, err := a.store.Apply(cfg, timeout)
	var invalid config.Errors
	switch {
	case errors.Is(err, config.ErrRun):
		return "", webui.FieldErrors{{Message: err.Error()}}
	case errors.As(err, &invalid):
		return "", webui.FieldErrors(fieldErrors(err))
	case err != nil:
		return "", err
	}
	a.setState(id, webui.ApplyPending)
	return webui.PendingID(strconv.FormatUint(id, 10)), nil
}

func parseID(id webui.PendingID) (uint64, error) {
	n, err := strconv.ParseUint(string(id), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", webui.ErrNotFound, id)
	}
	return n, nil
}

func (a *Store) Confirm(id webui.PendingID) error {
	n, err := parseID(id)
	if err != nil {
		return err
	}
	if err := a.store.Confirm(n); err != nil {
		if errors.Is(err, config.ErrNoPending) || errors.Is(err, config.ErrExpired) {
			return fmt.Errorf("%w: %v", webui.ErrNotFound, err)
		}
		return err
	}
	a.setState(n, webui.ApplyConfirmed)
	return nil
}

func (a *Store) Rollback(id webui.PendingID) error {
	n, err := parseID(id)
	if err != nil {
		return err
	}
	if p := a.store.Pending(); p == nil || p.ID != n {
		return fmt.Errorf("%w: no pending change %d", webui.ErrNotFound, n)
	}
	if _, err := a.store.Rollback(); err != nil {
		return err
	}
	return nil
}

// RolledBack marks the pending changes rolled back: the store's rollback
// hook calls it.
func (a *Store) RolledBack() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, st := range a.states {
		if st == webui.ApplyPending {
			a.states[id] = webui.ApplyRolledBack
		}
	}
}

func (a *Store) setState(id uint64, st webui.ApplyState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.states[id] = st
}

func (a *Store) Pending() *webui.PendingInfo {
	p := a.store.Pending()
	if p == nil {
		return nil
	}
	return &webui.PendingInfo{ID: webui.PendingID(strconv.FormatUint(p.ID, 10)),
		Version: a.version(p.ID), Previous: a.version(p.Previous), Deadline: p.Deadline}
}

func (a *Store) State(id webui.PendingID) webui.ApplyState {
	n, err := parseID(id)
	if err != nil {
		return webui.ApplyUnknown
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.states[n]; ok {
		return st
	}
	return webui.ApplyUnknown
}

func (a *Store) History() []webui.Version {
	hist, _ := a.store.History()
	out := make([]webui.Version, 0, len(hist))
	for i := len(hist) - 1; i >= 0; i-- { // newest first
		out = append(out, versionOf(hist[i]))
	}
	if len(out) > 1 && out[0].Time.Before(out[len(out)-1].Time) {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func (a *Store) Get(id string) (json.RawMessage, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: version %q", webui.ErrNotFound, id)
	}
	b, err := a.store.Get(n)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", webui.ErrNotFound, err)
	}
	return redactVersion(b, n), nil
}
