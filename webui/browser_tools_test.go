package webui

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"e1kbox/internal/testenv"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

// shotDirKey is the context key of the directory the screenshots go to.
type shotDirKey struct{}

// screenshotDir is where the browser test's screenshots go: a directory of
// the test's own, removed after it, so that tests write nothing into the
// tree. To keep them (to look at a failure, or to refresh the committed
// testdata/screenshots/overview.png), name a directory:
//
//	E1KBOX_SCREENSHOTS=$PWD/testdata/screenshots go test -run TestBrowser ./webui/
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("E1KBOX_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// newBrowser starts a headless Chromium for the test. Without Chromium the
// test fails under CI=true and is skipped otherwise. The context carries
// the screenshot directory (screenshotDir).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	shots := screenshotDir(t)
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("chromium"); lerr == nil {
			path = p
		} else {
			testenv.Unavailable(t, fmt.Sprintf("chromium not installed (%v); the browser tests need Debian's chromium", err))
		}
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(context.WithValue(actx, shotDirKey{}, shots))
	t.Cleanup(func() { cancel(); acancel() })
	within(t, "starting chromium", 60*time.Second, cancel, func() error { return chromedp.Do(ctx) })
	return ctx
}

// within runs a call that must not have a deadline on its context (the
// first on a chromedp context: the deadline would end the browser or tab)
// and fails the test if it does not return in time. Then cancel, the
// context's own, ends the call, and within waits for it to return.
func within(t *testing.T, what string, d time.Duration, cancel context.CancelFunc, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		cancel()
		<-done
		t.Fatalf("%s: no answer in %v", what, d)
	}
}

// tab opens a new tab that sends Basic credentials with every request. A
// JavaScript exception on its pages fails the test.
func tab(t *testing.T, browser context.Context, password string) context.Context {
	t.Helper()
	var mu sync.Mutex
	var exceptions []string
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*cdpruntime.EventExceptionThrown); ok && e.ExceptionDetails != nil {
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			mu.Lock()
			exceptions = append(exceptions, fmt.Sprintf("%s:%d: %s", d.URL, d.LineNumber+1, msg))
			mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range exceptions {
			t.Errorf("JavaScript exception: %s", e)
		}
		cancel()
	})
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(User+":"+password))
	within(t, "opening a tab", 30*time.Second, cancel, func() error {
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}})
		return err
	})
	return ctx
}

// step runs actions with a time limit and fails the test on error.
func step(t *testing.T, ctx context.Context, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		// What the page loaded, and how long each took, for the log.
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		res, derr := chromedp.Run(dctx, chromedp.Evaluate[[]string](`performance.getEntriesByType('resource').map(e => e.name + ' ' + Math.round(e.duration) + 'ms ' + (e.responseStatus || ''))`))
		dcancel()
		t.Logf("resources loaded by the page (%v):\n%s", derr, strings.Join(res, "\n"))
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds.
func waitFor(t *testing.T, ctx context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	step(t, ctx, what, timeout+5*time.Second, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))(ctx, tg)
		return chromedp.Void{}, err
	})
}

// setInput types a value into an input or select the way a user would:
// value, then input and change events.
func setInput(t *testing.T, ctx context.Context, selector, value string) {
	t.Helper()
	sel, _ := json.Marshal(selector)
	val, _ := json.Marshal(value)
	ok := eval[bool](t, ctx, fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		if (!el) return false;
		el.value = %s;
		el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true}));
		return true;
	})()`, sel, val))
	if !ok {
		t.Fatalf("no element %s", selector)
	}
}

// click waits for an element to be visible and clicks it (in JavaScript:
// a coordinate click can land on the sticky header).
func click(t *testing.T, ctx context.Context, selector string) {
	t.Helper()
	step(t, ctx, "click "+selector, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(selector)))
	sel, _ := json.Marshal(selector)
	if !eval[bool](t, ctx, fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el || el.disabled) return false; el.click(); return true; })()`, sel)) {
		t.Fatalf("cannot click %s", selector)
	}
}

