package boxupdate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"e1kbox/appliance/atomicfile"
	"e1kbox/firmware/bootpart"
)

// Build identifies a build on the box.
type Build struct {
	Timestamp string `json:"timestamp,omitempty"` // gokrazy's BuildTimestamp
	SBOMHash  string `json:"sbom_hash,omitempty"`
	Root      int    `json:"root"` // the root partition it runs from
}

// Outcomes of an update.
const (
	Installing = "installing" // writing the new build while the old one runs
	Testing    = "testing"    // test-booting the new build
	Committed  = "committed"
	Reverted   = "reverted"
	Failed     = "failed" // refused or failed before anything was tried
)

// Step is one timed phase of an update.
type Step struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Record is one update: written when it starts (pending.json), completed
// by the guard at the next boot (last.json).
type Record struct {
	ID          string    `json:"id"`
	Client      string    `json:"client"` // "dashboard", "firmware update", or "gokrazy" for an update the guard found
	From        Build     `json:"from"`
	To          Build     `json:"to"`
	BootWritten bool      `json:"boot_written"` // a new boot file system was written (the kernel or its files changed)
	Outcome     string    `json:"outcome"`
	Reason      string    `json:"reason,omitempty"`
	Steps       []Step    `json:"steps"`
	Started     time.Time `json:"started"`
	Rebooted    time.Time `json:"rebooted,omitzero"`
	Finished    time.Time `json:"finished,omitzero"`
	// HealthTimeout is how long the test boot has to become healthy.
	HealthTimeout Duration `json:"health_timeout"`
	// Commit makes the new build the one the firmware boots; Revert undoes
	// a commit torn after its first write (pending records only).
	Commit []bootpart.Write `json:"commit,omitempty"`
	Revert []bootpart.Write `json:"revert,omitempty"`
}

func (r *Record) step(name string, since time.Time) {
	r.Steps = append(r.Steps, Step{name, time.Since(since).Round(time.Millisecond).Seconds()})
}

// Duration is a time.Duration that reads and writes as "90s".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Confirmed is the build the guard last found healthy.
type Confirmed struct {
	Build
	Time time.Time `json:"time"`
}

// State is the update state directory on /perm.
type State struct{ Dir string }

func (s State) path(name string) string { return filepath.Join(s.Dir, name) }

// Pending, Last and Confirmed read the records (nil if absent).
func (s State) Pending() (*Record, error) { return readJSON[Record](s.path("pending.json")) }
func (s State) Last() (*Record, error)    { return readJSON[Record](s.path("last.json")) }
func (s State) Confirmed() (*Confirmed, error) {
	return readJSON[Confirmed](s.path("confirmed.json"))
}

// SavePending writes the record of an update in progress.
func (s State) SavePending(r *Record) error { return writeJSON(s.path("pending.json"), r) }

// Finish records r's outcome as the last update and drops the pending one.
func (s State) Finish(r *Record) error {
	r.Commit, r.Revert = nil, nil
	if r.Finished.IsZero() {
		r.Finished = time.Now().UTC()
	}
	if err := writeJSON(s.path("last.json"), r); err != nil {
		return err
	}
	if err := os.Remove(s.path("pending.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(s.Dir)
}

// Confirm records b as the build to return to.
func (s State) Confirm(b Build) error {
	return writeJSON(s.path("confirmed.json"), &Confirmed{Build: b, Time: time.Now().UTC()})
}

// Writable checks the directory can hold records (/perm mounted and
// writable).
func (s State) Writable() error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.Dir, ".probe-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

func readJSON[T any](file string) (*T, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &v, nil
}

// writeJSON replaces file atomically (atomicfile: temp file, fsync,
// rename, fsync dir), making its directory first.
func writeJSON(file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(file, append(b, '\n'), 0o644)
}

// IsWritable is Writable as a bool.
func (s State) IsWritable() bool { return s.Writable() == nil }
