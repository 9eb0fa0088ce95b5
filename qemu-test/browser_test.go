package qemutest

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// dashboardShows loads the box's dashboard in headless chromium (through
// the VM's forwarded port), waits until the live packets/s figure is above
// zero while traffic flows, and saves a screenshot as a test artifact.
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
}

// browse starts headless chromium that sends the box's password with every
// request and, if path is set, opens the dashboard there. It ends with t.
func browse(t testing.TB, b *box, path string) context.Context {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI: %v", err)
		}
		t.Skip("chromium not installed")
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
