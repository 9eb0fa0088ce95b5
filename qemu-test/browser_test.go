package qemutest

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/capture"
	"e1kbox/internal/testenv"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// dashboardShows loads the box's dashboard in headless chromium (through
// the VM's forwarded port), waits until the live packets/s figure is above
// zero while traffic flows, and saves a screenshot as a test artifact;
// then the Logs page shows the box's log, and a capture of 20 ICMP frames
// on eth1 from the Diagnostics page opens with tcpdump -r.
func dashboardShows(t *testing.T, b *box) {
	t.Helper()
	ctx := browse(t, b, "")
	tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	defer tcancel()
	err := chromedp.Do(tctx,
		chromedp.Navigate(b.dashboardURL("/")),
		chromedp.WaitVisible(chromedp.CSS(`#ports .card.port`)),
	)
	if err != nil {
		t.Fatalf("loading the dashboard: %v", err)
	}
	var pps float64
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		v, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`Number(document.querySelector('#total-rx-pps').dataset.value || 0)`))
		if err == nil && v > 0 {
			pps = v
			break
		}
		time.Sleep(time.Second)
	}
	if pps <= 0 {
		t.Errorf("the dashboard never showed live traffic (rx pps stayed 0)")
	}
	time.Sleep(3 * time.Second) // let the charts draw a few samples
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(artifacts, "dashboard.png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard shows %.0f rx pps; screenshot saved to %s", pps, p)
	routerShows(t, tctx, b)

	// The Logs page shows the supervisor's records (a new time budget).
	tctx, tcancel2 := context.WithTimeout(ctx, 90*time.Second)
	defer tcancel2()
	err = chromedp.Do(tctx, chromedp.Navigate(b.dashboardURL("/#/logs")), chromedp.WaitVisible(chromedp.CSS(`#log-body tr[data-seq]`)))
	if err != nil {
		t.Fatalf("logs page: %v", err)
	}
	if n, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`document.querySelectorAll('#log-body tr[data-seq]').length`)); err != nil || n < 5 {
		t.Errorf("logs page shows %v entries (%v)", n, err)
	}
	saveShot(t, tctx, "logs.png")

	// A capture of ICMP on port1 from the Diagnostics page while A pings.
	err = chromedp.Do(tctx, chromedp.Navigate(b.dashboardURL("/#/diagnostics")), chromedp.WaitVisible(chromedp.CSS(`#cap-run`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#cap-port option').length > 0`, chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatalf("diagnostics page: %v", err)
	}
	set := `(s, v) => { const e = document.querySelector(s); e.value = v; e.dispatchEvent(new Event('change')); }`
	// The port on eth1 (A's side): "lan" in NAT mode, "port1" in bridge mode.
	if _, err := chromedp.Run(tctx, chromedp.Evaluate[chromedp.Void](`(`+set+`)('#cap-port', [...document.querySelectorAll('#cap-port option')].find(o => o.textContent.endsWith('(eth1)')).value), (`+set+`)('#cap-proto', 'icmp'),
		(`+set+`)('#cap-count', '20'), (`+set+`)('#cap-seconds', '30'), document.querySelector('#cap-run').click()`)); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(tctx, chromedp.Poll[chromedp.Void](`!!document.querySelector('#cap-done')`, chromedp.WithPollingTimeout(40*time.Second)))
	if err != nil {
		t.Fatalf("capture never finished: %v", err)
	}
	saveShot(t, tctx, "diagnostics.png")
	b64, err := chromedp.Run(tctx, chromedp.Evaluate[string](`window.e1kboxCapture.arrayBuffer().then(a => btoa(String.fromCharCode(...new Uint8Array(a))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(b64)
	f, err := capture.Read(raw)
	if err != nil || len(f.Packets) != 20 || f.Interface != "eth1" {
		t.Fatalf("the capture from the box: %v, %d packets on %q", err, len(f.Packets), f.Interface)
	}
	p = filepath.Join(artifacts, "capture.pcapng")
	os.WriteFile(p, raw, 0o644)
	// A's echo requests as eth1 receives them, and the replies if the fast
	// path (which transmits through the kernel's taps) sends them.
	out, err := exec.Command("tcpdump", "-n", "-r", p).CombinedOutput()
	if req := strings.Count(string(out), "ICMP echo request"); err != nil || strings.Count(string(out), "ICMP echo") != 20 || req < 10 {
		t.Errorf("tcpdump -r %s: %v, want 20 ICMP echo frames, at least half of them A's requests\n%s", p, err, out)
	}
}

// routerShows checks the router's side of the dashboard (NAT mode, the
// WAN by DHCP from B's dnsmasq, A leased from the box): the overview's WAN
// card has the lease's address and gateway, and the Devices page lists A
// with its static lease.
func routerShows(t *testing.T, ctx context.Context, b *box) {
	t.Helper()
	var st struct {
		NAT struct {
			WAN string `json:"wan"`
		} `json:"nat"`
	}
	if err := b.api("GET", "/api/dataplane", nil, &st); err != nil || st.NAT.WAN == "" {
		t.Fatalf("the box's WAN address: %v %q", err, st.NAT.WAN)
	}
	want := st.NAT.WAN + " | 198.51.100.1"
	err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`!document.querySelector('#wan').hidden && document.querySelector('#wan-address').textContent === '`+st.NAT.WAN+`'`,
		chromedp.WithPollingTimeout(15*time.Second)))
	got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('#wan-address')||{}).textContent + ' | ' + (document.querySelector('#wan-gateway')||{}).textContent`))
	if err != nil || got != want {
		t.Errorf("the overview's WAN card: %q (%v), want %q", got, err, want)
	}
	err = chromedp.Do(ctx, chromedp.Navigate(b.dashboardURL("/#/devices")),
		chromedp.Poll[chromedp.Void](`!!document.querySelector('#dev-body tr[data-mac]')`, chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		t.Fatalf("devices page: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#dev-body tr[data-mac]')].map(r => [...r.cells].slice(0, 4).map(c => c.textContent).join(' | ')).join('\n')`))
	if err != nil || !strings.Contains(row, " | 192.168.50.10 | bound static · config") {
		t.Errorf("the Devices page lists:\n%s (%v)\nwant A at 192.168.50.10, bound, static from the config", row, err)
	}
	t.Logf("the Devices page lists:\n%s", row)
	saveShot(t, ctx, "devices.png")
}

func saveShot(t *testing.T, ctx context.Context, name string) {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	os.WriteFile(filepath.Join(artifacts, name), png, 0o644)
}

// browse starts headless chromium that sends the box's password with every
// request and, if path is set, opens the dashboard there. It ends with t.
func browse(t testing.TB, b *box, path string) context.Context {
	t.Helper()
	testenv.Require(t, "chromium")
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("gokrazy:"+b.password))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	if path != "" {
		tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
		defer tcancel()
		if err := chromedp.Do(tctx, chromedp.Navigate(b.dashboardURL(path))); err != nil {
			t.Fatalf("opening %s: %v", path, err)
		}
	}
	return ctx
}
