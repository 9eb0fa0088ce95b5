package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixture is a running server with all fakes.
type fixture struct {
	t     *testing.T
	srv   *Server
	ts    *httptest.Server
	stats *fakeStats
	store *fakeStore
	ct    *fakeConntrack
	pw    string
}

const testPassword = "s3cret-Pa55"

// writePassword writes a password file and returns its path.
func writePassword(t testing.TB, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gokr-pw.txt")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// newFixture starts a server with every fake and its publisher; edit
// adjusts the options.
func newFixture(t *testing.T, edit func(*Options)) *fixture {
	t.Helper()
	return startFixture(t, edit, true)
}

// startFixture is newFixture; without run the test publishes itself.
func startFixture(t *testing.T, edit func(*Options), run bool) *fixture {
	t.Helper()
	f := &fixture{t: t, stats: newFakeStats(), store: newFakeStore(), ct: newFakeConntrack(1000), pw: testPassword}
	opts := Options{
		Stats:         f.stats,
		Config:        f.store,
		Rules:         newFakeRules(f.store),
		Conntrack:     f.ct,
		FDB:           testFDB,
		Tuning:        testTuning,
		System:        fakeSystem{started: time.Now().Add(-26 * time.Hour)},
		PasswordFiles: []string{filepath.Join(t.TempDir(), "missing"), writePassword(t, f.pw)},
		CertFile:      "-",
		KeyFile:       "-",
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&opts)
	}
	if c, ok := opts.Conntrack.(*fakeConntrack); ok {
		f.ct = c
	}
	if s, ok := opts.Stats.(*fakeStats); ok {
		f.stats = s
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if run {
			srv.Run(ctx)
		}
	}()
	f.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		cancel()
		<-done
		f.ts.Close()
		f.store.stop()
	})
	return f
}

// on returns the fixture for a subtest: its helpers fail t, which runs on
// the subtest's goroutine, not the test that made the fixture.
func (f *fixture) on(t *testing.T) *fixture {
	g := *f
	g.t = t
	return &g
}

// req sends a request with the right credentials (and the CSRF header for
// mutations) unless headers say otherwise; "Authorization: -" removes it.
func (f *fixture) req(method, path string, body []byte, headers ...string) *http.Response {
	f.t.Helper()
	r, err := http.NewRequest(method, f.ts.URL+path, bytesReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	r.SetBasicAuth(User, f.pw)
	if method != http.MethodGet {
		r.Header.Set(CSRFHeader, "1")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "-" {
			r.Header.Del(headers[i])
		} else {
			r.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := f.ts.Client().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { res.Body.Close() })
	return res
}

// getJSON fetches path and decodes the answer into v, failing on a status
// other than want.
func (f *fixture) doJSON(method, path string, body []byte, want int, v any, headers ...string) {
	f.t.Helper()
	res := f.req(method, path, body, headers...)
	b := readAll(f.t, res)
	if res.StatusCode != want {
		f.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			f.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

func bytesReader(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}

func readAll(t testing.TB, res *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
