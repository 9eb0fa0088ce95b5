package timesync

import "time"

// Clock is the clock the client keeps right. System returns the real one;
// tests pass a fake that records what it is told.
type Clock interface {
	// Now reads the clock.
	Now() time.Time
	// Step jumps the clock by offset at once.
	Step(offset time.Duration) error
	// Slew makes the clock run slightly fast or slow until it has gained
	// offset, replacing any slew still in progress.
	Slew(offset time.Duration) error
	// MarkSynced records that the clock was just set from a server, with a
	// worst-case error of maxError and an expected error of estError.
	MarkSynced(maxError, estError time.Duration) error
}

// System returns the system clock (CLOCK_REALTIME). On Linux it steps with
// adjtimex(ADJ_SETOFFSET), which adds the offset atomically in the kernel
// (no read-modify-write race as with clock_settime), slews with
// adjtimex(ADJ_OFFSET_SINGLESHOT), the kernel's adjtime at 500 ppm, and
// marks the clock synchronized the way NTP daemons do: it clears
// STA_UNSYNC and sets the kernel's maxerror/esterror. The kernel then
// reports TIME_OK instead of TIME_ERROR from adjtimex, and (with
// CONFIG_RTC_SYSTOHC, which gokrazy's kernel.amd64 has) copies the system
// time to the RTC every 11 minutes. Changing the clock needs CAP_SYS_TIME.
func System() Clock { return systemClock{} }

// systemClock is the real clock; the client recognises it to let the NTP
// library use the kernel's receive timestamps.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
