package main

import (
	"math"
	"testing"
)

// TestBoxBusy: the receive CPU's busy time (wall minus idle), plus the
// appliance's threads off it that ran in the window (a thread that came
// or went meanwhile does not count), minus the generator's thread on it.
func TestBoxBusy(t *testing.T) {
	a := boxTimes{rx: CPUTimes{Idle: 100}, threads: map[int]int64{10: 1e9, 11: 5e9, 12: 0}, gen: 2e9}
	b := boxTimes{rx: CPUTimes{Idle: 100 + 150}, threads: map[int]int64{10: 1.2e9, 11: 5.1e9, 13: 7e9}, gen: 2.4e9}
	// 2 s of wall time, 1.5 s idle: 0.5 s busy; +0.2 +0.1 (12 went, 13
	// came); -0.4 of the generator.
	if got, want := boxBusy(a, b, 2), 0.5+0.3-0.4; math.Abs(got-want) > 1e-9 {
		t.Errorf("boxBusy = %v, want %v", got, want)
	}
	a.gen, b.gen = -1, -1 // the generator on another CPU
	if got, want := boxBusy(a, b, 2), 0.8; math.Abs(got-want) > 1e-9 {
		t.Errorf("boxBusy without the generator = %v, want %v", got, want)
	}
}

func TestAllowsCPU(t *testing.T) {
	for _, tc := range []struct {
		status string
		cpu    int
		want   bool
	}{
		{"Name:\tappliance\nCpus_allowed_list:\t1\n", 0, false},
		{"Name:\tappliance\nCpus_allowed_list:\t1\n", 1, true},
		{"Cpus_allowed_list:\t0-3\n", 2, true},
		{"Cpus_allowed_list:\t0,2\n", 1, false},
		{"Name:\tx\n", 0, true}, // cannot tell
	} {
		if got := allowsCPU([]byte(tc.status), tc.cpu); got != tc.want {
			t.Errorf("allowsCPU(%q, %d) = %v, want %v", tc.status, tc.cpu, got, tc.want)
		}
	}
}
