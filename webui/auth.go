package webui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// User is the only user name the dashboard accepts (gokrazy's).
const User = "gokrazy"

// CSRFHeader must be present (any non-empty value) on every request that
// changes state. Browsers do not let other origins set it without a CORS
// preflight, which this server never grants.
const CSRFHeader = "X-E1kbox-CSRF"

// DefaultPasswordFiles are where gokrazy keeps the box's password, in the
// order they are tried.
var DefaultPasswordFiles = []string{"/perm/gokr-pw.txt", "/etc/gokr-pw.txt"}

// ErrNoPassword means no password file was found: the dashboard refuses to
// run without a password rather than fall back to a default one.
var ErrNoPassword = errors.New("no dashboard password")

// readPassword returns the password from the first of files that exists.
func readPassword(files []string) (string, error) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("reading password: %w", err)
		}
		pw := strings.TrimSpace(string(b))
		if pw == "" {
			return "", fmt.Errorf("%w: %s is empty", ErrNoPassword, f)
		}
		return pw, nil
	}
	return "", fmt.Errorf("%w: none of %s exists (the gokrazy password file)", ErrNoPassword, strings.Join(files, ", "))
}

// authenticator checks HTTP Basic credentials in constant time.
type authenticator struct {
	user, pass [sha256.Size]byte
}

func newAuthenticator(password string) *authenticator {
	return &authenticator{user: sha256.Sum256([]byte(User)), pass: sha256.Sum256([]byte(password))}
}

// ok reports whether r carries the right credentials. Both fields are
// hashed first so the comparison takes the same time whatever their length.
func (a *authenticator) ok(r *http.Request) bool {
	u, p, found := r.BasicAuth()
	if !found {
		return false
	}
	return a.matches(u, p)
}

// matches compares a user and password with the right ones.
func (a *authenticator) matches(u, p string) bool {
	uh, ph := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
	uok := subtle.ConstantTimeCompare(uh[:], a.user[:])
	pok := subtle.ConstantTimeCompare(ph[:], a.pass[:])
	return uok&pok == 1
}

// tickets are short-lived single-use tokens that authenticate a WebSocket
// handshake: not every browser sends cached Basic credentials on a
// WebSocket upgrade, so the page fetches a ticket with its authenticated
// fetch and passes it in the URL.
type tickets struct {
	mu   sync.Mutex
	ttl  time.Duration
	live map[string]time.Time // ticket -> expiry
}

const maxTickets = 1024

func newTickets(ttl time.Duration) *tickets {
	return &tickets{ttl: ttl, live: map[string]time.Time{}}
}

func (t *tickets) issue(now time.Time) string {
	var b [16]byte
	rand.Read(b[:])
	s := hex.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, exp := range t.live {
		if now.After(exp) {
			delete(t.live, k)
		}
	}
	if len(t.live) >= maxTickets {
		for k := range t.live { // forget an arbitrary one rather than grow
			delete(t.live, k)
			break
		}
	}
	t.live[s] = now.Add(t.ttl)
	return s
}

// redeem consumes a ticket and reports whether it was valid.
func (t *tickets) redeem(s string, now time.Time) bool {
	if s == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.live[s]
	delete(t.live, s)
	return ok && !now.After(exp)
}

// originChecker refuses cross-origin browser requests.
type originChecker struct {
	cop     *http.CrossOriginProtection
	trusted map[string]bool // "scheme://host[:port]"
}

func newOriginChecker(trusted []string) (*originChecker, error) {
	oc := &originChecker{cop: http.NewCrossOriginProtection(), trusted: map[string]bool{}}
	for _, o := range trusted {
		if err := oc.cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
		oc.trusted[strings.ToLower(o)] = true
	}
	return oc, nil
}

// sameOrigin reports whether an Origin or Referer value names the host the
// request was sent to (or a trusted origin).
func (oc *originChecker) sameOrigin(r *http.Request, value string) bool {
	u, err := url.Parse(value)
	if err != nil || u.Host == "" {
		return false
	}
	if oc.trusted[strings.ToLower(u.Scheme+"://"+u.Host)] {
		return true
	}
	return strings.EqualFold(u.Host, r.Host)
}

// checkMutation returns an error for a state-changing request that may be
// forged: one without the CSRF header, or one a browser marked as coming
// from another origin (Sec-Fetch-Site, Origin, or, failing both, Referer).
func (oc *originChecker) checkMutation(r *http.Request) error {
	if r.Header.Get(CSRFHeader) == "" {
		return fmt.Errorf("missing %s header", CSRFHeader)
	}
	if err := oc.cop.Check(r); err != nil {
		return fmt.Errorf("cross-origin request refused: %w", err)
	}
	if o := r.Header.Get("Origin"); o != "" && !oc.sameOrigin(r, o) {
		return fmt.Errorf("cross-origin request refused: origin %q", o)
	}
	if r.Header.Get("Origin") == "" {
		if ref := r.Header.Get("Referer"); ref != "" && !oc.sameOrigin(r, ref) {
			return fmt.Errorf("cross-origin request refused: referer %q", ref)
		}
	}
	return nil
}

// checkWebSocket reports whether a WebSocket handshake may proceed: a
// browser always sends Origin, which must be this host; clients that are
// not browsers send none.
func (oc *originChecker) checkWebSocket(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "" || oc.sameOrigin(r, o)
}
