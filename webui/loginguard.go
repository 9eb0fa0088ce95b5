package webui

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the login guard.
const (
	// freeFailures wrong passwords from one address are let through
	// without delay; from then on each one blocks the address for a
	// backoff that starts at firstBackoff and doubles up to maxBackoff.
	freeFailures = 5
	firstBackoff = time.Second
	maxBackoff   = 5 * time.Minute
	// forgetAfter drops an address's record that long after its last
	// failure; maxTracked bounds the addresses tracked at once.
	forgetAfter = 15 * time.Minute
	maxTracked  = 4096
	// logEvery bounds the failed-login log lines per address.
	logEvery = time.Minute
)

// loginGuard slows down password guessing: wrong passwords are logged
// (rate-limited) and, past a few, answered 429 for a backoff per client
// address; a right password clears the address's record. Requests without
// credentials (a browser's first request) do not count, and loopback
// clients (the box itself) are counted and logged but never refused.
type loginGuard struct {
	log    *slog.Logger
	now    func() time.Time
	failed atomic.Uint64 // wrong passwords, for /metrics

	mu   sync.Mutex
	byIP map[netip.Addr]*loginRecord
}

type loginRecord struct {
	failures int
	last     time.Time // the last failure
	until    time.Time // refused until then
	logged   time.Time
	unlogged int // failures since the last log line
}

func newLoginGuard(log *slog.Logger) *loginGuard {
	return &loginGuard{log: log, now: time.Now, byIP: map[netip.Addr]*loginRecord{}}
}

func clientIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap().WithZone("")
}

// blocked reports how long the client must still wait; 0 lets it try.
func (g *loginGuard) blocked(r *http.Request) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rec := g.byIP[clientIP(r)]; rec != nil {
		if d := rec.until.Sub(g.now()); d > 0 {
			return d
		}
	}
	return 0
}

// fail records a wrong password from the client.
func (g *loginGuard) fail(r *http.Request) {
	g.failed.Add(1)
	ip := clientIP(r)
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.byIP[ip]
	if rec == nil {
		g.makeRoom(now)
		rec = &loginRecord{}
		g.byIP[ip] = rec
	}
	rec.failures++
	rec.last = now
	if n := rec.failures - freeFailures; n > 0 && !ip.IsLoopback() {
		backoff := maxBackoff
		if n < 20 {
			backoff = min(firstBackoff<<(n-1), maxBackoff)
		}
		rec.until = now.Add(backoff)
	}
	rec.unlogged++
	if now.Sub(rec.logged) >= logEvery {
		user, _, _ := r.BasicAuth()
		g.log.Warn("dashboard: failed login", "client", ip, "user", user, "failures", rec.failures,
			"since_last_log", rec.unlogged, "refused_for", max(rec.until.Sub(now), 0).Round(time.Second))
		rec.logged, rec.unlogged = now, 0
	}
}

// ok clears the client's record after a right password.
func (g *loginGuard) ok(r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byIP, clientIP(r))
}

// makeRoom drops forgotten records and, if the table is still full, the
// one whose last failure is the oldest.
func (g *loginGuard) makeRoom(now time.Time) {
	if len(g.byIP) < maxTracked {
		return
	}
	var oldest netip.Addr
	var oldestT time.Time
	for ip, rec := range g.byIP {
		if now.Sub(rec.last) > forgetAfter && now.After(rec.until) {
			delete(g.byIP, ip)
			continue
		}
		if oldestT.IsZero() || rec.last.Before(oldestT) {
			oldest, oldestT = ip, rec.last
		}
	}
	if len(g.byIP) >= maxTracked {
		delete(g.byIP, oldest)
	}
}

// tooMany answers a client that must wait.
func tooMany(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second)/time.Second)+1))
	writeError(w, http.StatusTooManyRequests, "too many failed logins from this address; wait "+wait.Round(time.Second).String())
}

// check authenticates r through the guard: false means it answered (401
// or 429).
func (s *Server) check(w http.ResponseWriter, r *http.Request, alt func() bool) bool {
	if wait := s.guard.blocked(r); wait > 0 {
		tooMany(w, wait)
		return false
	}
	if s.currentAuth().ok(r) {
		s.guard.ok(r)
		return true
	}
	if alt != nil && alt() {
		return true
	}
	if _, _, found := r.BasicAuth(); found {
		s.guard.fail(r)
	}
	s.unauthorized(w)
	return false
}
