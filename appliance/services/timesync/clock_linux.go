//go:build linux && (amd64 || arm64)

package timesync

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

func (systemClock) Step(offset time.Duration) error {
	tx := stepTimex(offset)
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("step clock by %v: adjtimex(ADJ_SETOFFSET): %w", offset, err)
	}
	return nil
}

func (systemClock) Slew(offset time.Duration) error {
	tx := slewTimex(offset)
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("slew clock by %v: adjtimex(ADJ_OFFSET_SINGLESHOT): %w", offset, err)
	}
	return nil
}

func (systemClock) MarkSynced(maxError, estError time.Duration) error {
	var tx unix.Timex // Modes 0: read only
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("read kernel clock status: adjtimex: %w", err)
	}
	tx = syncedTimex(tx.Status, maxError, estError)
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("mark clock synchronized: adjtimex(ADJ_STATUS): %w", err)
	}
	return nil
}

// stepTimex asks the kernel to add offset, rounded to the microsecond, to
// the clock. Without ADJ_NANO the kernel reads Time as seconds and
// microseconds, the microseconds in [0, 1e6) also for a negative offset.
func stepTimex(offset time.Duration) unix.Timex {
	us := offset.Round(time.Microsecond).Microseconds()
	sec, usec := us/1e6, us%1e6
	if usec < 0 {
		sec, usec = sec-1, usec+1e6
	}
	return unix.Timex{Modes: unix.ADJ_SETOFFSET, Time: unix.Timeval{Sec: sec, Usec: usec}}
}

// slewTimex asks the kernel to slew by offset (in microseconds).
func slewTimex(offset time.Duration) unix.Timex {
	return unix.Timex{Modes: unix.ADJ_OFFSET_SINGLESHOT, Offset: offset.Microseconds()}
}

// syncedTimex clears STA_UNSYNC in status, keeping its other bits (the
// kernel ignores the read-only ones), and sets maxerror and esterror.
func syncedTimex(status int32, maxError, estError time.Duration) unix.Timex {
	return unix.Timex{
		Modes:    unix.ADJ_STATUS | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR,
		Status:   status &^ unix.STA_UNSYNC,
		Maxerror: maxError.Microseconds(),
		Esterror: estError.Microseconds(),
	}
}
