package netnstest

import (
	"runtime"
	"testing"
)

// Go runs fn on a new goroutine whose OS thread is locked and switched
// into the namespace, for a server or client that blocks (sockets it opens
// are in the namespace). The returned wait blocks until fn has returned.
// The thread is never switched back: the runtime discards it when the
// goroutine ends. If the thread cannot enter, fn does not run and the test
// fails.
func (ns *Namespace) Go(t testing.TB, fn func()) (wait func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := setns(path(ns.name)); err != nil {
			t.Errorf("netnstest: entering %s: %v", ns.name, err)
			return
		}
		fn()
	}()
	return func() { <-done }
}
