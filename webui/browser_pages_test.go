package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
)

// pageFakes are the fakes the pages of browserPages drive.
type pageFakes struct {
	router  *fakeRouter
	devices *fakeDevices
	diag    *fakeDiag
	book    *LogBook
	stats   *fakeStats
	updater *fakeUpdater
}

func browserPages(t *testing.T, ctx, browser context.Context, f *fixture, url string, fk pageFakes) {
	t.Run("overview shows the network", func(t *testing.T) {
		step(t, ctx, "overview", 30*time.Second, chromedp.Navigate(url+"#/overview"), chromedp.WaitVisible(chromedp.CSS(`#wan`)))
		if got := eval[string](t, ctx, `document.querySelector('#wan-address').textContent`); got != "203.0.113.2/24" {
			t.Errorf("WAN address %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#wan-link').textContent`); got != "eth1 › VLAN 7 (priority 0, control 6)" {
			t.Errorf("WAN link %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#wan .iface').textContent`); got != "port1 · VLAN 7 · dhcp" {
			t.Errorf("WAN card head %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#wan-internet').textContent`); !strings.HasPrefix(got, "reachable · 11.3 ms (ping 1.1.1.1)") {
			t.Errorf("Internet %q", got)
		}
		// IPv6: the delegation and the box's addresses on the WAN card, its
		// first /64 (and the old one, deprecated) on the LAN card.
		for _, c := range []struct{ sel, prefix, rest string }{
			{"#wan-dhcpv6", "bound", ""},
			{"#wan-ipv6-prefix", "2001:db8:6600::/56", "valid 1h 59m · preferred 59m "},
			{`#wan-ipv6-address [data-address="2001:db8:64::100"]`, "2001:db8:64::100 preferred", "DHCPv6 · valid 1h 59m · preferred 59m "},
			{`#wan-ipv6-address [data-address="2001:db8:64:0:1c2d:3e4f:5a6b:7c8d"]`, "2001:db8:64:0:1c2d:3e4f:5a6b:7c8d preferred", "SLAAC · valid 1h 29m · preferred 29m "},
			{`#wan-ipv6-address [data-address="2001:db8:64::101"]`, "2001:db8:64::101 duplicate", "DHCPv6 · valid 1h 59m"},
			{`#wan-ipv6-address > div:last-child`, "fe80::5054:ff:fe00:11 preferred", "link-local"},
			{"#wan-ipv6-gateway", "fe80::1", ""},
			{"#lan-ipv6-prefix", "2001:db8:6600::/64", "valid 1h 59m · preferred 59m "},
			{"#lan-ipv6-deprecated", "2001:db8:5500::/64", "valid 1h 29m · deprecated"},
			{"#lan-ipv6-tables", "5 connections · 2 neighbours", ""},
		} {
			// Lifetimes count down while the test runs: 1h 59m, 59m 58s.
			waitFor(t, ctx, c.sel, `((document.querySelector('`+c.sel+`') || {}).textContent || '').startsWith('`+c.prefix+c.rest+`')`, 5*time.Second)
		}
		waitFor(t, ctx, "devices online", `document.querySelector('#devices-online').dataset.value === '3'`, 5*time.Second)
		waitFor(t, ctx, "WAN download", `Number(document.querySelector('#wan-down').dataset.value) > 0 && Number(document.querySelector('#wan-down').dataset.value) === Number(document.querySelector('.card.port[data-port="port1"] [data-metric="rx_pps"]').dataset.value) * 8 * 600`, 5*time.Second)
		// An alarm for a lost WAN lease, gone when it is back.
		fk.router.edit(func(s *RouterStatus) { s.WAN.State, s.WAN.Address = WANInit, netip.Prefix{} })
		waitFor(t, ctx, "WAN alarm", `!!document.querySelector('#alarms [data-kind="wan_down"]')`, 15*time.Second)
		if got := eval[string](t, ctx, `document.querySelector('#alarms [data-kind="wan_down"]').textContent`); !strings.Contains(got, "No WAN address") {
			t.Errorf("WAN alarm %q", got)
		}
		docShot(t, ctx, "overview-alarm")
		fk.router.edit(func(s *RouterStatus) { *s = newFakeRouter().st })
		waitFor(t, ctx, "WAN alarm gone", `!document.querySelector('#alarms [data-kind="wan_down"]')`, 15*time.Second)
		// A PPPoE WAN: the session on the link row and its own rows.
		fk.router.edit(func(s *RouterStatus) {
			s.WAN.Mode = WANModePPPoE
			s.WAN.Link.PPPoE = &WANPPPoE{State: "up", ACName: "ispvm", ACMAC: "52:54:00:15:50:01", SessionID: 3,
				EchoRTT: Duration(2 * time.Millisecond), UpSince: time.Now().Add(-time.Hour), Reconnects: 2, LastDownReason: "PADT from the AC"}
		})
		waitFor(t, ctx, "PPPoE link row", `document.querySelector('#wan-link').textContent === 'eth1 › VLAN 7 (priority 0, control 6) › PPPoE (ispvm, session 3)'`, 15*time.Second)
		for sel, want := range map[string]string{"#wan-pppoe": "up for 1h 0m · echo 2.0 ms", "#wan-pppoe-reconnects": "2 · last down: PADT from the AC"} {
			if got := eval[string](t, ctx, `document.querySelector('`+sel+`').textContent`); got != want {
				t.Errorf("%s %q, want %q", sel, got, want)
			}
		}
		fk.router.edit(func(s *RouterStatus) { *s = newFakeRouter().st })
		waitFor(t, ctx, "the DHCP WAN back", `!document.querySelector('#wan-pppoe')`, 15*time.Second)
		// The link-down alarm of port3 stays.
		if !eval[bool](t, ctx, `!!document.querySelector('#alarms [data-kind="link_down"]')`) {
			t.Error("no link-down alarm for port3")
		}
		docShot(t, ctx, "overview")
		click(t, ctx, `#unit-pps`)
		waitFor(t, ctx, "pps axis", `(document.querySelector('#chart-rx').dataset.xticks || '').length > 0 && [...document.querySelectorAll('#chart-rx .u-legend .u-series td')].some(td => td.textContent.endsWith('pps'))`, 5*time.Second)
		click(t, ctx, `#range-24h`)
		// The 24 h chart, not the live one still drawn until its answer came.
		waitFor(t, ctx, "24 h chart", `document.querySelector('#chart-rx').dataset.range === '86400' && Number(document.querySelector('#chart-rx').dataset.points) >= 5`, 10*time.Second)
		checkAxis(t, ctx, "#chart-rx")
		// Five minutes of history still get an hour of axis (else it has
		// one label or two, by the time of day).
		if got := eval[float64](t, ctx, `Number(document.querySelector('#chart-rx').dataset.xspan)`); got < 3600 {
			t.Errorf("24 h chart spans %v s, want at least an hour", got)
		}
		click(t, ctx, `#unit-bps`)
		docShot(t, ctx, "overview-24h")
	})

	t.Run("connections: IPv6", func(t *testing.T) {
		f.ct.addIPv6(3)
		step(t, ctx, "connections", 15*time.Second, chromedp.Navigate(url+"#/connections"), chromedp.WaitVisible(chromedp.CSS(`#ct-body tr[data-id]`)))
		setInput(t, ctx, `#ct-addr`, "2001:db8:6600::/56")
		waitFor(t, ctx, "IPv6 only", `document.querySelector('#ct-info').textContent === '1–3 of 3'`, 5*time.Second)
		// The cells but the age (a countdown): "expires in 59m 59s".
		rows := eval[[][]string](t, ctx, `[...document.querySelectorAll('#ct-body tr[data-kind="routed"]')].map(r => [...r.cells].map(c => c.textContent).map((s, i) => i === 7 ? s.replace(/ in .*/, ' in …') : s))`)
		want := [][]string{ // by bytes (none kept): by source
			{"TCP", "established", "[2001:db8:64::1]:40000", "[2001:db8:6600::100]:22", "routed (IPv6)", "12", "–", "expires in …", ""},
			{"TCP", "established", "[2001:db8:6600::100]:51000", "[2001:db8:64::1]:443", "routed (IPv6)", "10", "–", "expires in …", ""},
			{"TCP", "established", "[2001:db8:6600::200]:51001", "[2001:db8:64::1]:443", "routed (IPv6)", "11", "–", "expires in …", ""},
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("IPv6 connections (-want +got):\n%s", diff)
		}
		// The kind filter with the address cleared: the same three.
		setInput(t, ctx, `#ct-addr`, "")
		setInput(t, ctx, `#ct-kind`, "routed")
		waitFor(t, ctx, "kind routed", `document.querySelector('#ct-info').textContent === '1–3 of 3' && document.querySelectorAll('#ct-body tr[data-kind="routed"]').length === 3`, 5*time.Second)
		docShot(t, ctx, "connections-ipv6")
		setInput(t, ctx, `#ct-kind`, "")
	})

	t.Run("devices: IPv6 neighbours", func(t *testing.T) {
		step(t, ctx, "devices", 15*time.Second, chromedp.Navigate(url+"#/devices"), chromedp.WaitVisible(chromedp.CSS(`#nb6-body tr[data-ip]`)))
		rows := eval[[][]string](t, ctx, `[...document.querySelectorAll('#nb6-body tr[data-ip]')].map(r => [...r.cells].slice(0, 5).map(c => c.textContent))`)
		want := [][]string{
			{"2001:db8:6600::100", "52:54:00:aa:00:01", "laptop", "lan · port2", "reachable"},
			{"fe80::1", "02:00:00:00:0b:99", "(the ISP)", "wan · port1", "stale"},
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("IPv6 neighbours (-want +got):\n%s", diff)
		}
	})

	t.Run("devices: make static and forget", func(t *testing.T) {
		step(t, ctx, "devices", 15*time.Second, chromedp.Navigate(url+"#/devices"), chromedp.WaitVisible(chromedp.CSS(`#dev-body tr[data-mac]`)))
		noDialogs(t, ctx)
		if n := eval[float64](t, ctx, `document.querySelectorAll('#dev-body tr[data-mac]').length`); n != 4 {
			t.Fatalf("%v devices listed, want 4", n)
		}
		row := eval[[]string](t, ctx, `[...document.querySelector('#dev-body tr[data-mac="52:54:00:aa:00:01"]').cells].map(c => c.textContent)`)
		if row[0] != "laptop" || row[2] != "192.168.1.101" || !strings.HasPrefix(row[3], "bound") || row[6] != "1.72 GiB" || row[7] != "87.9 MiB" {
			t.Errorf("laptop row %q", row)
		}
		if got := eval[string](t, ctx, `document.querySelector('#dev-summary').textContent`); got != "3 online · 4 known" {
			t.Errorf("summary %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#dev-body tr[data-mac="52:54:00:aa:00:02"]').cells[3].textContent`); !strings.Contains(got, "not used yet") {
			t.Errorf("state of a lease not used yet %q", got)
		}
		// At 1280 px every action shows its whole label (it read "Forg…"
		// and "Edit in Conf…", cut off by the table's scroll box).
		noClippedButtons(t, ctx, "devices at 1280 px")
		docShot(t, ctx, "devices")
		click(t, ctx, `#dev-body tr[data-mac="52:54:00:aa:00:01"] button[data-action="static"]`)
		waitFor(t, ctx, "made static", `!document.querySelector('#dev-body tr[data-mac="52:54:00:aa:00:01"] button[data-action="static"]')`, 10*time.Second)
		if !fk.devices.static("52:54:00:aa:00:01") {
			t.Error("laptop not static in the fake")
		}
		click(t, ctx, `#dev-body tr[data-mac="52:54:00:aa:00:02"] button[data-action="forget"]`)
		waitFor(t, ctx, "forgotten", `!document.querySelector('#dev-body tr[data-mac="52:54:00:aa:00:02"]')`, 10*time.Second)
		// A static lease of the config is the config's: no Forget (the API
		// answers 409, TestRouterAndDevicesAPI), a way to the Config page.
		printer := `#dev-body tr[data-mac="52:54:00:aa:00:03"]`
		if got := eval[[]string](t, ctx, `[...document.querySelectorAll('`+printer+` [data-action]')].map(e => e.dataset.action + ' ' + (e.getAttribute('href') || ''))`); !slices.Equal(got, []string{"config #/config"}) {
			t.Errorf("actions of a config static lease: %q, want only a link to #/config", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('`+printer+`').cells[3].textContent`); !strings.Contains(got, "static · config") {
			t.Errorf("state of a config static lease %q", got)
		}
	})

	t.Run("logs: filters, rule records, live tail", func(t *testing.T) {
		log := f.srv.log
		log.Info("dataplane config applied", "change", "live", "why", "rules")
		log.Warn("e1000e hardware unit hang: mitigation applied", "knob", "hang-mitigation", "target", "eth2")
		for i := range 3 {
			log.LogAttrs(context.Background(), slog.LevelInfo, "rule log", slog.String("source", LogRule),
				slog.String("rule", "#1 forward: tcp dport 22 log drop"), slog.String("verdict", "drop"), slog.String("in", "port2"),
				slog.String("proto", "tcp"), slog.String("src", fmt.Sprintf("192.168.1.%d:5123%d", 10+i, i)), slog.String("dst", "203.0.113.9:22"), slog.Int("len", 60))
		}
		step(t, ctx, "logs", 15*time.Second, chromedp.Navigate(url+"#/logs"), chromedp.WaitVisible(chromedp.CSS(`#log-body tr[data-seq]`)))
		if n := eval[float64](t, ctx, `document.querySelectorAll('#log-body tr[data-source="rule"]').length`); n != 3 {
			t.Errorf("%v rule records shown, want 3", n)
		}
		setInput(t, ctx, `#log-source`, "rule")
		waitFor(t, ctx, "only rule records", `document.querySelectorAll('#log-body tr[data-seq]').length === 3 && !document.querySelector('#log-body tr[data-source="system"]')`, 5*time.Second)
		if got := eval[string](t, ctx, `document.querySelector('#log-body tr[data-source="rule"] td.msg').textContent`); !strings.Contains(got, "rule=#1 forward: tcp dport 22 log drop") || !strings.Contains(got, "dst=203.0.113.9:22") {
			t.Errorf("rule record %q", got)
		}
		setInput(t, ctx, `#log-source`, "")
		setInput(t, ctx, `#log-level`, "warn")
		waitFor(t, ctx, "warnings only", `document.querySelectorAll('#log-body tr[data-seq]').length >= 1 && [...document.querySelectorAll('#log-body tr[data-seq]')].every(r => r.className === 'lvl-warn' || r.className === 'lvl-error')`, 5*time.Second)
		setInput(t, ctx, `#log-level`, "")
		setInput(t, ctx, `#log-q`, "192.168.1.11")
		waitFor(t, ctx, "search", `document.querySelectorAll('#log-body tr[data-seq]').length === 1`, 5*time.Second)
		setInput(t, ctx, `#log-q`, "")
		waitFor(t, ctx, "all again", `document.querySelectorAll('#log-body tr[data-source="rule"]').length === 3`, 5*time.Second)
		time.Sleep(300 * time.Millisecond) // the live poll is waiting
		log.Error("a new record for the live tail", "n", 42)
		waitFor(t, ctx, "live tail", `document.querySelector('#log-body tr[data-seq] td.msg').textContent.startsWith('a new record for the live tail')`, 10*time.Second)
		noClippedButtons(t, ctx, "logs"+" at 1280 px")
		docShot(t, ctx, "logs")
	})

	t.Run("diagnostics: ping, traceroute, lookup, capture", func(t *testing.T) {
		step(t, ctx, "diagnostics", 15*time.Second, chromedp.Navigate(url+"#/diagnostics"), chromedp.WaitVisible(chromedp.CSS(`#diag-host`)))
		waitFor(t, ctx, "sources", `document.querySelectorAll('#diag-source option').length === 2`, 5*time.Second)
		setInput(t, ctx, `#diag-host`, "192.0.2.1")
		setInput(t, ctx, `#ping-count`, "3")
		click(t, ctx, `#ping-run`)
		waitFor(t, ctx, "ping summary", `(document.querySelector('#ping-summary') || {}).textContent?.startsWith('192.0.2.1: 3 sent, 3 received, 0% lost')`, 10*time.Second)
		if n := eval[float64](t, ctx, `document.querySelectorAll('#ping-body tr').length`); n != 3 {
			t.Errorf("%v ping rows", n)
		}
		click(t, ctx, `#trace-run`)
		waitFor(t, ctx, "traceroute", `(document.querySelector('#traceroute-summary') || {}).textContent === 'Done.'`, 10*time.Second)
		if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#traceroute-body tr td:nth-child(2)')].map(td => td.textContent)`); strings.Join(got, " ") != "192.168.1.1 * 192.0.2.1" {
			t.Errorf("hops %q", got)
		}
		setInput(t, ctx, `#dns-name`, "box.example")
		click(t, ctx, `#dns-run`)
		waitFor(t, ctx, "answer", `(document.querySelector('#dns-answer') || {}).textContent?.includes('192.0.2.7')`, 10*time.Second)
		setInput(t, ctx, `#cap-proto`, "udp")
		setInput(t, ctx, `#cap-host`, "192.168.1.10")
		setInput(t, ctx, `#cap-l4port`, "53")
		setInput(t, ctx, `#cap-count`, "1000")
		waitFor(t, ctx, "capture ports", `document.querySelectorAll('#cap-port option').length === 4`, 5*time.Second)
		setInput(t, ctx, `#cap-port`, "port2")
		click(t, ctx, `#cap-run`)
		waitFor(t, ctx, "capture file", `!!document.querySelector('#cap-done #cap-file')`, 10*time.Second)
		if name := eval[string](t, ctx, `document.querySelector('#cap-file').download`); !strings.HasPrefix(name, "e1kbox-port2-") || !strings.HasSuffix(name, ".pcapng") {
			t.Errorf("file name %q", name)
		}
		body := evalAsync(t, ctx, `window.e1kboxCapture.text()`)
		if body != "PCAPNG iface=eth2 proto=udp host=192.168.1.10 l4=53 count=1000" {
			t.Errorf("capture file %q", body)
		}
		noClippedButtons(t, ctx, "diagnostics"+" at 1280 px")
		docShot(t, ctx, "diagnostics")
	})

	t.Run("system: every upload ends in a state the page shows", func(t *testing.T) {
		gaf := filepath.Join(t.TempDir(), "e1kbox.gaf")
		if err := os.WriteFile(gaf, []byte(strings.Repeat("gaf", 100000)), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name          string
			refuse        error
			abort         bool
			state, reason string
		}{
			{name: "refused", refuse: refusal{http.StatusForbidden, "the update is not signed"}, state: "refused", reason: "update refused: the update is not signed"},
			// A box that goes away mid-upload: before, the page kept
			// showing the upload's progress and no state (a CI run's
			// TestDashboardUpdate waited 12 minutes for it).
			{name: "lost", abort: true, state: "failed", reason: "The upload failed (connection lost)."},
		} {
			fk.updater.mu.Lock()
			fk.updater.refuse, fk.updater.abort = tc.refuse, tc.abort
			fk.updater.mu.Unlock()
			step(t, ctx, "system "+tc.name, 15*time.Second, chromedp.Navigate(url+"#/system"), chromedp.WaitVisible(chromedp.CSS(`#update-file`)),
				chromedp.SetUploadFiles(chromedp.CSS(`#update-file`), []string{gaf}))
			click(t, ctx, `#update-start`)
			waitFor(t, ctx, tc.name+" upload's state", `['refused', 'failed', 'done'].includes(document.querySelector('#update-card').dataset.state)`, 10*time.Second)
			got := eval[[]string](t, ctx, `[document.querySelector('#update-card').dataset.state, document.querySelector('#update-error').textContent, String(document.querySelector('#update-error').hidden), String(document.querySelector('#update-start').disabled)]`)
			if diff := cmp.Diff([]string{tc.state, tc.reason, "false", "false"}, got); diff != "" {
				t.Errorf("%s upload: state, error, error hidden, button disabled (-want +got):\n%s", tc.name, diff)
			}
			fk.updater.mu.Lock()
			n := fk.updater.received
			fk.updater.mu.Unlock()
			if n != 300000 {
				t.Errorf("%s upload: the box received %d bytes, want 300000", tc.name, n)
			}
		}
		fk.updater.mu.Lock()
		fk.updater.refuse, fk.updater.abort = nil, false
		fk.updater.mu.Unlock()
	})

	t.Run("admin: syslog target and reboot", func(t *testing.T) {
		step(t, ctx, "admin", 15*time.Second, chromedp.Navigate(url+"#/admin"), chromedp.WaitVisible(chromedp.CSS(`#syslog-target`)))
		noDialogs(t, ctx)
		if got := eval[string](t, ctx, `document.querySelector('#gokrazy-link').href`); got != "http://127.0.0.1/" { // port 80
			t.Errorf("gokrazy link %q", got)
		}
		setInput(t, ctx, `#syslog-target`, "not a target")
		click(t, ctx, `#syslog-save`)
		waitFor(t, ctx, "syslog error", `document.querySelector('#syslog-err').textContent.includes('host:port')`, 5*time.Second)
		setInput(t, ctx, `#syslog-target`, "192.168.1.10:514")
		click(t, ctx, `#syslog-save`)
		file := f.srv.opts.SyslogTargetFile
		waitForGo(t, "syslog target file", 5*time.Second, func() bool { b, _ := os.ReadFile(file); return string(b) == "192.168.1.10:514\n" })
		click(t, ctx, `#reboot`)
		waitForGo(t, "reboot", 5*time.Second, func() bool { return fk.diag.rebooted() == 1 })
		noClippedButtons(t, ctx, "admin"+" at 1280 px")
		docShot(t, ctx, "admin")
	})

	t.Run("config: a change of the address in use says where to go", func(t *testing.T) {
		// The page is on 127.0.0.1: pretend it is one of the box's addresses.
		cfg, _ := f.store.Current()
		moved := strings.Replace(string(cfg), `"192.168.1.2/24"`, `"127.0.0.1/8"`, 1)
		f.store.mu.Lock()
		f.store.versions = append(f.store.versions, fakeVersion{Version{ID: "v-local", Time: time.Now(), Source: "test"}, json.RawMessage(moved)})
		f.store.current = len(f.store.versions) - 1
		f.store.mu.Unlock()
		step(t, ctx, "config", 15*time.Second, chromedp.Navigate(url+"#/config"), chromedp.WaitVisible(chromedp.CSS(`input[data-path="hostPort.addresses"]`)))
		setInput(t, ctx, `input[data-path="hostPort.addresses"]`, "192.168.1.3/24")
		setInput(t, ctx, `#confirm-timeout`, "30")
		click(t, ctx, `#config-apply`)
		step(t, ctx, "notice", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#address-notice a.moved-url`)))
		u, _ := neturl.Parse(url)
		if got := eval[string](t, ctx, `document.querySelector('#address-notice a.moved-url').href`); got != "http://192.168.1.3:"+u.Port()+"/" {
			t.Errorf("new address %q", got)
		}
		docShot(t, ctx, "config-moved")
		click(t, ctx, `#confirm-change`)
		step(t, ctx, "banner gone", 10*time.Second, chromedp.WaitNotVisible(chromedp.CSS(`#banner`)))
	})

	t.Run("opened with credentials in the URL", func(t *testing.T) {
		// No extra headers: the browser uses the URL's credentials, as
		// with the URL make run prints.
		bctx, cancel := chromedp.NewContext(browser)
		defer cancel()
		u, _ := neturl.Parse(url)
		u.User = neturl.UserPassword(User, testPassword)
		within(t, "opening a tab", 30*time.Second, cancel, func() error { return chromedp.Do(bctx) })
		step(t, bctx, "overview via credentials", 30*time.Second, chromedp.Navigate(u.String()), chromedp.WaitVisible(chromedp.CSS(`#ports .card.port`)))
		waitFor(t, bctx, "live stream", `document.querySelector('#live').classList.contains('on')`, 10*time.Second)
		if got := evalAsync(t, bctx, `fetch(new URL('/api/info', location.origin)).then(r => String(r.status))`); got != "200" {
			t.Errorf("/api/info from the page: %s", got)
		}
		// Logout: the browser forgets the password.
		step(t, bctx, "admin", 15*time.Second, chromedp.Navigate(u.String()+"#/admin"), chromedp.WaitVisible(chromedp.CSS(`#logout`)))
		click(t, bctx, `#logout`)
		step(t, bctx, "logged out", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#logged-out`)))
		// Without the password the browser would ask for one (headless, the
		// request then waits for an answer that never comes).
		if got := evalAsync(t, bctx, `Promise.race([fetch(new URL('/api/info', location.origin)).then(r => String(r.status)),
			new Promise(r => setTimeout(() => r('asks for the password'), 3000))])`); got != "401" && got != "asks for the password" {
			t.Errorf("/api/info after logout: %s, want 401", got)
		}
	})
}

// passwordChange runs last: the tab's password stops working.
func passwordChange(t *testing.T, ctx context.Context, f *fixture, url string) {
	t.Run("admin: password change", func(t *testing.T) {
		step(t, ctx, "admin", 15*time.Second, chromedp.Navigate(url+"#/admin"), chromedp.WaitVisible(chromedp.CSS(`#pw-current`)))
		setInput(t, ctx, `#pw-current`, "wrong-password")
		setInput(t, ctx, `#pw-new`, "n3w-Passw0rd")
		setInput(t, ctx, `#pw-again`, "n3w-Passw0rd")
		click(t, ctx, `#pw-change`)
		waitFor(t, ctx, "wrong current", `document.querySelector('#pw-current-err').textContent === 'this is not the current password'`, 5*time.Second)
		setInput(t, ctx, `#pw-current`, testPassword)
		setInput(t, ctx, `#pw-new`, "short")
		setInput(t, ctx, `#pw-again`, "short")
		click(t, ctx, `#pw-change`)
		waitFor(t, ctx, "too short", `document.querySelector('#pw-new-err').textContent.includes('8 to 128')`, 5*time.Second)
		setInput(t, ctx, `#pw-new`, "n3w-Passw0rd")
		setInput(t, ctx, `#pw-again`, "n3w-Passw0rd")
		click(t, ctx, `#pw-change`)
		step(t, ctx, "changed", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#pw-done`)))
		docShot(t, ctx, "admin-password")
		b, err := os.ReadFile(f.srv.opts.PasswordFiles[0])
		if err != nil || string(b) != "n3w-Passw0rd\n" {
			t.Errorf("password file %q %v", b, err)
		}
		if fi, err := os.Stat(f.srv.opts.PasswordFiles[0]); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("password file mode %v %v", fi.Mode(), err)
		}
		for pw, want := range map[string]int{testPassword: http.StatusUnauthorized, "n3w-Passw0rd": http.StatusOK} {
			r, _ := http.NewRequest("GET", f.ts.URL+"/api/info", nil)
			r.SetBasicAuth(User, pw)
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("password %q after the change: %d, want %d", pw, res.StatusCode, want)
			}
		}
	})
}
