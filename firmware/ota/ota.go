// Package ota updates a running e1kbox over the air: through the box's own update API, or along gok's path.
//
// Update uploads the build's .gaf to the dashboard's POST
// /api/system/update, where the box installs it beside the running build
// and test-boots it; the box's guard keeps it only once the appliance is
// healthy (boxupdate). Update follows the box through that and reports the
// outcome. GokPath does exactly what gokrazy's `gok update` does
// (/update/root, /update/boot, /update/mbr, /update/switch, /reboot):
// there the guard's health gate is the only protection.
package ota

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"e1kbox/firmware/boxupdate"

	"github.com/gokrazy/updater"
)

// Options describe one update.
type Options struct {
	// BaseURL is the box's gokrazy URL with credentials,
	// e.g. http://gokrazy:PASSWORD@127.0.0.1:80/ (trailing slash).
	BaseURL string
	// DashboardURL is the appliance's dashboard, e.g.
	// http://127.0.0.1:8080/ (authenticated with BaseURL's password).
	DashboardURL string
	// GAF and Signature (optional) are the archive and its .sig file.
	GAF, Signature string
	// Boot, Root and MBR are the pieces GokPath streams.
	Boot, Root, MBR string
	// BuildTimestamp is the new build's (it is in its init).
	BuildTimestamp string
	// BootTimeout bounds each wait for the box to come back and resolve
	// the test boot (default 5 min).
	BootTimeout time.Duration
	// HealthTimeout bounds GokPath's wait for the appliance on the new
	// build (default 2 min).
	HealthTimeout time.Duration
	// NoKexec makes GokPath's reboot go through the firmware.
	NoKexec bool
	Log     *slog.Logger
}

// Report says what an update did and how long each step took.
type Report struct {
	OldBuild, NewBuild string
	Outcome            string // "committed", "reverted", "refused", "no answer" or "lost"
	Reason             string
	BootWritten        bool
	Steps              []Step
	// BoxSteps are the box's own timed steps (its update record).
	BoxSteps []boxupdate.Step
	Total    time.Duration
}

// Step is one timed phase of an update.
type Step struct {
	Name string
	Took time.Duration
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "update %s: %s → %s", r.Outcome, r.OldBuild, r.NewBuild)
	if r.Reason != "" {
		fmt.Fprintf(&b, " (%s)", r.Reason)
	}
	fmt.Fprintf(&b, "\n  boot partition written: %v\n", r.BootWritten)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %-44s %8.1fs\n", s.Name, s.Took.Seconds())
	}
	for _, s := range r.BoxSteps {
		fmt.Fprintf(&b, "    box: %-39s %8.1fs\n", s.Name, s.Seconds)
	}
	fmt.Fprintf(&b, "  %-44s %8.1fs\n", "total", r.Total.Seconds())
	return b.String()
}

// ErrReverted means the new build was not kept: the box runs the previous
// one (the report says why).
var ErrReverted = errors.New("update reverted: the box runs the previous build")

// ErrNoAnswer means the box went down for the test boot and did not answer
// again within BootTimeout.
var ErrNoAnswer = errors.New("the box did not come back from the test boot; power-cycle it: an unconfirmed test boot never becomes permanent, it boots the previous build")

// ErrLost means the box answers but holds no record of the update, pending
// or finished, for BootTimeout: it lost its persistent partition (where
// the record is kept) in the test boot. Power-cycle it: an unconfirmed test
// boot boots the previous build.
var ErrLost = errors.New("the box answers but has no record of the update (its /perm is gone?); power-cycle it: an unconfirmed test boot boots the previous build")

// ErrRefused means the box did not take the update (nothing was written).
var ErrRefused = errors.New("the box refused the update")

type run struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	report *Report
}

func newRun(opts Options) *run {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.BootTimeout == 0 {
		opts.BootTimeout = 5 * time.Minute
	}
	if opts.HealthTimeout == 0 {
		opts.HealthTimeout = 2 * time.Minute
	}
	return &run{opts: opts, log: opts.Log, client: &http.Client{}, report: &Report{NewBuild: opts.BuildTimestamp}}
}

