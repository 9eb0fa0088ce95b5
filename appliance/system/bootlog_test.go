package system

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBootLogClockSet(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	file := filepath.Join(t.TempDir(), "boots.json")
	wrong := time.Date(2000, 1, 1, 0, 0, 5, 0, time.UTC) // what an unset RTC says
	if _, err := RecordBoot(file, "old", wrong.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	b := NewBootLog(log, file, "new", wrong)
	want := []Boot{{Build: "old", Time: wrong.Add(-time.Hour)}, {Build: "new", Time: wrong}}
	if diff := cmp.Diff(want, b.List()); diff != "" {
		t.Fatalf("at the start (-want +got):\n%s", diff)
	}

	// The clock is never set: the record stays as it is.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.CorrectWhenClockSet(ctx, func(ctx context.Context) error { return ctx.Err() })
	if diff := cmp.Diff(want, b.List()); diff != "" {
		t.Errorf("after a wait that failed (-want +got):\n%s", diff)
	}

	// Set 90 s after the start: the start was 90 s before the set clock's
	// reading, on the list and in the file.
	set := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b.clockSet(set, 90*time.Second)
	want[1] = Boot{Build: "new", Time: set.Add(-90 * time.Second), ClockSet: true}
	if diff := cmp.Diff(want, b.List()); diff != "" {
		t.Errorf("after the clock was set (-want +got):\n%s", diff)
	}
	saved, err := ReadBoots(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, saved); diff != "" {
		t.Errorf("the file (-want +got):\n%s", diff)
	}
}

func TestBootLogUnwritable(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	file := filepath.Join(dir, "boots.json", "x") // a path under a file cannot be written
	if err := SaveBoots(filepath.Join(dir, "boots.json"), nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := NewBootLog(log, file, "b", start)
	b.CorrectWhenClockSet(context.Background(), func(context.Context) error { return nil })
	got := b.List()
	if len(got) != 1 || got[0].Build != "b" || !got[0].ClockSet || got[0].Time.Before(start.Add(-time.Second)) {
		t.Errorf("boots %+v: want this start, on the set clock, kept in memory", got)
	}
}
