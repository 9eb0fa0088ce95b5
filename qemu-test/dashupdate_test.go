package qemutest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/boxupdate"
	"e1kbox/firmware/build"
	"e1kbox/firmware/gaf"
	"e1kbox/firmware/ota"
	"e1kbox/firmware/vm"

	"github.com/chromedp/chromedp"
)

// TestDashboardUpdate drives the System page in chromium against the
// booted image: with an update key configured an unsigned .gaf is refused;
// a signed one uploads with a progress bar, test-boots and is kept; a
// broken build uploaded the same way reverts by itself.
func TestDashboardUpdate(t *testing.T) {
	requireQEMU(t)
	bs := theBuilds(t)
	b := boot(t, bs.good, vm.Options{})
	pub, priv, _ := ed25519.GenerateKey(nil)
	b.setUpdateKey(t, gaf.EncodePublicKey(pub))
	ctx := browse(t, b, "/#/system")

	res := uploadInUIRetry(t, ctx, b, bs.changed.GAF)
	if !strings.Contains(res.Error, "not signed") {
		t.Fatalf("unsigned upload: %+v, want the refusal shown", res)
	}
	if err := b.healthyOn(bs.good.BuildTimestamp); err != nil {
		t.Fatal(err)
	}
	t.Logf("unsigned .gaf refused: %s", res.Error)

	start := time.Now()
	b, ctx, res = b.uploadOrRecover(t, ctx, bs.good, bs.changed, true, bs.changed.GAF, sign(t, priv, bs.changed.GAF))
	if res.Outcome != boxupdate.Committed || res.MaxProgress < 100 || !res.SawUploading {
		t.Fatalf("%s\nsigned upload: %+v", b.diagnosis(&ota.Report{}), res)
	}
	if err := b.healthyOn(bs.changed.BuildTimestamp); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard upload to healthy: %.1fs; steps shown: %s", time.Since(start).Seconds(), res.Steps)

	start = time.Now()
	b, _, res = b.uploadOrRecover(t, ctx, bs.changed, bs.broke, false, bs.broke.GAF, sign(t, priv, bs.broke.GAF))
	if res.Outcome != boxupdate.Reverted {
		t.Fatalf("%s\nbroken build: %+v", b.diagnosis(&ota.Report{}), res)
	}
	// The guard's record of the revert is readable while the appliance of
	// the previous build still starts (its /healthz answers 503 then).
	if err := b.waitHealthy(bs.changed.BuildTimestamp, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("broken build reverted in %.1fs: %s", time.Since(start).Seconds(), res.Reason)
}

func sign(t testing.TB, key ed25519.PrivateKey, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sig, err := gaf.Sign(key, f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(file)+gaf.SignatureSuffix)
	if err := os.WriteFile(p, sig, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// setUpdateKey sets dashboard.updateKey in the running config and
// confirms it.
func (b *box) setUpdateKey(t *testing.T, key string) {
	t.Helper()
	var cur map[string]any
	if err := b.api(http.MethodGet, "/api/config", nil, &cur); err != nil {
		t.Fatal(err)
	}
	cfg := cur["config"].(map[string]any)
	cfg["dashboard"].(map[string]any)["updateKey"] = key
	body, _ := json.Marshal(cfg)
	b.confirm(t, b.applyConfig(t, body, 60))
}

type uiState struct {
	Progress  float64
	Phase     string
	Error     string
	ErrHidden bool
	Outcome   string
	Reason    string
	Steps     string
	State     string
}

type uiResult struct {
	Outcome, Reason, Error, Steps string
	MaxProgress                   float64
	SawUploading                  bool
	// Silent: the page says the box stopped answering in its test boot
	// (Phase: what it says).
	Silent bool
	Phase  string
	// Failed: the browser lost the upload's connection (Error says so).
	Failed bool
}

// uploadInUI picks files in the System page's update form, starts the
// upload and waits for the page to show a refusal or the outcome.
func uploadInUI(t testing.TB, ctx context.Context, b *box, files ...string) uiResult {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 12*time.Minute) // beyond the page's 8 minutes of silence
	defer cancel()
	if err := chromedp.Do(tctx,
		chromedp.WaitVisible(chromedp.CSS(`#update-file`)),
		chromedp.SetUploadFiles(chromedp.CSS(`#update-file`), files),
	); err != nil {
		t.Fatalf("choosing the files: %v", err)
	}
	if _, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector('#update-card').dataset.state = ''`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tctx, chromedp.Click(chromedp.CSS(`#update-start`))); err != nil {
		t.Fatalf("starting the upload: %v", err)
	}
	clickTaken(t, tctx)
	var res uiResult
	var last uiState
	for {
		s, err := chromedp.Run(tctx, chromedp.Evaluate[uiState](`(() => {
			const q = (s) => document.querySelector(s);
			const r = q('#update-result');
			return { Progress: q('#update-progress').value, Phase: q('#update-phase').textContent,
				Error: q('#update-error').textContent, ErrHidden: q('#update-error').hidden,
				Outcome: r && r.dataset.outcome !== 'testing' && r.dataset.outcome !== 'installing' ? r.dataset.outcome : '',
				Reason: q('#update-reason') ? q('#update-reason').textContent : '',
				Steps: q('#update-steps') ? q('#update-steps').innerText.replace(/\s+/g, ' ') : '',
				State: q('#update-card').dataset.state || '' };
		})()`))
		if err != nil {
			t.Fatalf("%s\nreading the page: %v; it last showed %+v", b.diagnosis(&ota.Report{}), err, last)
		}
		last = s
		res.MaxProgress = max(res.MaxProgress, s.Progress)
		res.SawUploading = res.SawUploading || strings.HasPrefix(s.Phase, "Uploading") || s.Progress > 0
		if s.State == "refused" {
			res.Error = s.Error
			return res
		}
		if s.State == "done" {
			res.Outcome, res.Reason, res.Steps = s.Outcome, s.Reason, s.Steps
			return res
		}
		if s.State == "silent" {
			res.Silent, res.Phase = true, s.Phase
			return res
		}
		if s.State == "failed" {
			res.Failed, res.Error, res.Phase = true, s.Error, s.Phase
			return res
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clickTaken makes sure the click on Upload and install reached the page:
// its handler marks the card running (or refused) at once. chromedp
// clicks at the button's coordinates, and a card that moved in between
// (the System page fills in its info and history as the box answers) took
// the click elsewhere: in a CI run the page then showed its first words
// for 12 minutes. The button is then clicked once more, from the page's
// own script.
func clickTaken(t testing.TB, ctx context.Context) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		st, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#update-card').dataset.state || ''`))
		if err != nil {
			t.Fatalf("reading the update card: %v", err)
		}
		if st != "" {
			return
		}
	}
	t.Logf("TCG FLAKE: the click on Upload and install did not reach the page in 10 s (the card moved?); clicking it from the page")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector('#update-start').click(), true)`)); err != nil {
		t.Fatalf("starting the upload: %v", err)
	}
}

// uploadInUIRetry is uploadInUI, once more when the browser lost the
// upload's connection before the box had all of it (the page says so and
// the box has no record of it: nothing was installed). In a CI run the
// page waited 12 minutes for the unsigned upload's refusal, which never
// came; the page now shows a lost upload, and this says what it showed.
func uploadInUIRetry(t *testing.T, ctx context.Context, b *box, files ...string) uiResult {
	t.Helper()
	res := uploadInUI(t, ctx, b, files...)
	if !res.Failed {
		return res
	}
	var st boxupdate.Status
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		err := b.api(http.MethodGet, "/api/system/update", nil, &st)
		if err == nil && st.Phase == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page lost the upload (%s) and the box is not idle: %v %+v", res.Error, err, st)
		}
	}
	if st.Pending != nil {
		t.Fatalf("the page lost the upload (%s) but the box installed it: %+v", res.Error, st.Pending)
	}
	t.Logf("TCG FLAKE: the page lost the upload (%s; %s), the box has no update pending; uploading once more", res.Error, res.Phase)
	return uploadInUI(t, ctx, b, files...)
}

// uploadOrRecover is uploadInUI through TCG's flakes, as updateOrRecover
// is for the update client. An upload of a good build (keep) whose test
// boot panicked reverted by itself, as it must, and is made once more. A
// box the page says went silent is power-cycled, as its owner would: back
// on from with a good build, the upload is made once more; else (on to,
// committed by its guard just before the silence, or on from after a
// broken build) the box's own record of the update stands for the
// outcome the page did not see. It returns the box and the page in use.
func (b *box) uploadOrRecover(t *testing.T, ctx context.Context, from, to *build.Manifest, keep bool, files ...string) (*box, context.Context, uiResult) {
	t.Helper()
	panics := b.panics()
	res := uploadInUIRetry(t, ctx, b, files...)
	if keep && res.Outcome == boxupdate.Reverted && b.panics() > panics {
		t.Logf("TCG FLAKE: the test boot of a good build panicked and the box reverted by itself (%s); uploading once more. Console tail:\n%s",
			res.Reason, tail(b.Console(), 30))
		res = uploadInUI(t, ctx, b, files...)
	}
	if !res.Silent {
		return b, ctx, res
	}
	builds := []*build.Manifest{from}
	if keep {
		builds = append(builds, to)
	}
	b, on := b.powerCycleAny(t, t, builds, reason("a dashboard upload of "+to.BuildTimestamp), fmt.Errorf("the System page says: %s", res.Phase), nil)
	ctx = browse(t, b, "/#/system")
	if on == from && keep {
		return b, ctx, uploadInUI(t, ctx, b, files...)
	}
	// A build that never came up is known to its record by its SBOM
	// hash alone (the broken build's init fails before it says its
	// timestamp): CI, 2026-12-03, the box went silent in that test boot.
	last := b.waitLast(t, func(r *boxupdate.Record) bool {
		return r.To.Timestamp == to.BuildTimestamp || (r.To.SBOMHash != "" && r.To.SBOMHash == to.SBOMHash)
	}, 2*time.Minute)
	t.Logf("the box's record of the update the page lost: %s (%s): %s", last.Outcome, last.ID, last.Reason)
	var steps []string
	for _, s := range last.Steps {
		steps = append(steps, fmt.Sprintf("%s %.1f", s.Name, s.Seconds))
	}
	return b, ctx, uiResult{Outcome: last.Outcome, Reason: last.Reason, Steps: strings.Join(steps, " "), MaxProgress: res.MaxProgress, SawUploading: res.SawUploading}
}