func (u *run) step(name string, f func() error) error {
	start := time.Now()
	u.log.Info("update: " + name + " …")
	err := f()
	u.report.Steps = append(u.report.Steps, Step{name, time.Since(start)})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	u.log.Info("update: "+name+" done", "took", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Update uploads the .gaf to the box's update API and follows the test
// boot to its outcome: nil once the new build is committed and healthy,
// ErrReverted (the box is back on the previous build by itself),
// ErrRefused, ErrNoAnswer or ErrLost.
func Update(ctx context.Context, opts Options) (*Report, error) {
	return timed(ctx, opts, (*run).update)
}

// timed runs one way of updating and returns its report with the total
// time.
func timed(ctx context.Context, opts Options, way func(*run, context.Context) error) (*Report, error) {
	u := newRun(opts)
	start := time.Now()
	err := way(u, ctx)
	u.report.Total = time.Since(start)
	return u.report, err
}

func (u *run) update(ctx context.Context) error {
	var old boxupdate.Build
	if err := u.step("check the box is healthy", func() error {
		var err error
		if old, err = u.healthy(ctx); err != nil {
			return fmt.Errorf("appliance not healthy before the update (fix that first): %w", err)
		}
		u.report.OldBuild = old.Timestamp
		if old.Timestamp == u.opts.BuildTimestamp {
			return fmt.Errorf("the box already runs build %s", old.Timestamp)
		}
		return nil
	}); err != nil {
		return err
	}
	var rec boxupdate.Record
	if err := u.step("upload and install beside the running build", func() error {
		return u.upload(ctx, &rec)
	}); err != nil {
		return err
	}
	u.report.BootWritten = rec.BootWritten
	var last *boxupdate.Record
	err := u.step("test boot until the box keeps or reverts it", func() error {
		var err error
		last, err = u.waitOutcome(ctx, rec.ID)
		return err
	})
	if err != nil {
		switch {
		case errors.Is(err, ErrNoAnswer):
			u.report.Outcome = "no answer"
		case errors.Is(err, ErrLost):
			u.report.Outcome = "lost"
		}
		return err
	}
	u.report.Outcome, u.report.Reason, u.report.BoxSteps = last.Outcome, last.Reason, last.Steps
	if last.Outcome != boxupdate.Committed {
		return fmt.Errorf("%w: %s", ErrReverted, last.Reason)
	}
	return u.step("health on the new build", func() error {
		b, err := u.healthy(ctx)
		if err == nil && u.opts.BuildTimestamp != "" && b.Timestamp != u.opts.BuildTimestamp {
			err = fmt.Errorf("the box runs build %s, not %s", b.Timestamp, u.opts.BuildTimestamp)
		}
		return err
	})
}

func (u *run) upload(ctx context.Context, rec *boxupdate.Record) error {
	f, err := os.Open(u.opts.GAF)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.dashboard("/api/system/update"), f)
	if err != nil {
		return err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("X-E1kbox-CSRF", "1")
	if u.opts.Signature != "" {
		sig, err := os.ReadFile(u.opts.Signature)
		if err != nil {
			return err
		}
		req.Header.Set("X-E1kbox-Signature", strings.TrimSpace(string(sig)))
	}
	u.auth(req)
	resp, err := u.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusAccepted {
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		u.report.Outcome, u.report.Reason = "refused", e.Error
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return fmt.Errorf("%w (HTTP %d): %s", ErrRefused, resp.StatusCode, e.Error)
		}
		return fmt.Errorf("POST /api/system/update: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, rec)
}

// waitOutcome polls the box's update state until update id is resolved.
// The deadline restarts whenever the box answers, so a slow reboot is not
// a hang; silence for BootTimeout is ErrNoAnswer, and answers without any
// record of id for BootTimeout are ErrLost.
func (u *run) waitOutcome(ctx context.Context, id string) (*boxupdate.Record, error) {
	lastAnswer, lastSeen := time.Now(), time.Now()
	for {
		var st boxupdate.Status
		err := u.getJSON(ctx, u.dashboard("/api/system/update"), &st, true)
		if err == nil {
			lastAnswer = time.Now()
			if st.Last != nil && st.Last.ID == id && (st.Pending == nil || st.Pending.ID != id) {
				return st.Last, nil
			}
			if st.Pending != nil && st.Pending.ID == id {
				lastSeen = lastAnswer
			} else if time.Since(lastSeen) > u.opts.BootTimeout {
				return nil, fmt.Errorf("%w (update %s, for %v)", ErrLost, id, u.opts.BootTimeout)
			}
		} else if time.Since(lastAnswer) > u.opts.BootTimeout {
			return nil, fmt.Errorf("%w (silent for %v: %v)", ErrNoAnswer, u.opts.BootTimeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// healthy reads gokrazy's build and checks the appliance's /healthz
// against it (boxupdate.CompareHealth: the same gate the guard applies).
func (u *run) healthy(ctx context.Context) (boxupdate.Build, error) {
	var st struct{ BuildTimestamp, SBOMHash string }
	if err := u.getJSON(ctx, u.opts.BaseURL, &st, false); err != nil {
		return boxupdate.Build{}, fmt.Errorf("gokrazy status: %w", err)
	}
	b := boxupdate.Build{Timestamp: st.BuildTimestamp, SBOMHash: st.SBOMHash}
	var h struct {
		Status   string `json:"status"`
		Build    string `json:"build"`
		SBOMHash string `json:"sbom_hash"`
	}
	if err := u.getJSON(ctx, u.dashboard("/healthz"), &h, false); err != nil {
		return b, fmt.Errorf("appliance health: %w", err)
	}
	return b, boxupdate.CompareHealth(h.Status, h.Build, h.SBOMHash, b)
}

func (u *run) dashboard(path string) string {
	return strings.TrimSuffix(u.opts.DashboardURL, "/") + path
}

// auth sends the gokrazy password (BaseURL's) to the dashboard.
func (u *run) auth(req *http.Request) {
	if p, err := url.Parse(u.opts.BaseURL); err == nil && p.User != nil {
		pw, _ := p.User.Password()
		req.SetBasicAuth(p.User.Username(), pw)
	}
}

func (u *run) getJSON(ctx context.Context, url string, v any, auth bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if auth {
		u.auth(req)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", redact(url), resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v)
}

// GokPath updates the box exactly as gokrazy's `gok update` does: root
// (inactive partition), boot (the whole FAT, in place), MBR, switch,
// reboot, then waits for the new BuildTimestamp. It adds a wait for the
// appliance's health on it (gok has none); the box's guard reverts a build
// that stays unhealthy.
func GokPath(ctx context.Context, opts Options) (*Report, error) {
	return timed(ctx, opts, (*run).gokPath)
}

func (u *run) gokPath(ctx context.Context) error {
	var target *updater.Target
	if err := u.step("features", func() error {
		var st struct{ BuildTimestamp string }
		if err := u.getJSON(ctx, u.opts.BaseURL, &st, false); err != nil {
			return err
		}
		u.report.OldBuild = st.BuildTimestamp
		var err error
		target, err = updater.NewTarget(ctx, u.opts.BaseURL, u.client)
		return err
	}); err != nil {
		return err
	}
	if err := u.step("stream root, boot, MBR; switch", func() error {
		for _, p := range []struct{ dest, file string }{{"root", u.opts.Root}, {"boot", u.opts.Boot}, {"mbr", u.opts.MBR}} {
			f, err := os.Open(p.file)
			if err != nil {
				return err
			}
			err = target.StreamTo(ctx, p.dest, f)
			f.Close()
			if err != nil && !(p.dest == "mbr" && errors.Is(err, updater.ErrUpdateHandlerNotImplemented)) {
				return fmt.Errorf("/update/%s: %w", p.dest, err)
			}
		}
		u.report.BootWritten = true
		return target.Switch(ctx)
	}); err != nil {
		return err
	}
	if err := u.step("reboot", func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := target.Reboot(rctx, updater.WithKexec(!u.opts.NoKexec)); err != nil && !isConnDrop(err) {
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	if err := u.step("wait for the new build", func() error {
		return u.waitFor(ctx, u.opts.BootTimeout, func(ctx context.Context) error {
			var st struct{ BuildTimestamp string }
			if err := u.getJSON(ctx, u.opts.BaseURL, &st, false); err != nil {
				return err
			}
			if st.BuildTimestamp != u.opts.BuildTimestamp {
				return fmt.Errorf("box runs build %s", st.BuildTimestamp)
			}
			return nil
		})
	}); err != nil {
		u.report.Outcome = "no answer"
		return fmt.Errorf("%w: %v", ErrNoAnswer, err)
	}
	err := u.step("appliance healthy on it", func() error {
		return u.waitFor(ctx, u.opts.HealthTimeout, func(ctx context.Context) error {
			_, err := u.healthy(ctx)
			return err
		})
	})
	u.report.Outcome = "committed"
	if err != nil {
		u.report.Outcome = "unhealthy"
	}
	return err
}

func (u *run) waitFor(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		last := check(ctx)
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %v: %w", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func isConnDrop(err error) bool {
	s := err.Error()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(s, "connection reset") || strings.Contains(s, "EOF")
}

func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "…" + url[i:]
		}
	}
	return url
}
