package rules

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time of the calling thread in nanoseconds
// (lock the goroutine to its thread first), or -1. It reads the
// scheduler's exact per-thread clock: getrusage(RUSAGE_THREAD) splits tick
// samples and was off by milliseconds, as much as a short benchmark takes.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return ts.Nano()
}
