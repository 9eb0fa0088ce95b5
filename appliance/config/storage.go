package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"e1kbox/appliance/atomicfile"
)

// VersionInfo describes one saved config version.
type VersionInfo struct {
	// ID is the version's sequence number, increasing with every save.
	ID uint64 `json:"id"`
	// Time is when the version was saved.
	Time time.Time `json:"time"`
	// Reason is why it was saved: one of the Reason* constants.
	Reason string `json:"reason"`
	// Current marks the running version (set by Store.History).
	Current bool `json:"current,omitempty"`
}

// Reasons of saved versions.
const (
	ReasonFactory = "factory" // the factory config, saved on first boot
	ReasonImport  = "import"  // a live config found on disk but not in the history (hand-written, older version)
	ReasonApply   = "apply"   // Store.Apply
)

// Pending is an applied change waiting for confirmation.
type Pending struct {
	// ID is the applied version; Confirm takes it.
	ID uint64 `json:"id"`
	// Previous is the version a rollback restores: the last confirmed one.
	Previous uint64 `json:"previous"`
	// Deadline is when the change rolls back unless confirmed.
	Deadline time.Time `json:"deadline"`
}

// storage holds the live config, the history and the pending marker.
type storage interface {
	readLive() ([]byte, error)
	writeLive(data []byte) error
	versions() ([]VersionInfo, error) // oldest first
	readVersion(id uint64) ([]byte, error)
	addVersion(v VersionInfo, data []byte) error
	removeVersion(id uint64) error
	readPending() (*Pending, error) // nil, nil if there is none
	writePending(p *Pending) error  // nil removes the marker
}

// dirStorage keeps everything in the live config's directory:
//
//	config.json                                 the live config
//	pending.json                                the commit-confirm marker
//	history/00000042-20260714T101500.123Z-apply.json   saved versions
//
// Every write is atomic: a temp file in the same directory, fsync,
// rename, fsync of the directory.
type dirStorage struct {
	live string
}

func (d dirStorage) dir() string         { return filepath.Dir(d.live) }
func (d dirStorage) historyDir() string  { return filepath.Join(d.dir(), "history") }
func (d dirStorage) pendingPath() string { return filepath.Join(d.dir(), "pending.json") }

// prepare creates the directories, removes temp files left by a crash and
// checks that the directory is writable.
func (d dirStorage) prepare() error {
	if err := os.MkdirAll(d.historyDir(), 0o755); err != nil {
		return err
	}
	for _, dir := range []string{d.dir(), d.historyDir()} {
		stale, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
		for _, f := range stale {
			os.Remove(f)
		}
	}
	probe := filepath.Join(d.dir(), ".write-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return err
	}
	return os.Remove(probe)
}

func (d dirStorage) readLive() ([]byte, error) { return os.ReadFile(d.live) }

func (d dirStorage) writeLive(data []byte) error { return writeFileAtomic(d.live, data) }

const versionTimeLayout = "20060102T150405.000Z"

func versionName(v VersionInfo) string {
	return fmt.Sprintf("%08d-%s-%s.json", v.ID, v.Time.UTC().Format(versionTimeLayout), v.Reason)
}

func parseVersionName(name string) (VersionInfo, bool) {
	base, ok := strings.CutSuffix(name, ".json")
	parts := strings.Split(base, "-")
	if !ok || len(parts) != 3 {
		return VersionInfo{}, false
	}
	id, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return VersionInfo{}, false
	}
	t, err := time.Parse(versionTimeLayout, parts[1])
	if err != nil {
		return VersionInfo{}, false
	}
	return VersionInfo{ID: id, Time: t, Reason: parts[2]}, true
}

