package netnstest

import (
	"testing"
	"time"
)

// WaitFor polls cond every 50 ms until it holds, and fails the test with
// what if it does not within d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
