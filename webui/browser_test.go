package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func TestBrowser(t *testing.T) {
	browser := newBrowser(t)
	// Gentle traffic with a wave, and five minutes of history published
	// before the page loads, so the charts have something to show.
	now := time.Now()
	stats := newFakeStats()
	stats.accel, stats.wave = 150, 0.1
	stats.start = now.Add(-5 * time.Minute)
	stats.ports = append(stats.ports, PortStats{Name: "host", Interface: "e1khost0", Kind: PortHost, Up: true, SpeedMbps: 10000})
	stats.ipv6 = &IPv6Counters{Forwarded: 5000, Conns: 5, Neighbours: 2, Drops: []DropStat{{Reason: "firewall", Packets: 9}}}
	router, devs, diag, book := newFakeRouter(), newFakeDevices(), &fakeDiag{}, NewLogBook(0)
	upd := &fakeUpdater{}
	f := startFixture(t, func(o *Options) {
		o.Stats = stats
		o.Conntrack = newFakeConntrack(100000)
		o.ConfirmTimeout = 4 * time.Second // the page's default; the tests confirm within it or watch it roll back
		o.Router, o.Devices, o.Diagnostics, o.Capture, o.Power, o.NICs, o.Logs = router, devs, diag, diag, diag, testNICs, book
		o.Updater, o.MaxUpdate = upd, 1<<20
		o.Neighbours = fakeNeighbours{
			{Side: "wan", Port: "port1", IP: netip.MustParseAddr("203.0.113.1"), MAC: "02:00:00:00:0b:99", Resolved: true, Confirmed: now},
			{Side: "lan", Port: "port2", IP: netip.MustParseAddr("2001:db8:6600::100"), MAC: "52:54:00:aa:00:01", Resolved: true, State: "reachable", Confirmed: now},
			{Side: "wan", Port: "port1", IP: netip.MustParseAddr("fe80::1"), MAC: "02:00:00:00:0b:99", Resolved: true, State: "stale", Confirmed: now.Add(-time.Minute)},
		}
		o.SyslogTargetFile = filepath.Join(t.TempDir(), "remote_syslog", "target")
		o.PasswordFiles = []string{filepath.Join(t.TempDir(), "gokr-pw.txt"), writePassword(t, testPassword)}
		o.Logger = slog.New(book.Handler(slog.NewTextHandler(io.Discard, nil)))
	}, false)
	for i := range 300 {
		clock := stats.start.Add(time.Duration(i) * time.Second)
		stats.mu.Lock()
		stats.now = func() time.Time { return clock }
		stats.mu.Unlock()
		f.srv.publish(clock)
	}
	stats.mu.Lock()
	stats.now = time.Now
	stats.mu.Unlock()
	ctx0, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.srv.Run(ctx0) }()
	t.Cleanup(func() { cancel(); <-done })
	url := f.ts.URL + "/"

	t.Run("wrong password gets nothing", func(t *testing.T) {
		ctx := tab(t, browser, "not-the-password")
		for _, p := range []string{"", "api/info", "api/stream/ticket", "static/js/main.js"} {
			// Chromium refuses to show a page whose credentials were
			// rejected (net::ERR_INVALID_AUTH_CREDENTIALS); if it shows
			// one, it must be the 401 answer.
			sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err := chromedp.Do(sctx, chromedp.Navigate(url+p))
			cancel()
			if err != nil && !strings.Contains(err.Error(), "ERR_INVALID_AUTH_CREDENTIALS") {
				t.Fatalf("loading /%s: %v", p, err)
			}
			body := eval[string](t, ctx, `document.body ? document.body.innerText : ''`)
			for _, leak := range []string{"Overview", "port1", "ticket", "import"} {
				if strings.Contains(body, leak) {
					t.Errorf("/%s with a wrong password shows %q", p, body)
				}
			}
		}
	})

	ctx := tab(t, browser, testPassword)

	t.Run("overview shows rising rates", func(t *testing.T) {
		step(t, ctx, "load overview", 30*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`#ports .card.port`)))
		waitFor(t, ctx, "live stream", `document.querySelector('#live').classList.contains('on')`, 10*time.Second)
		waitFor(t, ctx, "a rate", `Number(document.querySelector('#total-rx-pps').dataset.value) > 0`, 10*time.Second)
		first := eval[float64](t, ctx, `Number(document.querySelector('#total-rx-pps').dataset.value)`)
		// The fake's rate grows by 150 pps per second per port weight,
		// faster than its wave falls; wait for the next samples.
		waitFor(t, ctx, "rate rises", fmt.Sprintf(`Number(document.querySelector('#total-rx-pps').dataset.value) > %.17g`, first), 10*time.Second)
		second := eval[float64](t, ctx, `Number(document.querySelector('#total-rx-pps').dataset.value)`)
		if second <= first {
			t.Errorf("rx pps went from %f to %f", first, second)
		}
		txt := eval[string](t, ctx, `document.querySelector('.card.port[data-port="port1"] .pill.ok').textContent`)
		if txt != "up · 1 Gb/s" {
			t.Errorf("port1 link pill %q", txt)
		}
		if down := eval[string](t, ctx, `document.querySelector('.card.port[data-port="port3"] .pill.bad').textContent`); down != "down" {
			t.Errorf("port3 link pill %q", down)
		}
		// Received and sent are charts of their own, a series (colour) per
		// port: x + 4 ports.
		for _, c := range []string{"rx", "tx"} {
			if n := eval[float64](t, ctx, `document.querySelectorAll('#chart-`+c+` .u-legend .u-series').length`); n != 5 {
				t.Errorf("%s chart legend has %v series, want 5", c, n)
			}
		}
		colours := eval[[]string](t, ctx, `[...document.querySelectorAll('#chart-rx .u-legend .u-series:not(:first-child) .u-marker')].map(m => getComputedStyle(m).borderColor)`)
		if len(colours) != 4 || colours[0] == colours[1] || colours[1] == colours[2] {
			t.Errorf("series colours %v: want one per port", colours)
		}
		if n := eval[float64](t, ctx, `document.querySelectorAll('.chart canvas').length`); n != 5 {
			t.Errorf("%v chart canvases, want 5 (received, sent, CPU, drops, connections)", n)
		}
		waitFor(t, ctx, "drops", `document.querySelectorAll('#drops .bar-row').length === 4`, 5*time.Second)
		// The time axis labels do not overlap: each starts after the last ends.
		checkAxis(t, ctx, "#chart-rx")
		// The host port is not a link "up · 10 Gb/s" and its traffic is not
		// in the totals.
		if got := eval[string](t, ctx, `document.querySelector('.card.port[data-port="host"] .pill').textContent`); got != "the box itself" {
			t.Errorf("host port pill %q", got)
		}
		sum := eval[float64](t, ctx, `[...document.querySelectorAll('.card.port:not(.host) [data-metric="rx_pps"]')].reduce((a, e) => a + Number(e.dataset.value), 0)`)
		if total := eval[float64](t, ctx, `Number(document.querySelector('#total-rx-pps').dataset.value)`); math.Abs(total-sum) > 1e-6*sum {
			t.Errorf("received tile %v, the data ports' sum %v", total, sum)
		}
		shot(t, ctx, "overview")
	})

	t.Run("the fast path's state", func(t *testing.T) {
		waitFor(t, ctx, "fast path rate", `Number(document.querySelector('#fast-path').dataset.value) > 0`, 10*time.Second)
		if got := eval[string](t, ctx, `document.querySelector('#fast-path-sub').textContent`); got != "tcx · 12 flows in the kernel" {
			t.Errorf("fast path tile %q", got)
		}
		setFP := func(fp FastPathSummary) {
			stats.mu.Lock()
			stats.fastPath = &fp
			stats.mu.Unlock()
		}
		setFP(FastPathSummary{Mode: "tcx", Flows: 12, Cost: &FastPathCost{JIT: false, Path: "nat", Hit: 840.4, Userspace: 900, Miss: 700}})
		waitFor(t, ctx, "fast path cost", `document.querySelector('#fast-path-sub').textContent.endsWith('ns/frame interpreted')`, 10*time.Second)
		if got := eval[string](t, ctx, `document.querySelector('#fast-path-sub').textContent`); got != "tcx · 12 flows in the kernel · 840 ns/frame interpreted" {
			t.Errorf("fast path tile with its cost %q", got)
		}
		setFP(FastPathSummary{Mode: "off", Reason: "kernel lacks tcx"})
		t.Cleanup(func() { setFP(FastPathSummary{Mode: "tcx", Flows: 12}) })
		waitFor(t, ctx, "fast path off", `document.querySelector('#fast-path').textContent === 'off'`, 10*time.Second)
		if got := eval[string](t, ctx, `document.querySelector('#fast-path-sub').textContent`); got != "rings carry every frame: kernel lacks tcx" {
			t.Errorf("fast path off tile %q", got)
		}
	})

	t.Run("a loop alarm shows and clears", func(t *testing.T) {
		if !eval[bool](t, ctx, `document.querySelector('#loop-alarm').hidden`) {
			t.Fatal("loop alarm shown without a loop")
		}
		setBlocked := func(b bool) {
			stats.mu.Lock()
			stats.ports[1].Blocked, stats.ports[1].LoopWith = b, map[bool]string{true: "port1"}[b]
			stats.mu.Unlock()
		}
		setBlocked(true)
		t.Cleanup(func() { setBlocked(false) })
		waitFor(t, ctx, "alarm", `!document.querySelector('#loop-alarm').hidden`, 10*time.Second)
		if got := eval[string](t, ctx, `document.querySelector('#loop-alarm').textContent`); got != "Loop between ports port1 and port2: port2 is blocked until the loop is gone." {
			t.Errorf("alarm %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('.card.port[data-port="port2"] .pill.bad').textContent`); got != "blocked: loop" {
			t.Errorf("port2 pill %q", got)
		}
		setBlocked(false)
		waitFor(t, ctx, "alarm cleared", `document.querySelector('#loop-alarm').hidden`, 10*time.Second)
	})

	t.Run("edit a rule and see its counter", func(t *testing.T) {
		step(t, ctx, "rules page", 15*time.Second, chromedp.Navigate(url+"#/rules"), chromedp.WaitVisible(chromedp.CSS(`#rules-body tr[data-index="0"]`)))
		if got := eval[string](t, ctx, `document.querySelector('#rules-body tr[data-index="0"] td.rule').textContent`); got != "tcp dport 22 counter accept" {
			t.Fatalf("rule 0 is %q", got)
		}
		click(t, ctx, `#rules-body tr[data-index="1"] td.actions button:nth-child(3)`) // Edit
		step(t, ctx, "editor", 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`#rule-edit-text`)))
		setInput(t, ctx, `#rule-edit-text`, "ip saddr 10.0.0.0/8 tcp dport 3389 counter drop comment \"rdp\"")
		click(t, ctx, `#rule-edit-save`)
		click(t, ctx, `#rules-body tr[data-index="1"] td.actions button:nth-child(1)`) // move it up
		// An invalid rule is refused with the error next to it.
		click(t, ctx, `#rule-add`)
		setInput(t, ctx, `#rule-edit-text`, "tcp dport 70000 accept")
		click(t, ctx, `#rule-edit-save`)
		click(t, ctx, `#rules-apply`)
		waitFor(t, ctx, "rule error", `(document.querySelector('#rules-body tr[data-index="3"] .err') || {}).textContent`, 5*time.Second)
		shot(t, ctx, "rules-error")
		if msg := eval[string](t, ctx, `document.querySelector('#rules-body tr[data-index="3"] .err').textContent`); !strings.Contains(msg, "70000") {
			t.Errorf("error next to the rule: %q", msg)
		}
		click(t, ctx, `#rules-body tr[data-index="3"] td.actions button:nth-child(4)`) // Remove
		click(t, ctx, `#rules-apply`)
		step(t, ctx, "confirm banner", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#confirm-change`)))
		click(t, ctx, `#confirm-change`)
		step(t, ctx, "banner gone", 10*time.Second, chromedp.WaitNotVisible(chromedp.CSS(`#banner`)))
		waitFor(t, ctx, "edited rule first", `document.querySelector('#rules-body tr[data-index="0"] td.rule').textContent.startsWith('ip saddr 10.0.0.0/8 tcp dport 3389 counter drop')`, 10*time.Second)
		waitFor(t, ctx, "its counter", `parseInt(document.querySelector('#rules-body tr[data-index="0"] td.packets').textContent.replace(/,/g, '')) > 0`, 10*time.Second)
		noClippedButtons(t, ctx, "rules"+" at 1280 px")
		shot(t, ctx, "rules")
		cfg, v := f.store.Current()
		var c struct {
			Rules struct {
				Rules []struct{ Dport, Comment string }
			}
		}
		json.Unmarshal(cfg, &c)
		if p := f.store.Pending(); p != nil || len(c.Rules.Rules) != 3 || c.Rules.Rules[0].Dport != "3389" || c.Rules.Rules[0].Comment != "rdp" {
			t.Errorf("store after confirm: pending %v, version %v, rules %+v", p, v, c.Rules.Rules)
		}
	})

	t.Run("config form: field errors, apply and confirm", func(t *testing.T) {
		step(t, ctx, "config page", 15*time.Second, chromedp.Navigate(url+"#/config"), chromedp.WaitVisible(chromedp.CSS(`select[data-path="ports[1].interface"]`)))
		// The interface is picked from the box's NICs, with driver, MAC and link.
		if got := eval[string](t, ctx, `[...document.querySelector('select[data-path="ports[1].interface"]').options].find(o => o.value === 'eth7').textContent`); got != "eth7 · igb · 52:54:00:00:00:17 · link up 1000 Mb/s · free" {
			t.Errorf("NIC picker shows eth7 as %q", got)
		}
		setInput(t, ctx, `select[data-path="ports[1].interface"]`, "")
		click(t, ctx, `#config-apply`)
		waitFor(t, ctx, "field error", `(document.querySelector('select[data-path="ports[1].interface"]').parentElement.querySelector('.err') || {}).textContent === 'required'`, 5*time.Second)
		shot(t, ctx, "config-error")
		setInput(t, ctx, `select[data-path="ports[1].interface"]`, "eth7")
		// A list of strings is edited as comma-separated text; an error
		// about one element shows at the field.
		setInput(t, ctx, `input[data-path="ports[1].addresses"]`, "192.168.1.1/24, 10.1.1.1")
		click(t, ctx, `#config-apply`)
		waitFor(t, ctx, "element error", `(document.querySelector('input[data-path="ports[1].addresses"]').parentElement.querySelector('.err') || {}).textContent?.includes('prefix length')`, 5*time.Second)
		if n := eval[float64](t, ctx, `document.querySelector('#config-errors').hidden ? 0 : document.querySelectorAll('#config-errors li').length`); n != 0 {
			t.Errorf("%v errors listed apart from their fields", n)
		}
		setInput(t, ctx, `input[data-path="ports[1].addresses"]`, "192.168.1.1/24, 10.1.1.1/8")
		setInput(t, ctx, `#confirm-timeout`, "30")
		click(t, ctx, `#config-apply`)
		step(t, ctx, "confirm banner", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#confirm-change`)))
		left := eval[float64](t, ctx, `Number(document.querySelector('#countdown').textContent)`)
		if left < 20 || left > 30 {
			t.Errorf("countdown shows %v s, want about 30", left)
		}
		noClippedButtons(t, ctx, "config-pending"+" at 1280 px")
		shot(t, ctx, "config-pending")
		click(t, ctx, `#confirm-change`)
		step(t, ctx, "banner gone", 10*time.Second, chromedp.WaitNotVisible(chromedp.CSS(`#banner`)))
		cfg, _ := f.store.Current()
		var c struct {
			Ports []struct {
				Interface string
				Addresses []string
				Enabled   *bool
			}
		}
		json.Unmarshal(cfg, &c)
		if f.store.Pending() != nil || len(c.Ports) != 3 || c.Ports[1].Interface != "eth7" ||
			strings.Join(c.Ports[1].Addresses, " ") != "192.168.1.1/24 10.1.1.1/8" || c.Ports[2].Enabled == nil || *c.Ports[2].Enabled {
			t.Errorf("config after confirm: %s", cfg)
		}
	})

	t.Run("config form: the PPPoE password input never shows the stored one", func(t *testing.T) {
		before, _ := f.store.Current()
		var doc map[string]any
		if err := json.Unmarshal(before, &doc); err != nil {
			t.Fatal(err)
		}
		// What the store shows for a stored password: the placeholder.
		doc["nat"].(map[string]any)["wan"] = map[string]any{"pppoe": map[string]any{"username": "u", "password": RedactedSecret}}
		storeConfig(t, f.store, doc)
		t.Cleanup(func() {
			var d map[string]any
			json.Unmarshal(before, &d)
			storeConfig(t, f.store, d)
		})
		pw := `input[data-path="nat.wan.pppoe.password"]`
		for _, tc := range []struct{ typed, want string }{{"", RedactedSecret}, {"n3w-pw", "n3w-pw"}} {
			// From another page, so that the form loads the stored config.
			step(t, ctx, "config page", 15*time.Second, chromedp.Navigate(url+"#/overview"), chromedp.WaitVisible(chromedp.CSS(`#ports`)),
				chromedp.Navigate(url+"#/config"), chromedp.WaitVisible(chromedp.CSS(pw)))
			waitFor(t, ctx, "the password input shows the placeholder, not the password",
				`(e => e.type + '|' + e.value + '|' + e.placeholder)(document.querySelector('`+pw+`')) === 'password||unchanged'`, 5*time.Second)
			setInput(t, ctx, `input[data-path="nat.wan.pppoe.username"]`, "u-"+tc.want)
			setInput(t, ctx, pw, tc.typed)
			click(t, ctx, `#config-apply`)
			step(t, ctx, "confirm banner", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#confirm-change`)))
			click(t, ctx, `#confirm-change`)
			step(t, ctx, "banner gone", 10*time.Second, chromedp.WaitNotVisible(chromedp.CSS(`#banner`)))
			cfg, _ := f.store.Current()
			var c struct {
				NAT struct {
					WAN struct {
						PPPoE struct{ Username, Password string }
					}
				}
			}
			json.Unmarshal(cfg, &c)
			if p := c.NAT.WAN.PPPoE; p.Password != tc.want || p.Username != "u-"+tc.want {
				t.Errorf("typed %q: applied %+v, want password %q", tc.typed, p, tc.want)
			}
		}
	})

	t.Run("apply without confirm rolls back", func(t *testing.T) {
		before, _ := f.store.Current()
		step(t, ctx, "config page", 15*time.Second, chromedp.Navigate(url+"#/config"), chromedp.WaitVisible(chromedp.CSS(`#tab-json`)))
		click(t, ctx, `#tab-json`)
		raw := eval[string](t, ctx, `document.querySelector('#config-json').value`)
		setInput(t, ctx, `#config-json`, strings.Replace(raw, `"nat"`, `"bridge"`, 1))
		setInput(t, ctx, `#confirm-timeout`, "3")
		click(t, ctx, `#config-apply`)
		step(t, ctx, "confirm banner", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#confirm-change`)))
		if _, v := f.store.Current(); f.store.Pending() == nil {
			t.Errorf("no pending change after apply (version %v)", v)
		}
		step(t, ctx, "rollback notice", 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#rollback-notice`)))
		shot(t, ctx, "rolled-back")
		after, _ := f.store.Current()
		if string(after) != string(before) {
			t.Errorf("config after the rollback differs from before:\n%s\n%s", before, after)
		}
		waitFor(t, ctx, "editor shows the old config", `JSON.parse(document.querySelector('#config-json').value).mode === 'nat'`, 10*time.Second)
	})

	t.Run("connections page pages 100k entries", func(t *testing.T) {
		step(t, ctx, "connections", 15*time.Second, chromedp.Navigate(url+"#/connections"), chromedp.WaitVisible(chromedp.CSS(`#ct-body tr[data-id]`)))
		waitFor(t, ctx, "total", `document.querySelector('#ct-info').textContent === '1–100 of 100,000'`, 5*time.Second)
		setInput(t, ctx, `#ct-proto`, "udp")
		waitFor(t, ctx, "filtered", `[...document.querySelectorAll('#ct-body tr[data-id] td:first-child')].every(td => td.textContent === 'UDP') && !document.querySelector('#ct-info').textContent.endsWith('of 100,000')`, 5*time.Second)
		click(t, ctx, `#ct-next`)
		waitFor(t, ctx, "page 2", `document.querySelector('#ct-info').textContent.startsWith('101–200 of')`, 5*time.Second)
		setInput(t, ctx, `#ct-limit`, "50")
		waitFor(t, ctx, "50 per page", `document.querySelector('#ct-info').textContent.startsWith('1–50 of')`, 5*time.Second)
		click(t, ctx, `#ct-next`)
		waitFor(t, ctx, "page 2 of 50", `document.querySelector('#ct-info').textContent.startsWith('51–100 of')`, 5*time.Second)
		click(t, ctx, `#ct-next`)
		waitFor(t, ctx, "page 3 of 50", `document.querySelector('#ct-info').textContent.startsWith('101–150 of')`, 5*time.Second)
		click(t, ctx, `#ct-prev`)
		waitFor(t, ctx, "back to page 2", `document.querySelector('#ct-info').textContent.startsWith('51–100 of')`, 5*time.Second)
		noClippedButtons(t, ctx, "connections"+" at 1280 px")
		shot(t, ctx, "connections")
	})

	t.Run("other pages render", func(t *testing.T) {
		for _, p := range []struct{ page, ready string }{
			{"bridge", `#fdb-body tr td.mono`},
			{"tuning", `#tuning tr[data-knob="itr"]`},
			{"system", `#history-body tr td.mono`},
		} {
			step(t, ctx, p.page, 15*time.Second, chromedp.Navigate(url+"#/"+p.page), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			noClippedButtons(t, ctx, p.page+" at 1280 px")
			shot(t, ctx, p.page)
		}
		if up := eval[string](t, ctx, `document.querySelector('#sys-uptime').textContent`); up != "1d 2h" {
			t.Errorf("uptime %q, want 1d 2h", up)
		}
		// The kernel tile: its release, the BPF JIT and the fast path's
		// measured cost; the kernel card the rest.
		if got := eval[string](t, ctx, `document.querySelector('#sys-kernel').textContent`); got != "6.12.118" {
			t.Errorf("kernel tile %q, want the release 6.12.118", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#sys-kernel-sub').textContent`); got != "BPF JIT on · fast path 121 ns/frame" {
			t.Errorf("kernel tile's line %q", got)
		}
		for id, want := range map[string]string{
			"kernel-source":    "Debian 6.12.118-1",
			"kernel-watchdog":  "iTCO_wdt, 30 s, active",
			"kernel-fast-path": "nat frame: 121 ns in the kernel (JIT), 216 ns in userspace (without the rings); a miss 95 ns",
		} {
			if got := eval[string](t, ctx, `document.querySelector('#`+id+`').textContent`); got != want {
				t.Errorf("#%s %q, want %q", id, got, want)
			}
		}
	})

	browserPages(t, ctx, browser, f, url, pageFakes{router: router, devices: devs, diag: diag, book: book, stats: stats, updater: upd})

	t.Run("phone layout", func(t *testing.T) {
		step(t, ctx, "phone", 20*time.Second,
			chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			chromedp.Navigate(url+"#/overview"), chromedp.WaitVisible(chromedp.CSS(`#ports .card.port`)))
		time.Sleep(1500 * time.Millisecond)
		// Nothing wider than the screen.
		if w := eval[float64](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("page is %v px wide on a 390 px phone", w)
		}
		shot(t, ctx, "overview-phone")
		step(t, ctx, "dark", 10*time.Second, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(url+"#/overview"), chromedp.WaitVisible(chromedp.CSS(`#ports .card.port`)))
		click(t, ctx, `#theme`)
		time.Sleep(2500 * time.Millisecond)
		shot(t, ctx, "overview-dark")
		click(t, ctx, `#theme`)
	})

	passwordChange(t, ctx, f, url)
}

// storeConfig applies doc to the fake store and confirms it.
func storeConfig(t *testing.T, s *fakeStore, doc map[string]any) {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Apply(b, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Confirm(id); err != nil {
		t.Fatal(err)
	}
}