func (d dirStorage) versions() ([]VersionInfo, error) {
	entries, err := os.ReadDir(d.historyDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var vs []VersionInfo
	for _, e := range entries {
		if v, ok := parseVersionName(e.Name()); ok && e.Type().IsRegular() {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, func(a, b VersionInfo) int { return cmpUint(a.ID, b.ID) })
	return vs, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (d dirStorage) file(id uint64) (string, error) {
	matches, err := filepath.Glob(filepath.Join(d.historyDir(), fmt.Sprintf("%08d-*.json", id)))
	if err != nil {
		return "", err
	}
	for _, m := range matches {
		if v, ok := parseVersionName(filepath.Base(m)); ok && v.ID == id {
			return m, nil
		}
	}
	return "", fmt.Errorf("version %d: %w", id, fs.ErrNotExist)
}

func (d dirStorage) readVersion(id uint64) ([]byte, error) {
	f, err := d.file(id)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(f)
}

func (d dirStorage) addVersion(v VersionInfo, data []byte) error {
	return writeFileAtomic(filepath.Join(d.historyDir(), versionName(v)), data)
}

func (d dirStorage) removeVersion(id uint64) error {
	f, err := d.file(id)
	if err != nil {
		return err
	}
	if err := checkWrite(f); err != nil {
		return err
	}
	if err := os.Remove(f); err != nil {
		return err
	}
	return atomicfile.SyncDir(d.historyDir())
}

func (d dirStorage) readPending() (*Pending, error) {
	b, err := os.ReadFile(d.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Pending
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("pending marker %s: %w", d.pendingPath(), err)
	}
	return &p, nil
}

func (d dirStorage) writePending(p *Pending) error {
	if p == nil {
		if err := checkWrite(d.pendingPath()); err != nil {
			return err
		}
		err := os.Remove(d.pendingPath())
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return atomicfile.SyncDir(d.dir())
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeFileAtomic(d.pendingPath(), append(b, '\n'))
}

// failWrite, when set (by tests), is asked before every write and removal
// of a file: a non-nil error fails it, as a full or read-only disk would.
var failWrite func(path string) error

func checkWrite(path string) error {
	if failWrite != nil {
		return failWrite(path)
	}
	return nil
}

// writeFileAtomic is atomicfile.Write behind the tests' failWrite hook.
func writeFileAtomic(path string, data []byte) error {
	if err := checkWrite(path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o600) // the config holds secrets (the PPPoE password)
}

// memStorage keeps everything in memory, for when /perm is unusable. The
// Store's lock guards it.
type memStorage struct {
	live    []byte
	vers    map[uint64]VersionInfo
	data    map[uint64][]byte
	pending *Pending
}

func newMemStorage() *memStorage {
	return &memStorage{vers: map[uint64]VersionInfo{}, data: map[uint64][]byte{}}
}

func (m *memStorage) readLive() ([]byte, error) {
	if m.live == nil {
		return nil, fs.ErrNotExist
	}
	return bytes.Clone(m.live), nil
}

func (m *memStorage) writeLive(data []byte) error {
	m.live = bytes.Clone(data)
	return nil
}

func (m *memStorage) versions() ([]VersionInfo, error) {
	vs := slices.Collect(maps.Values(m.vers))
	slices.SortFunc(vs, func(a, b VersionInfo) int { return cmpUint(a.ID, b.ID) })
	return vs, nil
}

func (m *memStorage) readVersion(id uint64) ([]byte, error) {
	b, ok := m.data[id]
	if !ok {
		return nil, fmt.Errorf("version %d: %w", id, fs.ErrNotExist)
	}
	return bytes.Clone(b), nil
}

func (m *memStorage) addVersion(v VersionInfo, data []byte) error {
	m.vers[v.ID] = v
	m.data[v.ID] = bytes.Clone(data)
	return nil
}

func (m *memStorage) removeVersion(id uint64) error {
	delete(m.vers, id)
	delete(m.data, id)
	return nil
}

func (m *memStorage) readPending() (*Pending, error) {
	if m.pending == nil {
		return nil, nil
	}
	p := *m.pending
	return &p, nil
}

func (m *memStorage) writePending(p *Pending) error {
	if p == nil {
		m.pending = nil
		return nil
	}
	c := *p
	m.pending = &c
	return nil
}
