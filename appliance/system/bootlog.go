package system

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// BootLog is the boot history with this start in it: recorded at once
// with the time the box's clock says, and corrected once the NTP client
// has set the clock — a box whose RTC is unset or wrong starts on the
// wrong date, and the start instant is then known only after the fact
// (the clock's step does not move the monotonic time since the start).
type BootLog struct {
	log   *slog.Logger
	file  string
	start time.Time // with its monotonic reading

	mu    sync.Mutex
	boots []Boot
}

// NewBootLog records this start (of build, at start) in file's history
// and returns the history.
func NewBootLog(log *slog.Logger, file, build string, start time.Time) *BootLog {
	b := &BootLog{log: log, file: file, start: start}
	boots, err := RecordBoot(file, build, start)
	if err != nil {
		log.Warn("boot history not saved", "err", err)
	}
	b.boots = boots
	return b
}

// List returns the history, oldest first.
func (b *BootLog) List() []Boot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.boots)
}

// CorrectWhenClockSet waits for the clock (wait returns nil once the NTP
// client set it) and then puts this start's record on the set clock.
func (b *BootLog) CorrectWhenClockSet(ctx context.Context, wait func(context.Context) error) {
	if err := wait(ctx); err != nil {
		return
	}
	b.clockSet(time.Now(), time.Since(b.start))
}

// clockSet corrects this start's record: now is a reading of the set
// clock, and the start was elapsed (monotonic time) before it.
func (b *BootLog) clockSet(now time.Time, elapsed time.Duration) {
	at := now.Round(0).Add(-elapsed).UTC()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.boots)
	if n == 0 {
		return
	}
	old := b.boots[n-1].Time
	b.boots[n-1].Time, b.boots[n-1].ClockSet = at, true
	if err := SaveBoots(b.file, b.boots); err != nil {
		b.log.Warn("boot history not saved", "err", err)
	}
	if d := at.Sub(old); d > time.Second || d < -time.Second {
		b.log.Info("boot time corrected on the set clock", "was", old, "now", at)
	}
}
