package webui

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLoginGuard: wrong passwords past the free ones are answered 429 for
// a doubling backoff, per client address; they are logged, rate-limited;
// the right password clears the record; requests without credentials do
// not count.
func TestLoginGuard(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	now := time.Unix(1e9, 0)
	f.srv.guard.now = func() time.Time { return now }
	get := func(remote, pw string, creds bool) int {
		r := httptest.NewRequest("GET", "/api/info", nil)
		r.RemoteAddr = remote
		if creds {
			r.SetBasicAuth(User, pw)
		}
		w := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(w, r)
		return w.Code
	}
	const attacker, owner, local = "198.51.100.7:4000", "192.168.1.20:5000", "127.0.0.1:6000"
	for range 2 * freeFailures {
		if c := get(local, "guess", true); c != http.StatusUnauthorized {
			t.Fatalf("loopback client: %d, want 401 (never refused)", c)
		}
	}
	for range 20 {
		if c := get(attacker, "", false); c != http.StatusUnauthorized {
			t.Fatalf("no credentials: %d, want 401", c)
		}
	}
	for i := range freeFailures {
		if c := get(attacker, "guess", true); c != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i+1, c)
		}
	}
	if c := get(attacker, "guess", true); c != http.StatusUnauthorized {
		t.Fatalf("the failure that starts the backoff: %d, want 401", c)
	}
	// Now refused, even with the right password, until the backoff ends.
	if c := get(attacker, testPassword, true); c != http.StatusTooManyRequests {
		t.Errorf("right password during the backoff: %d, want 429", c)
	}
	if c := get(owner, testPassword, true); c != http.StatusOK {
		t.Errorf("another client: %d, want 200", c)
	}
	now = now.Add(1100 * time.Millisecond)
	if c := get(attacker, "guess", true); c != http.StatusUnauthorized {
		t.Errorf("after the first backoff: %d, want 401", c)
	}
	now = now.Add(1100 * time.Millisecond) // the backoff doubled to 2 s
	if c := get(attacker, testPassword, true); c != http.StatusTooManyRequests {
		t.Errorf("the backoff did not double: %d", c)
	}
	now = now.Add(time.Second)
	if c := get(attacker, testPassword, true); c != http.StatusOK {
		t.Errorf("right password after the backoff: %d, want 200", c)
	}
	if c := get(attacker, "guess", true); c != http.StatusUnauthorized {
		t.Errorf("a failure after a success starts over: %d, want 401", c)
	}
	if n := strings.Count(logs.String(), "failed login"); n != 3 {
		t.Errorf("%d failed-login log lines, want 3 (one per minute and address):\n%s", n, &logs)
	}
	if got := f.srv.guard.failed.Load(); got != 3*freeFailures+3 {
		t.Errorf("failed logins counted %d, want %d", got, 3*freeFailures+3)
	}
}

// TestLoginGuardBounded: a flood from many addresses keeps the table at
// maxTracked.
func TestLoginGuardBounded(t *testing.T) {
	g := newLoginGuard(slog.New(slog.DiscardHandler))
	for i := range maxTracked + 500 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		g.fail(r)
	}
	if n := len(g.byIP); n > maxTracked {
		t.Errorf("%d addresses tracked, want at most %d", n, maxTracked)
	}
}
