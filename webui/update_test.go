package webui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
)

type fakeUpdater struct {
	mu       sync.Mutex
	got      []byte
	sig      string
	refuse   error
	abort    bool // drop the connection without an answer, as a box that goes away mid-upload
	last     string
	received int
}

type refusal struct {
	code int
	msg  string
}

func (r refusal) Error() string   { return r.msg }
func (r refusal) HTTPStatus() int { return r.code }

func (u *fakeUpdater) Apply(ctx context.Context, body io.Reader, sig []byte) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.received = len(b)
	if u.abort {
		panic(http.ErrAbortHandler)
	}
	if u.refuse != nil {
		return nil, u.refuse
	}
	u.got, u.sig, u.last = b, string(sig), "testing"
	return map[string]string{"id": "abc", "outcome": "testing"}, nil
}

// Status answers as boxupdate.Status does: no record before the first
// update.
func (u *fakeUpdater) Status() any {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == "" {
		return map[string]any{"signed_only": false}
	}
	return map[string]any{"last": map[string]any{"id": "abc", "client": "dashboard", "outcome": u.last,
		"from": map[string]string{"timestamp": "2026-12-01T10:00:00Z"}, "to": map[string]string{"timestamp": "2026-12-02T10:00:00Z"}}}
}

func TestUpdateAPI(t *testing.T) {
	u := &fakeUpdater{}
	f := newFixture(t, func(o *Options) { o.Updater = u; o.MaxUpdate = 3 << 20 })
	body := bytes.Repeat([]byte("g"), 2<<20) // more than MaxBody: updates have their own limit
	var rec map[string]string
	f.doJSON(http.MethodPost, "/api/system/update", body, http.StatusAccepted, &rec, SignatureHeader, "c2ln")
	if rec["id"] != "abc" || !bytes.Equal(u.got, body) || u.sig != "c2ln" {
		t.Errorf("answer %v; updater got %d bytes, signature %q", rec, len(u.got), u.sig)
	}
	var st struct{ Last struct{ Outcome string } }
	f.doJSON(http.MethodGet, "/api/system/update", nil, http.StatusOK, &st)
	if st.Last.Outcome != "testing" {
		t.Errorf("status %v", st)
	}
	var info Info
	f.doJSON(http.MethodGet, "/api/info", nil, http.StatusOK, &info)
	if !info.Features.Update {
		t.Error("features.update is false with an updater")
	}

	for _, tc := range []struct {
		name    string
		refuse  error
		body    []byte
		headers []string
		want    int
	}{
		{"unsigned", refusal{http.StatusForbidden, "the update is not signed"}, []byte("x"), nil, http.StatusForbidden},
		{"bad archive", refusal{http.StatusBadRequest, "not a gokrazy archive"}, []byte("x"), nil, http.StatusBadRequest},
		{"too large", nil, bytes.Repeat([]byte("g"), 3<<20+1), nil, http.StatusRequestEntityTooLarge},
		{"no CSRF header", nil, []byte("x"), []string{CSRFHeader, "-"}, http.StatusForbidden},
		{"internal error", errors.New("disk on fire"), []byte("x"), nil, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u.refuse = tc.refuse
			res := f.on(t).req(http.MethodPost, "/api/system/update", tc.body, tc.headers...)
			if res.StatusCode != tc.want {
				t.Errorf("status %d, want %d: %s", res.StatusCode, tc.want, readAll(t, res))
			}
		})
	}
	// Without an updater the endpoints say so.
	g := newFixture(t, nil)
	g.doJSON(http.MethodGet, "/api/system/update", nil, http.StatusNotFound, nil)
}
