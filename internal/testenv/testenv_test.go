package testenv

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMissing(t *testing.T) {
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		needs []string
		want  []string
	}{
		{needs: []string{"sh", "/"}, want: nil},
		{needs: []string{"no-such-program-e1kbox", "/no/such/path", "sh"}, want: []string{"no-such-program-e1kbox", "/no/such/path"}},
		{needs: []string{"root"}, want: map[bool][]string{true: nil, false: {"root"}}[root]},
	} {
		if diff := cmp.Diff(tc.want, Missing(tc.needs...)); diff != "" {
			t.Errorf("Missing(%q) (-want +got):\n%s", tc.needs, diff)
		}
	}
}

// recorder is a testing.TB that records how the test was stopped.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = format }
func (r *recorder) Skip(args ...any)                  { r.skip = "skip" }

func TestUnavailable(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Unavailable(r, "needs a thing")
		if got := r.fatal != ""; got != (ci == "true") || (r.skip != "") != (ci != "true") {
			t.Errorf("CI=%q: fatal %q, skip %q; want a failure only under CI=true, else a skip", ci, r.fatal, r.skip)
		}
	}
}
