package dataplane

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"e1kbox/tuning"
)

// threads knows which of the process's threads are workers' (pinned to
// their CPUs); every other one is housekeeping. mu also orders a
// worker's pinning against SetHousekeeping's walk, so that the walk never
// moves a thread that is being pinned.
var threads struct {
	mu     sync.Mutex
	pinned map[int]bool // thread ids
}

// pinThread pins the calling thread (locked to its goroutine) to cpu and
// marks it a worker's.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	threads.mu.Lock()
	defer threads.mu.Unlock()
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	if threads.pinned == nil {
		threads.pinned = map[int]bool{}
	}
	threads.pinned[unix.Gettid()] = true
	return nil
}

// unpinThread forgets the calling thread: its goroutine ends, and the
// thread it is locked to with it (its id may be reused).
func unpinThread() {
	threads.mu.Lock()
	defer threads.mu.Unlock()
	delete(threads.pinned, unix.Gettid())
}

// SetHousekeeping confines every thread of the process but the workers'
// to cpus, or, with cpus empty, lets them run on all of all (the CPU
// plan's CPUs). Threads the Go runtime starts later inherit the
// confinement: it starts them from a housekeeping thread (a goroutine
// locked to a worker's thread has its new threads started by the
// runtime's template thread). It returns how many threads it set.
func SetHousekeeping(cpus, all tuning.CPUSet) (int, error) {
	if len(cpus) == 0 {
		cpus = all
	}
	if len(cpus) == 0 {
		return 0, nil
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	threads.mu.Lock()
	defer threads.mu.Unlock()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, fmt.Errorf("housekeeping threads: %w", err)
	}
	n := 0
	var errs []error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil || threads.pinned[tid] {
			continue
		}
		switch err := unix.SchedSetaffinity(tid, &set); {
		case err == nil:
			n++
		case errors.Is(err, unix.ESRCH): // it ended meanwhile
		default:
			errs = append(errs, fmt.Errorf("thread %d: %w", tid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("housekeeping threads to CPUs %s: %w", cpus, err)
	}
	return n, nil
}
