//go:build linux && (amd64 || arm64)

package timesync

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The system clock is never changed by a test: these check the requests
// it would make, and read the kernel's state (modes 0) without changing it.

func TestStepTimex(t *testing.T) {
	for _, tc := range []struct {
		offset time.Duration
		want   unix.Timeval
	}{
		{3 * time.Second, unix.Timeval{Sec: 3, Usec: 0}},
		{1500 * time.Millisecond, unix.Timeval{Sec: 1, Usec: 500000}},
		// Negative offsets keep the microseconds in [0, 1e6): -1.25 s is
		// -2 s + 0.75 s.
		{-1250 * time.Millisecond, unix.Timeval{Sec: -2, Usec: 750000}},
		{-200 * time.Millisecond, unix.Timeval{Sec: -1, Usec: 800000}},
		{-1 * time.Second, unix.Timeval{Sec: -1, Usec: 0}},
		{-1400 * time.Nanosecond, unix.Timeval{Sec: -1, Usec: 999999}},
		{56 * 365 * 24 * time.Hour, unix.Timeval{Sec: 56 * 365 * 24 * 3600, Usec: 0}},
	} {
		got := stepTimex(tc.offset)
		want := unix.Timex{Modes: unix.ADJ_SETOFFSET, Time: tc.want}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stepTimex(%v) (-want +got):\n%s", tc.offset, diff)
		}
	}
}

func TestSlewTimex(t *testing.T) {
	for _, tc := range []struct {
		offset time.Duration
		want   int64
	}{
		{40 * time.Millisecond, 40000},
		{-127*time.Millisecond - 500*time.Microsecond, -127500},
		{1500 * time.Nanosecond, 1},
	} {
		want := unix.Timex{Modes: unix.ADJ_OFFSET_SINGLESHOT, Offset: tc.want}
		if diff := cmp.Diff(want, slewTimex(tc.offset)); diff != "" {
			t.Errorf("slewTimex(%v) (-want +got):\n%s", tc.offset, diff)
		}
	}
}

func TestSyncedTimex(t *testing.T) {
	got := syncedTimex(unix.STA_UNSYNC|unix.STA_PLL|0x2000 /* STA_NANO, read-only */, 30*time.Millisecond, 2*time.Millisecond)
	want := unix.Timex{
		Modes:    unix.ADJ_STATUS | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR,
		Status:   unix.STA_PLL | 0x2000,
		Maxerror: 30000,
		Esterror: 2000,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("syncedTimex (-want +got):\n%s", diff)
	}
}

// TestAdjtimexReadable checks that the kernel answers a read-only adjtimex
// with the state the client's requests build on.
func TestAdjtimexReadable(t *testing.T) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		t.Fatalf("adjtimex(modes 0): %v", err)
	}
	if state < unix.TIME_OK || state > unix.TIME_ERROR {
		t.Errorf("adjtimex state %d, want TIME_OK..TIME_ERROR", state)
	}
	if synced, errState := tx.Status&unix.STA_UNSYNC == 0, state == unix.TIME_ERROR; synced && errState {
		t.Errorf("adjtimex: STA_UNSYNC clear but state TIME_ERROR (status %#x)", tx.Status)
	}
}
