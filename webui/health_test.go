package webui

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type fakeHealth struct{ ok bool }

func (f fakeHealth) Health() HealthReport {
	h := HealthReport{OK: f.ok, Status: "ok", Build: "2026-12-01T10:00:00Z", ConfigSource: "history version 3", UptimeSeconds: 7, Perm: map[string]bool{"writable": true}}
	if !f.ok {
		h.Status, h.DataplaneError = "degraded", "dataplane not running"
	}
	return h
}

func (f fakeHealth) Version() VersionReport {
	return VersionReport{BuildTimestamp: "2026-12-01T10:00:00Z", Go: "go1.26", Boots: []string{"boot"}}
}

type fakeDataplane struct{ err error }

func (f fakeDataplane) Detail() (any, error) {
	if f.err != nil {
		return nil, f.err
	}
	return map[string]any{"workers": []int{1, 2}}, nil
}

func (f fakeDataplane) Neighbours() ([]Neighbour, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []Neighbour{{Side: "wan", IP: netip.MustParseAddr("203.0.113.1"), MAC: "02:00:00:00:00:01", Resolved: true, Confirmed: time.Unix(1, 0).UTC()}}, nil
}

// TestHealthEndpoints: /healthz and /version answer without a password
// (the update health gate), 503 when degraded; everything else still
// needs one.
func TestHealthEndpoints(t *testing.T) {
	for _, ok := range []bool{true, false} {
		f := newFixture(t, func(o *Options) { o.Health = fakeHealth{ok: ok} })
		res, err := http.Get(f.ts.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		want := http.StatusOK
		if !ok {
			want = http.StatusServiceUnavailable
		}
		if res.StatusCode != want {
			t.Errorf("healthy=%v: /healthz %d %s, want %d", ok, res.StatusCode, body, want)
		}
		if ok && string(body) != `{"status":"ok","build":"2026-12-01T10:00:00Z","config_source":"history version 3","uptime_seconds":7,"perm":{"writable":true}}`+"\n" {
			t.Errorf("/healthz body %s", body)
		}
		if res, err := http.Get(f.ts.URL + "/version"); err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("/version without a password: %v %v", res, err)
		}
		if res, err := http.Get(f.ts.URL + "/api/info"); err != nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("/api/info without a password: %v %v", res, err)
		}
	}
	rec := httptest.NewRecorder()
	PublicHandler(fakeHealth{ok: true}).ServeHTTP(rec, httptest.NewRequest("GET", "/version", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != `{"build_timestamp":"2026-12-01T10:00:00Z","go":"go1.26","boots":["boot"]}`+"\n" {
		t.Errorf("PublicHandler /version: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	PublicHandler(fakeHealth{ok: true}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/info", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("PublicHandler serves /api/info: %d", rec.Code)
	}
}

func TestDataplaneAndNeighbours(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Dataplane, o.Neighbours = fakeDataplane{}, fakeDataplane{} })
	var d struct{ Workers []int }
	f.doJSON("GET", "/api/dataplane", nil, http.StatusOK, &d)
	if len(d.Workers) != 2 {
		t.Errorf("/api/dataplane: %+v", d)
	}
	var n struct{ Neighbours []Neighbour }
	f.doJSON("GET", "/api/neighbours", nil, http.StatusOK, &n)
	if diff := cmp.Diff([]Neighbour{{Side: "wan", IP: netip.MustParseAddr("203.0.113.1"), MAC: "02:00:00:00:00:01", Resolved: true, Confirmed: time.Unix(1, 0).UTC()}},
		n.Neighbours, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("/api/neighbours (-want +got):\n%s", diff)
	}

	down := newFixture(t, func(o *Options) {
		o.Dataplane, o.Neighbours = fakeDataplane{err: errors.New("dataplane not running")}, fakeDataplane{err: errors.New("not in NAT mode")}
	})
	down.doJSON("GET", "/api/dataplane", nil, http.StatusServiceUnavailable, nil)
	down.doJSON("GET", "/api/neighbours", nil, http.StatusConflict, nil)
	none := newFixture(t, nil)
	none.doJSON("GET", "/api/dataplane", nil, http.StatusNotFound, nil)
	none.doJSON("GET", "/api/neighbours", nil, http.StatusNotFound, nil)
}
