package webui

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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
	if diff := cmp.Diff(testKernel(), sys.Kernel); diff != "" {
		t.Errorf("system's kernel (-want +got):\n%s", diff)
	}
	// The kernel's fields by the names docs/api.md gives them.
	var raw struct {
		Kernel map[string]any `json:"kernel"`
	}
	f.doJSON("GET", "/api/system", nil, http.StatusOK, &raw)
	fp, _ := raw.Kernel["fast_path"].(map[string]any)
	wd, _ := raw.Kernel["watchdog"].(map[string]any)
	if raw.Kernel["release"] != "6.12.118" || raw.Kernel["source"] != "Debian 6.12.118-1" || raw.Kernel["jit"] != "on" ||
		wd["identity"] != "iTCO_wdt" || wd["timeout_s"] != 30.0 || wd["state"] != "active" ||
		fp["hit_ns"] != 121.3 || fp["userspace_ns"] != 216.2 || fp["miss_ns"] != 95.0 || fp["jit"] != true || fp["path"] != "nat" {
		t.Errorf("system's kernel as JSON: %v", raw.Kernel)
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
