package offload

import (
	"testing"
	"time"
)

// TestTurnsFor: a flow's turns come at least twice within its idle time,
// as rarely as that allows, at most every MaxTurns harvests.
func TestTurnsFor(t *testing.T) {
	for _, tc := range []struct {
		idle time.Duration
		want uint8
	}{
		{0, 1},
		{time.Second, 1},
		{2 * time.Second, 2},
		{3 * time.Second, 2},
		{5 * time.Second, 4},  // the shortest offloaded timeout's (10 s) half
		{15 * time.Second, 8}, // a UDP exchange's (30 s)
		{Idle, 16},            // TCP, UDP streams, bridged pairs
		{300 * time.Second, MaxTurns},
	} {
		got := turnsFor(int64(tc.idle))
		if got != tc.want {
			t.Errorf("turnsFor(%v) = %d, want %d", tc.idle, got, tc.want)
		}
		if period := time.Duration(got) * HarvestInterval; got > 1 && period > tc.idle/2 {
			t.Errorf("turnsFor(%v): a turn every %v, more than half the idle time", tc.idle, period)
		}
	}
}

// TestDue: over any run of harvests, a slot has its turn exactly once in
// every turns consecutive ones, and each harvest takes 1/turns of the
// slots.
func TestDue(t *testing.T) {
	const slots = 64
	for _, turns := range []uint8{1, 2, 4, 8, 16} {
		for s := uint32(0); s < slots; s++ {
			var last uint32
			seen := false
			for h := uint32(5); h < 5+4*MaxTurns; h++ {
				if !due(s, h, turns) {
					continue
				}
				if seen && h-last != uint32(turns) {
					t.Errorf("turns %d, slot %d: turns at harvests %d and %d", turns, s, last, h)
				}
				last, seen = h, true
			}
			if !seen {
				t.Errorf("turns %d, slot %d: never due", turns, s)
			}
		}
		for h := uint32(0); h < MaxTurns; h++ {
			n := 0
			for s := uint32(0); s < slots; s++ {
				if due(s, h, turns) {
					n++
				}
			}
			if n != slots/int(turns) {
				t.Errorf("turns %d, harvest %d: %d slots due, want %d", turns, h, n, slots/int(turns))
			}
		}
	}
}
