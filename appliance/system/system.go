// Package system reports the box's identity, persistent storage and boot history, and the gokrazy environment it runs in.
package system

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"e1kbox/appliance/atomicfile"
)

// Perm describes the state of the persistent partition.
type Perm struct {
	Dir      string `json:"dir"`
	Writable bool   `json:"writable"`
	Error    string `json:"error,omitempty"`
	// Problem says, when Dir is not writable, why changes are not kept and
	// how to fix it (for the dashboard).
	Problem string `json:"problem,omitempty"`
}

// PermProblem explains an unwritable /perm. mounted says whether /perm is
// a mount point (from /proc/self/mountinfo).
func PermProblem(p Perm, mounted bool) string {
	if p.Writable {
		return ""
	}
	if !mounted {
		return "Changes are not kept: the persistent partition (the disk's 4th, /perm) is not mounted, so the box runs from its read-only image and forgets every change at reboot. " +
			"It has no file system gokrazy can mount: gok's `gok overwrite` leaves it unformatted (firmware build and firmware flash format it). " +
			"Fix: format it once with ext4 — on the host, before flashing an image file: mkfs.ext4 -F -L perm -E offset=$((2260992*512)) IMAGE <size of partition 4 in KiB>; " +
			"for a flashed disk attached to a Linux host: mkfs.ext4 -L perm /dev/sdX4 — or flash with `go run ./firmware flash`, which formats it. Then reboot the box."
	}
	return "Changes are not kept: /perm is mounted but not writable (" + p.Error + "). Check the disk (a full or damaged file system), then reboot the box."
}

// PermMounted reports whether dir is a mount point per a mountinfo file.
func PermMounted(mountinfo, dir string) bool {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
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
