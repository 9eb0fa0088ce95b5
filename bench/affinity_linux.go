package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// keepOff moves this process's floating threads off CPU cpu: those
// allowed on cpu and on at least one other CPU. They are the Go runtime's
// (sysmon above all, which sleeps 20 µs to 10 ms at a time while the
// generator's thread makes system calls, and the netpoller's idle
// threads): left alone, the scheduler puts them on the box's receive CPU
// whenever that CPU idles, and their wake-ups (about 200/s at 200 kpps,
// perf of the timers on that CPU) count as the box's. Threads pinned to
// one CPU (the generator, the latency reader) stay where they are.
// Threads created meanwhile inherit the narrower set. The returned
// function lets every thread still on the narrower set back onto the CPUs
// it had (all of online for the new ones). It does nothing when cpu < 0
// or no other CPU is online.
func keepOff(cpu int, online []int) (func(), error) {
	var others unix.CPUSet
	for _, c := range online {
		if c != cpu {
			others.Set(c)
		}
	}
	if cpu < 0 || others.Count() == 0 {
		return func() {}, nil
	}
	var all unix.CPUSet
	for _, c := range online {
		all.Set(c)
	}
	moved := map[int]unix.CPUSet{}
	// Two passes: a thread created during the first by one not yet moved
	// inherits the wide set.
	for range 2 {
		tids, err := threads()
		if err != nil {
			return nil, err
		}
		for _, tid := range tids {
			var set unix.CPUSet
			if unix.SchedGetaffinity(tid, &set) != nil || !set.IsSet(cpu) || set.Count() < 2 {
				continue // gone, pinned, or not on cpu
			}
			if err := unix.SchedSetaffinity(tid, &others); err != nil {
				if err == unix.ESRCH {
					continue
				}
				return nil, fmt.Errorf("keep thread %d off cpu%d: %w", tid, cpu, err)
			}
			moved[tid] = set
		}
	}
	return func() {
		tids, _ := threads()
		for _, tid := range tids {
			var set unix.CPUSet
			if unix.SchedGetaffinity(tid, &set) != nil || set != others {
				continue
			}
			old, ok := moved[tid]
			if !ok {
				old = all
			}
			unix.SchedSetaffinity(tid, &old)
		}
	}, nil
}

// threads lists this process's thread ids.
func threads() ([]int, error) { return taskIDs("/proc/self/task") }

// taskIDs lists the thread ids under dir (a /proc/PID/task).
func taskIDs(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
