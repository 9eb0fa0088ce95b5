// Package system reports the box's persistent storage and boot history.
package system

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"e1kbox/appliance/atomicfile"
)

// Perm describes the state of the persistent partition.
type Perm struct {
	Dir      string `json:"dir"`
	Writable bool   `json:"writable"`
	Error    string `json:"error,omitempty"`
}

// CheckPerm reports whether dir (normally /perm/e1kbox) can be written:
// it creates dir and writes, syncs and removes a probe file.
func CheckPerm(dir string) Perm {
	p := Perm{Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.Error = err.Error()
		return p
	}
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString("probe")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Writable = true
	return p
}

// Boot is one start of the appliance. ClockSet says Time is on a clock
// the NTP client set (the start instant, corrected after the fact); a
// boot without it has the time the box's clock said at the start, which
// a lost or unset RTC makes wrong.
type Boot struct {
	Build    string    `json:"build"`
	Time     time.Time `json:"time"`
	ClockSet bool      `json:"clockSet"`
}

// MaxBoots is how many boot records are kept.
const MaxBoots = 20

// RecordBoot appends a boot record to the history file and returns the
// history (oldest first). The file is replaced atomically.
func RecordBoot(file, build string, now time.Time) ([]Boot, error) {
	boots, err := ReadBoots(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		// a damaged history is replaced, not fatal
		boots = nil
	}
	boots = append(boots, Boot{Build: build, Time: now.UTC()})
	if len(boots) > MaxBoots {
		boots = boots[len(boots)-MaxBoots:]
	}
	return boots, SaveBoots(file, boots)
}

// SaveBoots replaces the history file with boots.
func SaveBoots(file string, boots []Boot) error {
	b, err := json.MarshalIndent(boots, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("saving boot history: %w", err)
	}
	if err := atomicfile.Write(file, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("saving boot history: %w", err)
	}
	return nil
}

// ReadBoots reads the boot history.
func ReadBoots(file string) ([]Boot, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var boots []Boot
	if err := json.Unmarshal(b, &boots); err != nil {
		return nil, fmt.Errorf("boot history %s: %w", file, err)
	}
	return boots, nil
}
