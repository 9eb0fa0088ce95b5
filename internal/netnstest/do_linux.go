package netnstest

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Do runs fn on the calling goroutine with its OS thread locked and
// switched into the namespace, then switches the thread back and unlocks
// it, also when fn stops the test with t.FailNow. Sockets fn opens stay in
// the namespace; goroutines fn starts run on other threads, in the
// process's namespace. Call Do from the test's goroutine: it fails the
// test with t.Fatal when it cannot enter. If the thread cannot be switched
// back, it stays locked, so the runtime discards it when the goroutine
// ends, and the test fails (with t.Fatal, ending the goroutine now, when fn
// returned).
func (ns *Namespace) Do(t testing.TB, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("netnstest: opening this thread's network namespace: %v", err)
	}
	defer unix.Close(orig)
	if err := setns(path(ns.name)); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("netnstest: entering %s: %v", ns.name, err)
	}
	back := func() error {
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netnstest: switching the thread back from %s: %w (it stays locked, to be discarded)", ns.name, err)
		}
		runtime.UnlockOSThread()
		return nil
	}
	returned := false
	defer func() {
		if !returned { // fn called t.FailNow or panicked: the goroutine ends
			if err := back(); err != nil {
				t.Error(err)
			}
		}
	}()
	fn()
	returned = true
	if err := back(); err != nil {
		t.Fatal(err)
	}
}

// setns switches this thread into the network namespace at path.
func setns(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", path, err)
	}
	return nil
}
