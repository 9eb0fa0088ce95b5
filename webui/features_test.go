package webui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRouterAndDevicesAPI(t *testing.T) {
	devs := newFakeDevices()
	f := newFixture(t, func(o *Options) { o.Router, o.Devices = newFakeRouter(), devs })
	var st RouterStatus
	f.doJSON("GET", "/api/router", nil, http.StatusOK, &st)
	if st.WAN.Address.String() != "203.0.113.2/24" || st.WAN.State != WANBound || st.DNS.LatencyP99 != Duration(50*time.Millisecond) || st.Time.Offset != Duration(-1200*time.Microsecond) {
		t.Errorf("router status %+v", st)
	}
	var da DevicesAnswer
	f.doJSON("GET", "/api/devices", nil, http.StatusOK, &da)
	if da.Online != 3 || len(da.Devices) != 4 || da.Devices[0].Hostname != "printer" { // sorted by address
		t.Errorf("devices %+v", da)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/api/devices/52:54:00:aa:00:01/static", http.StatusNoContent},
		{"POST", "/api/devices/52:54:00:aa:00:99/static", http.StatusNotFound},
		{"DELETE", "/api/devices/52:54:00:aa:00:03", http.StatusConflict},
		{"DELETE", "/api/devices/not-a-mac", http.StatusBadRequest},
		{"DELETE", "/api/devices/52:54:00:aa:00:02", http.StatusNoContent},
		{"DELETE", "/api/devices/52:54:00:aa:00:02", http.StatusNotFound},
	} {
		if res := f.req(tc.method, tc.path, nil); res.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, res.StatusCode, tc.want)
		}
	}
	if after, _ := devs.Devices(); !devs.static("52:54:00:aa:00:01") || len(after) != 3 {
		t.Errorf("devices after the actions %+v", after)
	}
	// No router (bridge mode): 404.
	g := newFixture(t, nil)
	g.doJSON("GET", "/api/router", nil, http.StatusNotFound, nil)
	g.doJSON("GET", "/api/devices", nil, http.StatusNotFound, nil)
}

// TestRouterOff: a router that runs no services (the box switched to
// bridge mode) is left out of /api/router, /api/info, the stream and
// /metrics, and comes back when it runs again.
func TestRouterOff(t *testing.T) {
	r := newFakeRouter()
	f := startFixture(t, func(o *Options) { o.Router = r }, false)
	for _, off := range []bool{true, false} {
		r.edit(func(*RouterStatus) { r.off = off })
		f.srv.routerAt = time.Time{} // the publisher asks again at once
		f.srv.publish(time.Now())
		want := map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[off]
		f.doJSON("GET", "/api/router", nil, want, nil)
		var info Info
		f.doJSON("GET", "/api/info", nil, http.StatusOK, &info)
		var m StatsMessage
		f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
		body := string(readAll(t, f.req("GET", "/metrics", nil)))
		if info.Features.Router == off || (m.Router == nil) != off || strings.Contains(body, "e1kbox_wan_up") == off {
			t.Errorf("router off=%v: features.router %v, stream router %v, metrics have wan_up %v",
				off, info.Features.Router, m.Router != nil, strings.Contains(body, "e1kbox_wan_up"))
		}
	}
}

