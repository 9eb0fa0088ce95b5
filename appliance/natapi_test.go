package main

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane"
)

func TestConnFilterParams(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  dataplane.ConnFilter
		err   string
	}{
		{"", dataplane.ConnFilter{}, ""},
		{"proto=tcp&kind=forward&state=established&addr=10.0.0.1&port=443",
			dataplane.ConnFilter{Proto: "tcp", Kind: "forward", State: "established", Addr: netip.MustParseAddr("10.0.0.1"), Port: 443}, ""},
		{"addr=10.0.0", dataplane.ConnFilter{}, "addr:"},
		{"port=70000", dataplane.ConnFilter{}, "port:"},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := connFilter(q)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.query, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.query, err)
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.query, diff)
		}
	}
	for _, s := range []string{"-1", "x"} {
		if _, err := intParam(url.Values{"limit": {s}}, "limit", 1); err == nil {
			t.Errorf("limit=%s: no error", s)
		}
	}
	if v, err := intParam(url.Values{}, "limit", 7); v != 7 || err != nil {
		t.Errorf("default limit = %d, %v", v, err)
	}
}

// TestNATAPIWithoutEngine: the endpoints answer without a dataplane, and
// refuse bad requests before they need one.
func TestNATAPIWithoutEngine(t *testing.T) {
	mux := http.NewServeMux()
	natAPI(mux, &plane{})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/api/dataplane/conntrack", http.StatusServiceUnavailable},
		{"GET", "/api/dataplane/conntrack?port=x", http.StatusBadRequest},
		{"GET", "/api/dataplane/neighbours", http.StatusServiceUnavailable},
		{"DELETE", "/api/dataplane/conntrack", http.StatusBadRequest}, // no filter, no all=true
		{"DELETE", "/api/dataplane/conntrack?all=true", http.StatusServiceUnavailable},
		{"DELETE", "/api/dataplane/conntrack/abc", http.StatusBadRequest},
		{"DELETE", "/api/dataplane/conntrack/12", http.StatusServiceUnavailable},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.code {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, rec.Code, rec.Body, tc.code)
		}
	}
}

// FuzzConnFilterQuery: any query string parses into a filter or an error.
func FuzzConnFilterQuery(f *testing.F) {
	for _, s := range []string{"", "proto=tcp&port=80", "addr=::1&port=-1", "addr=10.0.0.1&kind=forward&cursor=3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		cf, err := connFilter(q)
		if err != nil {
			return
		}
		if cf.Proto != q.Get("proto") || cf.Kind != q.Get("kind") || cf.State != q.Get("state") {
			t.Fatalf("filter %+v from %q", cf, query)
		}
		if q.Get("addr") != "" && !cf.Addr.IsValid() {
			t.Fatalf("addr %q accepted as invalid", q.Get("addr"))
		}
	})
}
