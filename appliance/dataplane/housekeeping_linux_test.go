package dataplane

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"e1kbox/tuning"
)

// TestSetHousekeeping: the walk confines the process's threads to the
// housekeeping CPUs but leaves a worker's pinned thread where it is, and
// an empty set gives them all CPUs back.
func TestSetHousekeeping(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var cpus tuning.CPUSet
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	house, work := tuning.CPUSet{cpus[0]}, cpus[len(cpus)-1]
	t.Cleanup(func() { SetHousekeeping(nil, cpus) })

	// A worker's thread: pinned, then it reports its CPUs once released.
	// The test joins it, also when it fails before releasing it.
	pinned := make(chan int, 1)
	release := make(chan struct{})
	done := make(chan struct{})
	var pinErr error
	var workerCPUs unix.CPUSet
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer unpinThread()
		pinErr = pinThread(work)
		pinned <- unix.Gettid()
		<-release
		unix.SchedGetaffinity(0, &workerCPUs)
	}()
	var releaseOnce sync.Once
	stop := func() {
		releaseOnce.Do(func() { close(release) })
		<-done
	}
	t.Cleanup(stop)
	tid := <-pinned
	if pinErr != nil {
		t.Fatalf("pinning the worker's thread: %v", pinErr)
	}
	n, err := SetHousekeeping(house, cpus)
	if err != nil || n == 0 {
		t.Fatalf("SetHousekeeping(%v) = %d, %v; want threads set", house, n, err)
	}
	// Every thread but the worker's is on the housekeeping CPU now.
	runtime.LockOSThread()
	var mine unix.CPUSet
	unix.SchedGetaffinity(0, &mine)
	runtime.UnlockOSThread()
	if mine.Count() != 1 || !mine.IsSet(house[0]) {
		t.Errorf("a housekeeping thread's CPUs: %d CPUs, cpu%d set %v; want only cpu%d", mine.Count(), house[0], mine.IsSet(house[0]), house[0])
	}
	stop()
	if w := workerCPUs; w.Count() != 1 || !w.IsSet(work) {
		t.Errorf("the worker's thread %d: %d CPUs, cpu%d set %v; want only its own cpu%d", tid, w.Count(), work, w.IsSet(work), work)
	}
	if _, err := SetHousekeeping(nil, cpus); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	unix.SchedGetaffinity(0, &mine)
	runtime.UnlockOSThread()
	if mine.Count() != len(cpus) {
		t.Errorf("after SetHousekeeping(nil): %d CPUs, want all %d", mine.Count(), len(cpus))
	}
}
