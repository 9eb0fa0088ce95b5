package webui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAuth(t *testing.T) {
	f := newFixture(t, nil)
	paths := []string{"/", "/api/info", "/api/stats/history", "/metrics", "/static/app.css", "/api/config", "/api/nope"}
	tests := []struct {
		name       string
		user, pass string // "" user: no Authorization header
		want       int
	}{
		{name: "no credentials", want: http.StatusUnauthorized},
		{name: "wrong password", user: User, pass: "wrong", want: http.StatusUnauthorized},
		{name: "password prefix", user: User, pass: testPassword[:4], want: http.StatusUnauthorized},
		{name: "password with suffix", user: User, pass: testPassword + "x", want: http.StatusUnauthorized},
		{name: "wrong user", user: "root", pass: testPassword, want: http.StatusUnauthorized},
		{name: "right", user: User, pass: testPassword, want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range paths {
				r, _ := http.NewRequest("GET", f.ts.URL+p, nil)
				if tt.user != "" {
					r.SetBasicAuth(tt.user, tt.pass)
				}
				res, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, res)
				res.Body.Close()
				want := tt.want
				if p == "/api/nope" && want == http.StatusOK {
					want = http.StatusNotFound
				}
				if res.StatusCode != want {
					t.Errorf("GET %s: status %d, want %d", p, res.StatusCode, want)
				}
				if want == http.StatusUnauthorized {
					if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
						t.Errorf("GET %s: WWW-Authenticate %q", p, got)
					}
					if bytes.Contains(body, []byte("port1")) || bytes.Contains(body, []byte("<html")) {
						t.Errorf("GET %s: 401 leaks content: %s", p, body)
					}
				}
			}
		})
	}
}

func TestPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	perm, etc := filepath.Join(dir, "perm-pw.txt"), filepath.Join(dir, "etc-pw.txt")
	missing := filepath.Join(dir, "missing")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(perm, []byte("from-perm\n"), 0o600)
	os.WriteFile(etc, []byte("from-etc"), 0o600)
	os.WriteFile(empty, []byte(" \n"), 0o600)
	tests := []struct {
		name    string
		files   []string
		want    string
		wantErr bool
	}{
		{name: "first wins", files: []string{perm, etc}, want: "from-perm"},
		{name: "fallback", files: []string{missing, etc}, want: "from-etc"},
		{name: "none", files: []string{missing, missing + "2"}, wantErr: true},
		{name: "empty file", files: []string{empty, etc}, wantErr: true},
		{name: "no files configured", files: []string{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readPassword(tt.files)
			if (err != nil) != tt.wantErr {
				t.Fatalf("readPassword: %q, %v; want error %v", got, err, tt.wantErr)
			}
			if tt.wantErr {
				if !errors.Is(err, ErrNoPassword) {
					t.Errorf("error %v is not ErrNoPassword", err)
				}
				_, nerr := New(Options{PasswordFiles: tt.files, CertFile: "-", KeyFile: "-"})
				if !errors.Is(nerr, ErrNoPassword) {
					t.Errorf("New: %v, want ErrNoPassword", nerr)
				}
				return
			}
			if got != tt.want {
				t.Errorf("password %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, nil)
	valid := []byte(factoryConfig)
	tests := []struct {
		name    string
		headers []string
		want    int
	}{
		{name: "no CSRF header", headers: []string{CSRFHeader, "-"}, want: http.StatusForbidden},
		{name: "foreign origin", headers: []string{"Origin", "http://evil.example"}, want: http.StatusForbidden},
		{name: "null origin", headers: []string{"Origin", "null"}, want: http.StatusForbidden},
		{name: "cross-site fetch", headers: []string{"Sec-Fetch-Site", "cross-site"}, want: http.StatusForbidden},
		{name: "same-site other host", headers: []string{"Sec-Fetch-Site", "same-site"}, want: http.StatusForbidden},
		{name: "foreign referer", headers: []string{"Referer", "http://evil.example/page"}, want: http.StatusForbidden},
		{name: "same origin", headers: []string{"Origin", f.ts.URL, "Sec-Fetch-Site", "same-origin"}, want: http.StatusOK},
		{name: "same referer", headers: []string{"Referer", f.ts.URL + "/#/config"}, want: http.StatusOK},
		{name: "non-browser client", want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.on(t).req("POST", "/api/config/validate", valid, tt.headers...)
			body := readAll(t, res)
			if res.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.want, body)
			}
		})
	}
	// A refused apply changes nothing.
	_, before := f.store.Current()
	res := f.req("POST", "/api/config/apply", []byte(strings.Replace(factoryConfig, `"nat"`, `"bridge"`, 1)), "Origin", "http://evil.example")
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin apply: status %d", res.StatusCode)
	}
	if _, after := f.store.Current(); after != before || f.store.applies != 0 {
		t.Errorf("cross-origin apply changed the config: %v -> %v", before, after)
	}
	// The same for connection deletes.
	if res := f.req("DELETE", "/api/conntrack/1", nil, CSRFHeader, "-"); res.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE without CSRF header: status %d", res.StatusCode)
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t, nil)
	_, before := f.store.Current()
	big := []byte(`{"mode":"bridge","pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	for _, path := range []string{"/api/config/apply", "/api/config/validate", "/api/config/restore"} {
		res := f.req("POST", path, big)
		body := readAll(t, res)
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s with %d bytes: status %d, want 413: %s", path, len(big), res.StatusCode, body)
		}
	}
	if res := f.req("PUT", "/api/rules", big); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT /api/rules: status %d, want 413", res.StatusCode)
	}
	if _, after := f.store.Current(); after != before {
		t.Errorf("config changed: %v -> %v", before, after)
	}
}

func TestInvalidConfig(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		cfg  string
		want []FieldError
	}{
		{
			name: "bad fields",
			cfg:  `{"mode": "router", "ports": [{"name": "a", "interface": "eth1"}, {"name": "b", "interface": ""}]}`,
			want: []FieldError{
				{Path: "mode", Message: `must be bridge or nat, not "router"`},
				{Path: "ports[1].interface", Message: "required"},
			},
		},
		{
			name: "syntax",
			cfg:  `{"mode": "nat",`,
			want: []FieldError{{Path: "", Message: "invalid JSON at byte 15: unexpected end of JSON input"}},
		},
		{
			name: "not an object",
			cfg:  `["nat"]`,
			want: []FieldError{{Path: "", Message: "the config must be a JSON object"}},
		},
	}
	for _, tt := range tests {
		for _, path := range []string{"/api/config/validate", "/api/config/apply"} {
			t.Run(tt.name+path, func(t *testing.T) {
				_, before := f.store.Current()
				var got errorBody
				f.on(t).doJSON("POST", path, []byte(tt.cfg), http.StatusBadRequest, &got)
				if diff := cmp.Diff(tt.want, got.Errors); diff != "" {
					t.Errorf("field errors (-want +got):\n%s", diff)
				}
				if cfg, after := f.store.Current(); after != before || !bytes.Equal(cfg, []byte(factoryConfig)) {
					t.Errorf("running config changed: %v -> %v", before, after)
				}
			})
		}
	}
	var ok map[string]any
	f.doJSON("POST", "/api/config/validate", []byte(factoryConfig), http.StatusOK, &ok)
	if ok["valid"] != true {
		t.Errorf("valid config: %v", ok)
	}
}

func TestApplyConfirmRollback(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.ConfirmTimeout = time.Hour })
	bridge := strings.Replace(factoryConfig, `"mode": "nat"`, `"mode": "bridge"`, 1)
	if bridge == factoryConfig {
		t.Fatal("test config edit did nothing")
	}
	mode := func() string {
		var c ConfigAnswer
		f.doJSON("GET", "/api/config", nil, http.StatusOK, &c)
		var m struct{ Mode string }
		json.Unmarshal(c.Config, &m)
		return m.Mode
	}
	state := func(id PendingID) ApplyState {
		var a ChangeAnswer
		f.doJSON("GET", "/api/config/changes/"+string(id), nil, http.StatusOK, &a)
		return a.State
	}

	// Apply and confirm.
	var a ApplyAnswer
	f.doJSON("POST", "/api/config/apply", []byte(bridge), http.StatusAccepted, &a)
	if a.Pending == nil || a.Pending.ID == "" {
		t.Fatalf("apply answer without pending change: %+v", a)
	}
	if left := time.Until(a.Pending.Deadline); left < 59*time.Minute {
		t.Errorf("deadline in %v, want the default timeout (1h)", left)
	}
	if got := mode(); got != "bridge" {
		t.Errorf("mode after apply %q, want bridge (the change takes effect at once)", got)
	}
	var p map[string]*PendingInfo
	f.doJSON("GET", "/api/config/pending", nil, http.StatusOK, &p)
	if p["pending"] == nil || p["pending"].ID != a.Pending.ID {
		t.Errorf("pending %+v, want %s", p["pending"], a.Pending.ID)
	}
	// A second apply while one is pending is refused.
	f.doJSON("POST", "/api/config/apply", []byte(factoryConfig), http.StatusConflict, nil)
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusOK, nil)
	if got := state(a.Pending.ID); got != ApplyConfirmed {
		t.Errorf("state after confirm %q", got)
	}
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusNotFound, nil)

	// Apply without confirming: the store rolls back by itself.
	f.doJSON("POST", "/api/config/apply?confirm_timeout=1", []byte(factoryConfig), http.StatusAccepted, &a)
	if got := mode(); got != "nat" {
		t.Errorf("mode after second apply %q, want nat", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for state(a.Pending.ID) == ApplyPending && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := state(a.Pending.ID); got != ApplyRolledBack {
		t.Fatalf("state after the timeout %q, want rolled_back", got)
	}
	if got := mode(); got != "bridge" {
		t.Errorf("mode after rollback %q, want bridge again", got)
	}
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusNotFound, nil)

	// Roll back on request.
	f.doJSON("POST", "/api/config/apply", []byte(factoryConfig), http.StatusAccepted, &a)
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/rollback", nil, http.StatusOK, nil)
	if got := mode(); got != "bridge" {
		t.Errorf("mode after requested rollback %q, want bridge", got)
	}

	// Bad timeouts.
	for _, q := range []string{"0", "-1", "x", "3601"} {
		f.doJSON("POST", "/api/config/apply?confirm_timeout="+q, []byte(factoryConfig), http.StatusBadRequest, nil)
	}

	// History, versions, backup and restore.
	var h struct {
		Current  string
		Versions []Version
	}
	f.doJSON("GET", "/api/config/history", nil, http.StatusOK, &h)
	if len(h.Versions) != 4 || h.Current != "v2" {
		t.Errorf("history: current %s, %d versions %+v; want v2 of 4", h.Current, len(h.Versions), h.Versions)
	}
	res := f.req("GET", "/api/config/backup", nil)
	backup := readAll(t, res)
	if cd := res.Header.Get("Content-Disposition"); !strings.Contains(cd, `filename="e1kbox-config-v2.json"`) {
		t.Errorf("backup Content-Disposition %q", cd)
	}
	var cfg map[string]any
	if err := json.Unmarshal(backup, &cfg); err != nil || cfg["mode"] != "bridge" {
		t.Errorf("backup %s: %v", backup, err)
	}
	var v1 map[string]any
	f.doJSON("GET", "/api/config/history/v1", nil, http.StatusOK, &v1)
	if v1["mode"] != "nat" {
		t.Errorf("version v1: %v", v1)
	}
	f.doJSON("GET", "/api/config/history/v99", nil, http.StatusNotFound, nil)
	f.doJSON("POST", "/api/config/restore", []byte(factoryConfig), http.StatusAccepted, &a)
	if got := mode(); got != "nat" {
		t.Errorf("mode after restore %q, want nat", got)
	}
}

func TestStatsEndpoints(t *testing.T) {
	// The test publishes with a clock of its own.
	clock := time.Now()
	stats := newFakeStats()
	stats.start = clock.Add(-10 * time.Second)
	stats.now = func() time.Time { return clock }
	f := startFixture(t, func(o *Options) {
		o.Stats = stats
		o.Interval = 20 * time.Millisecond
		o.History = 200 * time.Millisecond
	}, false)
	f.doJSON("GET", "/api/stats", nil, http.StatusServiceUnavailable, nil)
	f.srv.publish(clock)
	var m StatsMessage
	f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
	if m.Seq != 1 || m.Interval != 0 || m.Ports[0].RxPPS != 0 || m.Ports[0].RxPackets == 0 {
		t.Errorf("first message %+v: want counters without rates", m)
	}
	var hm HistoryMessage
	f.doJSON("GET", "/api/stats/history", nil, http.StatusOK, &hm)
	if len(hm.Time) != 0 || len(hm.Ports) != 0 {
		t.Errorf("history of the first sample %+v, want empty (it has no rates)", hm)
	}

	// History.Interval+1 = 11 samples are kept; publish 15 more 20 ms apart.
	for i := range 15 {
		clock = clock.Add(20 * time.Millisecond)
		f.srv.publish(clock)
		if i == 3 {
			f.doJSON("GET", "/api/stats/history", nil, http.StatusOK, &hm)
			if len(hm.Time) != 4 {
				t.Errorf("history after 5 samples has %d points, want 4", len(hm.Time))
			}
		}
	}
	f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
	if m.Seq != 16 || m.Type != "stats" || len(m.Ports) != 3 || m.Config == nil || m.Interval != 0.02 {
		t.Errorf("stats message %+v", m)
	}
	// port1 counts 50000 + 4000*t frames per second at t seconds.
	if want := 50000 + 4000*(10+15*0.02); m.Ports[0].RxPPS < want-50 || m.Ports[0].RxPPS > want+50 {
		t.Errorf("port1 rx_pps %f, want about %f", m.Ports[0].RxPPS, want)
	}
	f.doJSON("GET", "/api/stats/history", nil, http.StatusOK, &hm)
	if len(hm.Time) != 11 {
		t.Errorf("history has %d samples, want 11", len(hm.Time))
	}
	if len(hm.Ports) != 3 || len(hm.Ports[0].RxPPS) != len(hm.Time) {
		t.Fatalf("history ports %+v", hm.Ports)
	}
	for i := 1; i < len(hm.Time); i++ {
		if d := hm.Time[i] - hm.Time[i-1]; d < 0.019 || d > 0.021 {
			t.Errorf("history times %v: step %f, want 0.02", hm.Time, d)
			break
		}
	}
	// Rates between 10 and 10.3 s, give or take the counters' rounding.
	lo, hi := 50000+4000*10.0-60, 50000+4000*10.3+60
	for i, v := range hm.Ports[0].RxPPS {
		if v == nil || *v < lo || *v > hi {
			t.Errorf("port1 rx_pps[%d] = %v, want %.0f-%.0f", i, v, lo, hi)
		}
	}
	if first, last := hm.Ports[0].RxPPS[0], hm.Ports[0].RxPPS[len(hm.Time)-1]; *last <= *first {
		t.Errorf("port1 rx_pps does not rise: %f then %f", *first, *last)
	}
	// port3 is down: its rate is 0, not null.
	if v := hm.Ports[2].RxPPS[0]; v == nil || *v != 0 {
		t.Errorf("port3 rx_pps[0] = %v, want 0", v)
	}

	var info Info
	f.doJSON("GET", "/api/info", nil, http.StatusOK, &info)
	want := Features{Config: true, Rules: true, Conntrack: true, FDB: true, Tuning: true}
	if diff := cmp.Diff(want, info.Features); diff != "" || info.Hostname != "e1kbox-test" || info.CSRFHeader != CSRFHeader {
		t.Errorf("info %+v; features (-want +got):\n%s", info, diff)
	}
	var sys SystemAnswer
	f.doJSON("GET", "/api/system", nil, http.StatusOK, &sys)
	if sys.Uptime < 26*3600 || sys.Version != "v1.2.3" || sys.GoHeap == 0 || sys.GoVersion == "" || sys.TLS {
		t.Errorf("system %+v", sys)
	}
	var fdb struct{ Entries []map[string]any }
	f.doJSON("GET", "/api/fdb", nil, http.StatusOK, &fdb)
	if len(fdb.Entries) != 3 || fdb.Entries[0]["mac"] != "52:54:00:12:34:56" || fdb.Entries[0]["age_s"] != 12.0 {
		t.Errorf("fdb %+v", fdb.Entries)
	}
	var tun struct{ Reports []TuningReport }
	f.doJSON("GET", "/api/tuning", nil, http.StatusOK, &tun)
	if diff := cmp.Diff([]TuningReport(testTuning), tun.Reports); diff != "" {
		t.Errorf("tuning (-want +got):\n%s", diff)
	}
}

func TestNilImplementations(t *testing.T) {
	for _, withStats := range []bool{false, true} {
		t.Run(fmt.Sprint("stats=", withStats), func(t *testing.T) {
			f := newFixture(t, func(o *Options) {
				*o = Options{PasswordFiles: o.PasswordFiles, CertFile: "-", KeyFile: "-", Interval: 10 * time.Millisecond}
				if withStats {
					s := newFakeStats()
					s.nat = false
					o.Stats = s
				}
			})
			time.Sleep(50 * time.Millisecond)
			for _, p := range []string{"/api/rules", "/api/conntrack", "/api/fdb", "/api/tuning", "/api/config", "/api/config/history", "/api/config/pending"} {
				f.doJSON("GET", p, nil, http.StatusNotFound, nil)
			}
			f.doJSON("POST", "/api/config/apply", []byte(factoryConfig), http.StatusNotFound, nil)
			f.doJSON("PUT", "/api/rules", []byte(`{"rules":[]}`), http.StatusNotFound, nil)
			f.doJSON("DELETE", "/api/conntrack/1", nil, http.StatusNotFound, nil)
			var info Info
			f.doJSON("GET", "/api/info", nil, http.StatusOK, &info)
			if info.Features != (Features{}) {
				t.Errorf("features %+v, want none", info.Features)
			}
			var m StatsMessage
			f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
			if m.Config != nil || m.Conntrack != nil || (len(m.Ports) > 0) != withStats {
				t.Errorf("stats %+v", m)
			}
			f.doJSON("GET", "/metrics", nil, http.StatusOK, nil)
			f.doJSON("GET", "/api/system", nil, http.StatusOK, nil)
		})
	}
}

func TestConntrackAPI(t *testing.T) {
	const n = 100000
	ct := newFakeConntrack(n)
	all := append([]Conn(nil), ct.conns...)
	f := newFixture(t, func(o *Options) { o.Conntrack = ct })

	// oracle filters and sorts on its own, the obvious way.
	oracle := func(keep func(c Conn) bool, less func(a, b Conn) bool) []Conn {
		var ptrs []*Conn
		for i := range all {
			if keep(all[i]) {
				ptrs = append(ptrs, &all[i])
			}
		}
		sort.Slice(ptrs, func(i, j int) bool {
			a, b := *ptrs[i], *ptrs[j]
			if less(a, b) != less(b, a) {
				return less(a, b)
			}
			return a.ID < b.ID
		})
		out := make([]Conn, len(ptrs))
		for i, p := range ptrs {
			out[i] = *p
		}
		return out
	}
	every := func(Conn) bool { return true }
	byBytesDesc := func(a, b Conn) bool { return a.Bytes > b.Bytes }
	tests := []struct {
		name  string
		query string
		keep  func(Conn) bool
		less  func(a, b Conn) bool
	}{
		{name: "default", query: "", keep: every, less: byBytesDesc},
		{name: "page 3", query: "offset=200&limit=100", keep: every, less: byBytesDesc},
		{name: "last page", query: fmt.Sprintf("offset=%d&limit=1000", n-37), keep: every, less: byBytesDesc},
		{name: "packets asc", query: "sort=packets&order=asc&limit=50", keep: every, less: func(a, b Conn) bool { return a.Packets < b.Packets }},
		{name: "oldest", query: "sort=age", keep: every, less: func(a, b Conn) bool { return a.Created.Before(b.Created) }},
		{name: "udp", query: "proto=udp", keep: func(c Conn) bool { return c.Proto == "udp" }, less: byBytesDesc},
		{name: "tcp syn_sent", query: "proto=TCP&state=syn_sent", keep: func(c Conn) bool { return c.Proto == "tcp" && c.State == "syn_sent" }, less: byBytesDesc},
		{name: "port 22", query: "port=22", keep: func(c Conn) bool { return c.Dst.Port() == 22 || c.Src.Port() == 22 || c.NATSrc.Port() == 22 }, less: byBytesDesc},
		{name: "prefix", query: "addr=192.168.1.0/24", keep: func(c Conn) bool { return strings.HasPrefix(c.Src.Addr().String(), "192.168.1.") }, less: byBytesDesc},
		{name: "host", query: "addr=192.168.2.7", keep: func(c Conn) bool { return c.Src.Addr().String() == "192.168.2.7" }, less: byBytesDesc},
		{name: "nat address", query: "addr=203.0.113.2&limit=10", keep: every, less: byBytesDesc},
		{name: "nothing", query: "addr=10.9.9.9", keep: func(Conn) bool { return false }, less: byBytesDesc},
	}
	re := regexp.MustCompile(`(?:^|&)(offset|limit)=(\d+)`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := oracle(tt.keep, tt.less)
			offset, limit := 0, DefaultConnLimit
			for _, m := range re.FindAllStringSubmatch(tt.query, -1) {
				var v int
				fmt.Sscan(m[2], &v)
				if m[1] == "offset" {
					offset = v
				} else {
					limit = v
				}
			}
			var page ConnPage
			f.on(t).doJSON("GET", "/api/conntrack?"+tt.query, nil, http.StatusOK, &page)
			if page.Total != len(want) {
				t.Errorf("total %d, want %d", page.Total, len(want))
			}
			wantPage := want[min(offset, len(want)):min(offset+limit, len(want))]
			if diff := cmp.Diff(wantPage, page.Entries, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
				cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
		})
	}

	for _, q := range []string{"limit=0", "limit=1001", "offset=-1", "port=0", "port=70000", "addr=nonsense", "sort=size", "order=up", "proto=%3Cscript%3E"} {
		f.doJSON("GET", "/api/conntrack?"+q, nil, http.StatusBadRequest, nil)
	}

	// Kill a connection.
	var page ConnPage
	f.doJSON("GET", "/api/conntrack?limit=1", nil, http.StatusOK, &page)
	id := page.Entries[0].ID
	res := f.req("DELETE", fmt.Sprintf("/api/conntrack/%d", id), nil)
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: status %d", res.StatusCode)
	}
	f.doJSON("DELETE", fmt.Sprintf("/api/conntrack/%d", id), nil, http.StatusNotFound, nil)
	f.doJSON("DELETE", "/api/conntrack/abc", nil, http.StatusBadRequest, nil)
	f.doJSON("GET", "/api/conntrack?limit=1", nil, http.StatusOK, &page)
	if page.Total != n-1 || page.Entries[0].ID == id {
		t.Errorf("after delete: total %d, first %d", page.Total, page.Entries[0].ID)
	}

	// Delete by filter: one is needed (or all=true).
	f.doJSON("DELETE", "/api/conntrack", nil, http.StatusBadRequest, nil)
	f.doJSON("DELETE", "/api/conntrack?port=0", nil, http.StatusBadRequest, nil)
	var udp ConnPage
	f.doJSON("GET", "/api/conntrack?proto=udp&limit=1", nil, http.StatusOK, &udp)
	var del struct{ Deleted int }
	f.doJSON("DELETE", "/api/conntrack?proto=udp", nil, http.StatusOK, &del)
	if del.Deleted != udp.Total || udp.Total == 0 {
		t.Errorf("DELETE proto=udp deleted %d, want %d", del.Deleted, udp.Total)
	}
	f.doJSON("GET", "/api/conntrack?proto=udp", nil, http.StatusOK, &udp)
	if udp.Total != 0 {
		t.Errorf("after DELETE proto=udp: %d left", udp.Total)
	}
	f.doJSON("DELETE", "/api/conntrack?all=true", nil, http.StatusOK, &del)
	f.doJSON("GET", "/api/conntrack", nil, http.StatusOK, &page)
	if page.Total != 0 || del.Deleted == 0 {
		t.Errorf("after DELETE all=true: %d left, %d deleted", page.Total, del.Deleted)
	}
}

func TestRulesAPI(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.ConfirmTimeout = time.Hour })
	var table RuleTable
	f.doJSON("GET", "/api/rules", nil, http.StatusOK, &table)
	if len(table.Rules) != 3 || table.Rules[0].Text != "tcp dport 22 counter accept" || table.Subtables == 0 {
		t.Fatalf("rule table %+v", table)
	}

	edit := RulesEdit{
		Policies: map[string]string{"forward": "drop"},
		Rules: []RuleText{
			{Chain: "forward", Text: "tcp dport 443 counter accept"},
			{Chain: "forward", Text: "ct state established,related accept"},
			{Chain: "input", Text: "iif port2 udp dport 53 accept"},
		},
	}
	body, _ := json.Marshal(edit)
	var a ApplyAnswer
	f.doJSON("PUT", "/api/rules", body, http.StatusAccepted, &a)
	if a.Pending == nil {
		t.Fatal("no pending change")
	}
	f.doJSON("GET", "/api/rules", nil, http.StatusOK, &table)
	var texts []string
	for _, r := range table.Rules {
		texts = append(texts, r.Chain+": "+r.Text)
	}
	wantTexts := []string{"forward: tcp dport 443 counter accept", "forward: ct state established,related accept", "input: iif port2 udp dport 53 accept"}
	if diff := cmp.Diff(wantTexts, texts); diff != "" {
		t.Errorf("rules after edit (-want +got):\n%s", diff)
	}
	if len(table.Policies) != 1 || table.Policies[0] != (PolicyStat{Chain: "forward", Action: "drop", Packets: 1234, Bytes: 1234 * 400}) {
		t.Errorf("policies %+v", table.Policies)
	}
	// The rest of the config is untouched and in its order.
	cfg, _ := f.store.Current()
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if diff := cmp.Diff([]string{"version", "mode", "ports", "hostPort", "nat", "rules", "dashboard"}, keys); diff != "" {
		t.Errorf("config keys (-want +got):\n%s", diff)
	}
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusOK, nil)

	tests := []struct {
		name string
		body string
		want []FieldError
	}{
		{
			name: "parse error",
			body: `{"rules": [{"chain": "forward", "text": "tcp dport 22 accept"}, {"chain": "forward", "text": "tcp dport 99999 accept"}]}`,
			want: []FieldError{{Path: "rules[1].text"}},
		},
		{
			name: "unknown port (from the store)",
			body: `{"rules": [{"chain": "forward", "text": "tcp dport 22 accept"}, {"chain": "input", "text": "iif wan9 accept"}]}`,
			want: []FieldError{{Path: "rules[1].text"}},
		},
		{
			name: "bad chain and policy",
			body: `{"policies": {"forward": "reject", "sideways": "drop"}, "rules": [{"chain": "prerouting", "text": "accept"}]}`,
			want: []FieldError{{Path: "policies.forward"}, {Path: "policies.sideways"}, {Path: "rules[0].chain"}},
		},
		{
			name: "smuggled lines",
			body: `{"rules": [{"text": "accept\npolicy forward drop"}, {"text": "policy forward drop"}, {"text": "  "}]}`,
			want: []FieldError{{Path: "rules[0].text"}, {Path: "rules[1].text"}, {Path: "rules[2].text"}},
		},
		{
			name: "unknown member",
			body: `{"rulez": []}`,
			want: []FieldError{{Path: ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := f.store.Current()
			var got errorBody
			f.on(t).doJSON("PUT", "/api/rules", []byte(tt.body), http.StatusBadRequest, &got)
			for _, e := range got.Errors {
				if e.Message == "" {
					t.Errorf("error at %q without a message", e.Path)
				}
			}
			if diff := cmp.Diff(tt.want, got.Errors, cmp.Comparer(func(a, b FieldError) bool { return a.Path == b.Path })); diff != "" {
				t.Errorf("errors (-want +got, paths only):\n%s\n%+v", diff, got.Errors)
			}
			if after, _ := f.store.Current(); !bytes.Equal(before, after) {
				t.Error("invalid rules changed the config")
			}
		})
	}
}

func TestSetKey(t *testing.T) {
	tests := []struct {
		name, obj, key, val, want string
		wantErr                   bool
	}{
		{name: "replace", obj: `{"a":1,"rules":{"x":1},"b":[2]}`, key: "rules", val: `{"y":2}`, want: `{"a":1,"rules":{"y":2},"b":[2]}`},
		{name: "add", obj: `{"b":1,"a":2}`, key: "rules", val: `[]`, want: `{"b":1,"a":2,"rules":[]}`},
		{name: "empty", obj: ` {} `, key: "k", val: `true`, want: `{"k":true}`},
		{name: "escaped keys", obj: `{"a\"b":"\u00e9"}`, key: "r", val: `1`, want: `{"a\"b":"\u00e9","r":1}`},
		{name: "array", obj: `[1]`, key: "k", val: `1`, wantErr: true},
		{name: "broken", obj: `{"a":`, key: "k", val: `1`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := setKey([]byte(tt.obj), tt.key, []byte(tt.val))
			if (err != nil) != tt.wantErr {
				t.Fatalf("setKey: %s, %v", got, err)
			}
			if tt.wantErr {
				return
			}
			var compact bytes.Buffer
			json.Compact(&compact, got)
			if diff := cmp.Diff(tt.want, compact.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaticAssets(t *testing.T) {
	f := newFixture(t, nil)
	res := f.req("GET", "/", nil)
	index := readAll(t, res)
	if !bytes.Contains(index, []byte(`<script type="module" src="/static/js/main.js">`)) {
		t.Errorf("index.html: %s", index)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	// Everything index.html and the modules load must be served: walk the
	// references.
	ref := regexp.MustCompile(`(?:src|href)="(/static/[^"]+)"|from '(\.{1,2}/[^']+)'`)
	foreign := regexp.MustCompile(`(?:src|href)="(?:https?:)?//|from '(?:https?:)?//|import\('(?:https?:)?//|url\((?:https?:)?//|new WebSocket\('`)
	seen := map[string]bool{}
	queue := []string{"/"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		res := f.req("GET", p, nil)
		b := readAll(t, res)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", p, res.StatusCode)
			continue
		}
		if strings.HasSuffix(p, ".js") && !strings.Contains(res.Header.Get("Content-Type"), "javascript") {
			t.Errorf("GET %s: Content-Type %q", p, res.Header.Get("Content-Type"))
		}
		if m := foreign.Find(b); m != nil {
			t.Errorf("%s loads from another site: %s", p, m)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			next := m[1]
			if m[2] != "" {
				next = filepath.Clean(filepath.Join(filepath.Dir(p), m[2]))
			}
			if !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
	for _, want := range []string{"/static/js/pages/overview.js", "/static/js/pages/config.js", "/static/vendor/uPlot.iife.min.js", "/static/app.css"} {
		if !seen[want] {
			t.Errorf("%s is not referenced", want)
		}
	}
	if res := f.req("GET", "/static/js/", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("directory listing: status %d", res.StatusCode)
	}
	if res := f.req("GET", "/static/../server.go", nil); res.StatusCode == http.StatusOK {
		t.Errorf("path escape served a file")
	}
}
