package rules

import "syscall"

// threadCPU returns the CPU time of the calling thread in nanoseconds
// (lock the goroutine to its thread first), or -1.
func threadCPU() int64 {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
