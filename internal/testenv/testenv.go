// Package testenv checks that a test's environment has what the test needs: a missing need skips the test, or fails it under CI=true, where every test must run.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Missing returns the needs the environment lacks. A need is "root" (the
// effective user is root), an absolute path (it exists) or a program name
// (it is on PATH).
func Missing(needs ...string) []string {
	var missing []string
	for _, n := range needs {
		ok := true
		switch {
		case n == "root":
			ok = os.Geteuid() == 0
		case strings.HasPrefix(n, "/"):
			_, err := os.Stat(n)
			ok = err == nil
		default:
			_, err := exec.LookPath(n)
			ok = err == nil
		}
		if !ok {
			missing = append(missing, n)
		}
	}
	return missing
}

// Require stops the test unless every need is met (see Missing): with a
// failure under CI=true, else with a skip.
func Require(t testing.TB, needs ...string) {
	t.Helper()
	if m := Missing(needs...); len(m) > 0 {
		Unavailable(t, "test needs "+strings.Join(m, ", ")+" (make deps installs the tools)")
	}
}

// Unavailable stops a test that cannot run here, saying why: a failure
// under CI=true (CI must run every test), a skip elsewhere.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipping)", why)
		return
	}
	t.Skip(why)
}
