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
// test with t.Fatal when it cannot enter (goroutines a test starts use In,
// which returns errors instead). If the thread cannot be switched back, it
// stays locked, so the runtime discards it when the goroutine ends, and
// the test fails (with t.Fatal, ending the goroutine now, when fn
// returned).
func (ns *Namespace) Do(t testing.TB, fn func()) {
	t.Helper()
	back, err := ns.enter()
	if err != nil {
		t.Fatal(err)
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

// In runs fn as Do does and returns fn's error, or why the thread could
// not enter the namespace or be switched back (it then stays locked, to be
// discarded). It never stops a test, so goroutines a test starts (a flood,
// a server) use it and report what it returns.
func (ns *Namespace) In(fn func() error) error {
	back, err := ns.enter()
	if err != nil {
		return err
	}
	ferr := fn()
	if err := back(); err != nil {
		return fmt.Errorf("%w (after fn: %v)", err, ferr)
	}
	return ferr
}

// enter locks the calling goroutine's thread and switches it into the
// namespace; back switches it back and unlocks it.
func (ns *Namespace) enter() (back func() error, err error) {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netnstest: opening this thread's network namespace: %w", err)
	}
	if err := setns(path(ns.name)); err != nil {
		unix.Close(orig)
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netnstest: entering %s: %w", ns.name, err)
	}
	return func() error {
		defer unix.Close(orig)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netnstest: switching the thread back from %s: %w (it stays locked, to be discarded)", ns.name, err)
		}
		runtime.UnlockOSThread()
		return nil
	}, nil
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