// shot saves a full-page screenshot as NAME.png in the context's
// screenshot directory and returns it (nil if the browser made none).
func shot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return nil
	}
	dir, _ := ctx.Value(shotDirKey{}).(string)
	if dir == "" {
		t.Fatalf("screenshot %s: the context has no screenshot directory (make it with newBrowser)", name)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
	return png
}

// docShot saves a screenshot, and with E1KBOX_DOCS_SHOTS=1 also as
// docs/dashboard-NAME.png (how the committed screenshots are made; without
// it the test writes nothing into the tree).
func docShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	// Notices of earlier steps (a rollback banner, toasts) are not part of
	// the page shown.
	eval[bool](t, ctx, `((b => { if (b.classList.contains('rolledback')) b.hidden = true; })(document.getElementById('banner')), document.getElementById('toasts').replaceChildren(), true)`)
	b := shot(t, ctx, name)
	if os.Getenv("E1KBOX_DOCS_SHOTS") != "1" || b == nil {
		return
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "dashboard-"+name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkAxis fails the test if two time labels of a chart overlap.
func checkAxis(t *testing.T, ctx context.Context, chart string) {
	t.Helper()
	res := eval[[]float64](t, ctx, `(() => {
		const ticks = JSON.parse(document.querySelector('`+chart+`').dataset.xticks || '[]');
		const c = document.createElement('canvas').getContext('2d');
		c.font = getComputedStyle(document.querySelector('`+chart+`')).font || '12px system-ui';
		c.font = '12px system-ui, sans-serif';
		let minGap = 1e9;
		for (let i = 1; i < ticks.length; i++) {
			const w = (c.measureText(ticks[i-1][1]).width + c.measureText(ticks[i][1]).width) / 2;
			minGap = Math.min(minGap, ticks[i][0] - ticks[i-1][0] - w);
		}
		return [ticks.length, minGap];
	})()`)
	if res[0] < 2 {
		t.Errorf("%s: %v time labels", chart, res[0])
	} else if res[1] < 8 {
		t.Errorf("%s: time labels %v px apart (want at least 8 px of space between them)", chart, res[1])
	}
}

// noClippedButtons fails the test if a button on the page (a <button> or a
// .btn link) does not show its whole text: its text is wider than its box
// (scrollWidth > clientWidth), or the box reaches past the visible part of
// a scrolling or clipping element around it, or past the window.
func noClippedButtons(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	clipped := eval[[]string](t, ctx, `(() => {
		const bad = [];
		for (const b of document.querySelectorAll('button, .btn')) {
			if (!b.getClientRects().length) continue; // not shown
			const label = b.textContent.trim() || b.getAttribute('aria-label') || b.id;
			if (b.scrollWidth > b.clientWidth) { bad.push(label + ': text ' + b.scrollWidth + ' px in ' + b.clientWidth + ' px'); continue; }
			const r = b.getBoundingClientRect();
			if (r.left < -0.5 || r.right > document.documentElement.clientWidth + 0.5) { bad.push(label + ': outside the window'); continue; }
			for (let a = b.parentElement; a; a = a.parentElement) {
				if (getComputedStyle(a).overflowX === 'visible') continue;
				const ar = a.getBoundingClientRect();
				if (r.left < ar.left - 0.5 || r.right > ar.right + 0.5) { bad.push(label + ': cut off by ' + a.tagName.toLowerCase() + '.' + a.className); break; }
			}
		}
		return bad;
	})()`)
	if len(clipped) > 0 {
		t.Errorf("%s: buttons not shown whole:\n%s", where, strings.Join(clipped, "\n"))
	}
}

// noDialogs answers every confirm() with yes.
func noDialogs(t *testing.T, ctx context.Context) {
	t.Helper()
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
}

// evalAsync evaluates an expression that yields a promise of a string.
func evalAsync(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitForGo polls a Go condition.
func waitForGo(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
