package main

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKeepOff moves the floating threads off a CPU and back, leaves a
// thread pinned to that CPU alone, and lets a thread created meanwhile
// back onto every CPU.
func TestKeepOff(t *testing.T) {
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := online[0]

	// A thread pinned to cpu, as the generator is when it shares the
	// receive CPU.
	pinned := make(chan int)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Errorf("pin: %v", err)
		}
		pinned <- unix.Gettid()
		<-release
		var all unix.CPUSet
		for _, c := range online {
			all.Set(c)
		}
		unix.SchedSetaffinity(0, &all)
	})
	pinnedTid := <-pinned
	defer func() { close(release); wg.Wait() }()

	back, err := keepOff(cpu, online)
	if err != nil {
		t.Fatal(err)
	}
	// A thread started now (a locked goroutine while the others are
	// busy) inherits the narrower set.
	started := make(chan int)
	done := make(chan struct{})
	wg.Go(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		started <- unix.Gettid()
		<-done
	})
	newTid := <-started
	closeDone := sync.OnceFunc(func() { close(done) })
	defer closeDone() // before wg.Wait above, on a failed check too

	onCPU := func(tid int) (bool, int) {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			t.Fatalf("affinity of %d: %v", tid, err)
		}
		return set.IsSet(cpu), set.Count()
	}
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		on, n := onCPU(tid)
		switch {
		case tid == pinnedTid:
			if !on || n != 1 {
				t.Errorf("pinned thread %d: on cpu%d %v, %d CPUs; want pinned still", tid, cpu, on, n)
			}
		case len(online) > 1 && on:
			t.Errorf("thread %d may still run on cpu%d", tid, cpu)
		}
	}
	back()
	if on, n := onCPU(newTid); !on || n != len(online) {
		t.Errorf("thread %d started meanwhile: on cpu%d %v, %d CPUs after; want all %d", newTid, cpu, on, n, len(online))
	}
	if on, n := onCPU(pinnedTid); !on || n != 1 {
		t.Errorf("pinned thread after: on cpu%d %v, %d CPUs; want pinned still", cpu, on, n)
	}
	closeDone()
	if len(online) == 1 {
		t.Logf("one CPU online: keepOff had nothing to move")
	}
}