func TestRouterMetricsAndAlarms(t *testing.T) {
	r := newFakeRouter()
	f := startFixture(t, func(o *Options) { o.Router = r }, false)
	r.edit(func(s *RouterStatus) {
		s.WAN.Internet.Reachable, s.WAN.Internet.Error, s.Time.Synced = false, "no answer", false
	})
	f.srv.publish(time.Now())
	var m StatsMessage
	f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
	var kinds []string
	for _, a := range m.Alarms {
		kinds = append(kinds, a.Kind+"/"+a.Severity)
	}
	if diff := cmp.Diff([]string{"link_down/warn", "internet/bad", "time/warn"}, kinds); diff != "" || m.Router == nil || m.Router.WAN.Port != "port1" {
		t.Errorf("alarms (-want +got):\n%s", diff)
	}
	res := f.req("GET", "/metrics", nil)
	body := string(readAll(t, res))
	for _, want := range []string{
		`e1kbox_wan_info{address="203.0.113.2/24",gateway="203.0.113.1",mode="dhcp",port="port1",state="bound"} 1`,
		`e1kbox_wan_link_info{control_pcp="6",interface="eth1",pcp="0",port="port1",vlan="7"} 1`,
		`e1kbox_wan_up 1`,
		`e1kbox_wan_internet_reachable{probe="ping 1.1.1.1"} 0`,
		`e1kbox_dhcp_leases_in_use 3`,
		`e1kbox_dhcp_messages_total{type="nak"} 2`,
		`e1kbox_dns_cache_hits_total 9310`,
		`e1kbox_dns_upstream_latency_seconds{quantile="0.99"} 0.05`,
		`e1kbox_time_synced 0`,
		`e1kbox_alarms{kind="internet",severity="bad"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestLogBook(t *testing.T) {
	b := NewLogBook(5)
	log := slog.New(b.Handler(slog.NewTextHandler(io.Discard, nil)))
	log.Debug("not kept")
	log.Info("one", "k", 1)
	log.With("source", LogRule).Info("rule log", "rule", "#1", "src", "10.0.0.1:5")
	log.WithGroup("g").Warn("two", "a", "x")
	p := b.Query(LogQuery{})
	want := []LogEntry{
		{Seq: 1, Level: "info", Source: LogSystem, Message: "one", Attrs: []LogAttr{{"k", "1"}}},
		{Seq: 2, Level: "info", Source: LogRule, Message: "rule log", Attrs: []LogAttr{{"rule", "#1"}, {"src", "10.0.0.1:5"}}},
		{Seq: 3, Level: "warn", Source: LogSystem, Message: "two", Attrs: []LogAttr{{"g.a", "x"}}},
	}
	ignoreTime := cmp.Transformer("t", func(e LogEntry) LogEntry { e.Time = time.Time{}; return e })
	if diff := cmp.Diff(want, p.Entries, ignoreTime); diff != "" || p.Last != 3 || p.First != 1 {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if p := b.Query(LogQuery{Source: LogRule}); len(p.Entries) != 1 || p.Entries[0].Seq != 2 {
		t.Errorf("rule entries %+v", p.Entries)
	}
	if p := b.Query(LogQuery{Text: "10.0.0.1"}); len(p.Entries) != 1 {
		t.Errorf("text query %+v", p.Entries)
	}
	if p := b.Query(LogQuery{Level: "warn"}); len(p.Entries) != 1 || p.Entries[0].Message != "two" {
		t.Errorf("warn query %+v", p.Entries)
	}
	// Bounded: the oldest go.
	for range 10 {
		log.Info("more")
	}
	if p := b.Query(LogQuery{Limit: 3}); len(p.Entries) != 3 || p.Entries[2].Seq != 13 || p.First != 9 || !p.More {
		t.Errorf("after 13 entries: %+v", p)
	}
	// Wait wakes up for a new entry.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	late := make(chan struct{})
	go func() { defer close(late); time.Sleep(50 * time.Millisecond); log.Info("late") }()
	t.Cleanup(func() { <-late })
	if !b.Wait(ctx, 13) {
		t.Error("Wait did not see the new entry")
	}
}

func TestLogsAPILongPoll(t *testing.T) {
	book := NewLogBook(0)
	f := newFixture(t, func(o *Options) { o.Logs = book })
	book.Add(LogEntry{Message: "first"})
	var p LogPage
	f.doJSON("GET", "/api/logs", nil, http.StatusOK, &p)
	if len(p.Entries) != 1 || p.Last != 1 {
		t.Fatalf("page %+v", p)
	}
	added := make(chan struct{})
	go func() {
		defer close(added)
		time.Sleep(200 * time.Millisecond)
		book.Add(LogEntry{Message: "other"})
		book.Add(LogEntry{Message: "wanted", Level: "error"})
	}()
	t.Cleanup(func() { <-added })
	start := time.Now()
	f.doJSON("GET", "/api/logs?after=1&wait=10&level=error", nil, http.StatusOK, &p)
	if len(p.Entries) != 1 || p.Entries[0].Message != "wanted" || time.Since(start) > 5*time.Second {
		t.Errorf("long poll: %+v after %v", p, time.Since(start))
	}
	for _, q := range []string{"level=loud", "source=x", "limit=0", "wait=99", "after=-1"} {
		f.doJSON("GET", "/api/logs?"+q, nil, http.StatusBadRequest, nil)
	}
}

// TestHistoryTiersSurviveRestart publishes 20 minutes of samples, saves,
// starts a second server on the same file and finds the 24 h points.
func TestHistoryTiersSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "history.json")
	stats := newFakeStats()
	// At a quarter hour: the 21 minutes below span two quarters, whatever
	// the time the test runs at.
	clock := time.Now().Truncate(15 * time.Minute).Add(-30 * time.Minute)
	stats.start = clock
	stats.now = func() time.Time { return clock }
	f := startFixture(t, func(o *Options) { o.Stats, o.HistoryFile = stats, file }, false)
	for range 20 * 60 / 5 {
		clock = clock.Add(5 * time.Second)
		f.srv.publish(clock)
	}
	var h HistoryMessage
	f.doJSON("GET", "/api/stats/history?range=24h", nil, http.StatusOK, &h)
	// 20 closed minutes and the one just opened by the last sample.
	if len(h.Time) != 21 || h.Interval != 60 || len(h.Ports) != 3 || len(h.CPUs) != 2 || len(h.Conns) != 21 {
		t.Fatalf("24 h history: %d points, %d ports, %d cpus, %d conns", len(h.Time), len(h.Ports), len(h.CPUs), len(h.Conns))
	}
	// port1's rate rises by 4000 pps a second: each minute's mean is
	// 240000 above the last.
	if d := *h.Ports[0].RxPPS[5] - *h.Ports[0].RxPPS[4]; d < 239000 || d > 241000 {
		t.Errorf("minute means differ by %.0f pps, want 240000", d)
	}
	if b := *h.CPUs[1].Busy[3]; b < 0.79 || b > 0.81 {
		t.Errorf("cpu1 busy %v", b)
	}
	f.srv.saveHistory(clock)
	fi, err := os.Stat(file)
	if err != nil || fi.Size() > 4<<20 {
		t.Fatalf("history file: %v, %d bytes", err, fi.Size())
	}

	g := startFixture(t, func(o *Options) { o.HistoryFile = file }, false)
	var h2 HistoryMessage
	g.doJSON("GET", "/api/stats/history?range=24h", nil, http.StatusOK, &h2)
	if diff := cmp.Diff(h.Time, h2.Time); diff != "" || *h2.Ports[0].RxPPS[5] != *h.Ports[0].RxPPS[5] {
		t.Errorf("history after the restart (-before +after):\n%s", diff)
	}
	g.doJSON("GET", "/api/stats/history?range=7d", nil, http.StatusOK, &h2)
	if n := len(h2.Time); n != 2 { // a closed quarter and the open one
		t.Errorf("7 d history after the restart: %d points", len(h2.Time))
	}
	g.doJSON("GET", "/api/stats/history?range=1y", nil, http.StatusBadRequest, nil)

	// A corrupt file is reported and ignored.
	os.WriteFile(file, []byte("{nope"), 0o644)
	k := startFixture(t, func(o *Options) { o.HistoryFile = file }, false)
	k.doJSON("GET", "/api/stats/history?range=24h", nil, http.StatusOK, &h2)
	if len(h2.Time) != 0 {
		t.Errorf("history from a corrupt file: %d points", len(h2.Time))
	}
}

func TestHistoryGaps(t *testing.T) {
	pts := []point{{T: 0, Conns: -1}, {T: 60000, Conns: -1}, {T: 600000, Conns: -1}}
	h := render(Range24h, pts, 60)
	if len(h.Time) != 4 || h.Drops[2] != nil || h.Time[2] != 120 || h.Conns != nil {
		t.Errorf("gap: times %v, drops %v", h.Time, h.Drops)
	}
}

func TestAdminAPI(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "perm", "gokr-pw.txt")
	os.MkdirAll(filepath.Dir(pwFile), 0o755)
	syslog := filepath.Join(dir, "perm", "remote_syslog", "target")
	diag := &fakeDiag{}
	f := newFixture(t, func(o *Options) {
		o.PasswordFiles = []string{pwFile, writePassword(t, testPassword)}
		o.SyslogTargetFile = syslog
		o.Power = diag
		o.GokrazyPort = 18080
	})
	var a AdminAnswer
	f.doJSON("GET", "/api/admin", nil, http.StatusOK, &a)
	if a.PasswordFile != pwFile || a.GokrazyPort != 18080 || a.SyslogTarget != "" || !a.CanReboot {
		t.Errorf("admin %+v", a)
	}
	body := func(v any) []byte { b, _ := json.Marshal(v); return b }
	f.doJSON("POST", "/api/admin/password", body(PasswordChange{Current: "wrong", New: "abcdefgh1"}), http.StatusBadRequest, nil)
	f.doJSON("POST", "/api/admin/password", body(PasswordChange{Current: testPassword, New: "has space"}), http.StatusBadRequest, nil)
	f.doJSON("POST", "/api/admin/password", body(PasswordChange{Current: testPassword, New: testPassword}), http.StatusBadRequest, nil)
	f.doJSON("POST", "/api/admin/password", body(PasswordChange{Current: testPassword, New: "Next-pw-42"}), http.StatusOK, nil)
	if b, _ := os.ReadFile(pwFile); string(b) != "Next-pw-42\n" {
		t.Errorf("password file %q", b)
	}
	if res := f.req("GET", "/api/info", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("old password: %d", res.StatusCode)
	}
	f.pw = "Next-pw-42"
	f.doJSON("GET", "/api/info", nil, http.StatusOK, nil)
	// A new server (a restart) reads the new password first.
	srv, err := New(Options{PasswordFiles: []string{pwFile}, CertFile: "-", KeyFile: "-", Logger: slog.New(slog.DiscardHandler)})
	if err != nil || !srv.currentAuth().matches(User, "Next-pw-42") {
		t.Errorf("restarted server does not take the new password: %v", err)
	}

	f.doJSON("PUT", "/api/admin/syslog", body(SyslogTarget{Target: "nohost"}), http.StatusBadRequest, nil)
	f.doJSON("PUT", "/api/admin/syslog", body(SyslogTarget{Target: "10.0.0.76:514"}), http.StatusOK, nil)
	if b, _ := os.ReadFile(syslog); string(b) != "10.0.0.76:514\n" {
		t.Errorf("syslog target %q", b)
	}
	f.doJSON("PUT", "/api/admin/syslog", body(SyslogTarget{}), http.StatusOK, nil)
	if _, err := os.Stat(syslog); !os.IsNotExist(err) {
		t.Errorf("syslog target not removed: %v", err)
	}
	f.doJSON("POST", "/api/admin/reboot", nil, http.StatusAccepted, nil)
	waitForGo(t, "reboot", 5*time.Second, func() bool { return diag.rebooted() == 1 })

	// Logout: only the user "logout" gets 200.
	r, _ := http.NewRequest("GET", f.ts.URL+"/logout", nil)
	r.SetBasicAuth("logout", "x")
	if res, _ := http.DefaultClient.Do(r); res.StatusCode != http.StatusOK {
		t.Errorf("logout: %d", res.StatusCode)
	}
	r.SetBasicAuth(User, "Next-pw-42")
	if res, _ := http.DefaultClient.Do(r); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("logout with the real password: %d", res.StatusCode)
	}
}

func TestDiagAndCaptureAPI(t *testing.T) {
	d := &fakeDiag{}
	f := newFixture(t, func(o *Options) { o.Diagnostics, o.Capture = d, d })
	res := f.req("POST", "/api/diag/ping", []byte(`{"host":"192.0.2.1","count":2}`))
	b := string(readAll(t, res))
	lines := strings.Split(strings.TrimSpace(b), "\n")
	if res.Header.Get("Content-Type") != "application/x-ndjson" || len(lines) != 3 ||
		!strings.HasPrefix(lines[0], `{"type":"reply","seq":1,"from":"192.0.2.1"`) || !strings.HasPrefix(lines[2], `{"type":"summary"`) {
		t.Errorf("ping stream:\n%s", b)
	}
	f.doJSON("POST", "/api/diag/ping", []byte(`{"host":"x y"}`), http.StatusBadRequest, nil)
	f.doJSON("POST", "/api/diag/ping", []byte(`{"hots":"1.1.1.1"}`), http.StatusBadRequest, nil) // unknown field
	var lr LookupResult
	f.doJSON("POST", "/api/diag/lookup", []byte(`{"name":"a.example"}`), http.StatusOK, &lr)
	if len(lr.Answer) != 1 || lr.RCode != "NOERROR" {
		t.Errorf("lookup %+v", lr)
	}
	// Capture: the port's name becomes its interface; bad requests 400.
	waitForGo(t, "a sample", 5*time.Second, func() bool { f.srv.mu.Lock(); defer f.srv.mu.Unlock(); return f.srv.prev != nil })
	res = f.req("POST", "/api/capture", []byte(`{"port":"port2","proto":"tcp","l4port":443,"host":"192.168.1.5"}`))
	b = string(readAll(t, res))
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-pcapng" || !strings.Contains(res.Header.Get("Content-Disposition"), "e1kbox-port2-") ||
		b != "PCAPNG iface=eth2 proto=tcp host=192.168.1.5 l4=443 count=1000" {
		t.Errorf("capture: %d %v %q", res.StatusCode, res.Header, b)
	}
	for _, bad := range []string{`{"port":"nope"}`, `{"port":"port2","count":200000}`, `{"port":"port2","proto":"sctp"}`,
		`{"port":"port2","proto":"icmp","l4port":1}`, `{"port":"port2","seconds":900}`} {
		f.doJSON("POST", "/api/capture", []byte(bad), http.StatusBadRequest, nil)
	}
}
