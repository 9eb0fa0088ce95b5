// Package ota updates a running e1kbox over the air with a health-gated test boot.
package ota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gokrazy/updater"
)

// Options describe one update.
type Options struct {
	// BaseURL is the box's gokrazy URL with credentials,
	// e.g. http://gokrazy:PASSWORD@127.0.0.1:80/ (trailing slash).
	BaseURL string
	// HealthURL is the appliance's health endpoint, e.g.
	// http://127.0.0.1:8080/healthz.
	HealthURL string
	// Boot, Root and MBR are the pieces written by firmware build, and
	// BuildTimestamp the build they belong to.
	Boot, Root, MBR string
	BuildTimestamp  string
	// BootTimeout bounds each wait for the box to come back (default 5 min).
	BootTimeout time.Duration
	// HealthTimeout bounds the wait for a test-booted build to become
	// healthy, counted from when the box answers again after the reboot
	// (a slow reboot is not an unhealthy build); it must be shorter than
	// the image's test-boot deadline, which counts from the new init's start.
	HealthTimeout time.Duration
	// NoKexec reboots the box through its firmware (BIOS/UEFI) instead of
	// gokrazy's default kexec into the new kernel: slower, but it reads
	// the boot partition from the disk, as a power cycle would.
	NoKexec bool
	Log     *slog.Logger
}

// Report says what an update did and how long each step took.
type Report struct {
	OldBuild, NewBuild string
	Outcome            string // "committed", "rolled back" or "no answer"
	Steps              []Step
	Total              time.Duration
}

// Step is one timed phase of an update.
type Step struct {
	Name string
	Took time.Duration
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "update %s: %s → %s\n", r.Outcome, r.OldBuild, r.NewBuild)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %-40s %8.1fs\n", s.Name, s.Took.Seconds())
	}
	fmt.Fprintf(&b, "  %-40s %8.1fs\n", "total", r.Total.Seconds())
	return b.String()
}

// ErrRolledBack means the new build was not healthy and the box went back
// to the previous build by itself.
var ErrRolledBack = errors.New("update rolled back: the new build did not become healthy")

// ErrNoAnswer means the box went down for the test boot and did not answer
// again within BootTimeout: it hangs or is off. A power cycle brings it
// back: on the previous build, or on one more unconfirmed test boot of the
// new build that its init reverts by itself.
var ErrNoAnswer = errors.New("the box did not come back from the test-boot reboot; power-cycle it: it boots the previous build")

// Update streams the new build to the box, test-boots it once, waits for the
// new build timestamp and a healthy appliance, and only then makes the new
// root permanent (switch + reboot). If the new build does not become healthy
// the box reboots into the previous build by itself (its init's test-boot
// guard); Update waits for that and returns ErrRolledBack.
func Update(ctx context.Context, opts Options) (*Report, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.BootTimeout == 0 {
		opts.BootTimeout = 5 * time.Minute
	}
	if opts.HealthTimeout == 0 {
		opts.HealthTimeout = 90 * time.Second
	}
	u := &updateRun{opts: opts, log: opts.Log, client: &http.Client{}, report: &Report{NewBuild: opts.BuildTimestamp}}
	start := time.Now()
	err := u.run(ctx)
	u.report.Total = time.Since(start)
	return u.report, err
}

type updateRun struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	report *Report
}

func (u *updateRun) step(name string, f func() error) error {
	start := time.Now()
	u.log.Info("update: " + name + " …")
	err := f()
	took := time.Since(start)
	u.report.Steps = append(u.report.Steps, Step{name, took})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	u.log.Info("update: "+name+" done", "took", took.Round(100*time.Millisecond))
	return nil
}

func (u *updateRun) run(ctx context.Context) error {
	var target *updater.Target
	if err := u.step("check the box is healthy", func() error {
		ts, err := u.buildTimestamp(ctx)
		if err != nil {
			return err
		}
		u.report.OldBuild = ts
		if ts == u.opts.BuildTimestamp {
			return fmt.Errorf("the box already runs build %s", ts)
		}
		if err := u.healthy(ctx, ts); err != nil {
			return fmt.Errorf("appliance not healthy before the update (fix that first): %w", err)
		}
		target, err = updater.NewTarget(ctx, u.opts.BaseURL, u.client)
		if err != nil {
			return fmt.Errorf("reading the box's update features: %w", err)
		}
		if !target.Supports("partuuid") || !target.Supports("gpt") {
			return errors.New("the box's gokrazy does not boot by GPT PARTUUID; e1kbox images need it")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := u.step("upload root, boot, MBR", func() error {
		for _, p := range []struct{ dest, file string }{
			{"root", u.opts.Root},     // the inactive root partition
			{"bootonly", u.opts.Boot}, // boot FAT; root= stays on the active root
			{"mbr", u.opts.MBR},       // boot code with the new kernel's LBAs
		} {
			if err := u.stream(ctx, target, p.dest, p.file); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := u.step("test-boot the new root once", func() error {
		if err := target.Testboot(ctx); err != nil {
			return err
		}
		return u.reboot(ctx, target)
	}); err != nil {
		return err
	}
	sawNew := false // the box reported the new build at least once
	healthErr := u.step("wait for the new build to be healthy", func() error {
		var err error
		sawNew, err = u.waitTestboot(ctx)
		return err
	})
	if errors.Is(healthErr, ErrNoAnswer) {
		u.report.Outcome = "no answer"
		return healthErr
	}
	if healthErr != nil && !sawNew {
		healthErr = fmt.Errorf("the box never ran the new build (its test boot did not start): %w", healthErr)
	}
	if healthErr != nil {
		u.log.Warn("update: new build is not healthy; the box reverts to the previous build by itself", "err", healthErr)
		u.report.Outcome = "rolled back"
		if err := u.step("wait for the box to come back on the previous build", func() error {
			return u.waitFor(ctx, u.opts.BootTimeout, func(ctx context.Context) error {
				ts, err := u.buildTimestamp(ctx)
				if err != nil {
					return err
				}
				if ts != u.report.OldBuild {
					return fmt.Errorf("box runs build %s", ts)
				}
				return u.healthy(ctx, ts)
			})
		}); err != nil {
			return fmt.Errorf("%w; and the box did not come back: %v", ErrRolledBack, err)
		}
		return fmt.Errorf("%w (%v)", ErrRolledBack, healthErr)
	}
	if err := u.step("make the new root permanent and reboot", func() error {
		if err := target.Switch(ctx); err != nil {
			return err
		}
		return u.reboot(ctx, target)
	}); err != nil {
		return err
	}
	if err := u.step("wait for the new build after a clean boot", func() error {
		return u.waitFor(ctx, u.opts.BootTimeout, func(ctx context.Context) error {
			ts, err := u.buildTimestamp(ctx)
			if err != nil {
				return err
			}
			if ts != u.opts.BuildTimestamp {
				return fmt.Errorf("box runs build %s", ts)
			}
			return u.healthy(ctx, ts)
		})
	}); err != nil {
		return err
	}
	u.report.Outcome = "committed"
	return nil
}

// waitTestboot waits for the test-booted build to be healthy. The health
// deadline runs from when the box answers again after going down for the
// reboot (or from the reboot request, if it never went down): under a slow
// reboot it is the boot that takes long, not the build that is unhealthy.
// A box that goes down and stays silent for BootTimeout is ErrNoAnswer.
func (u *updateRun) waitTestboot(ctx context.Context) (sawNew bool, err error) {
	start := time.Now()
	deadline := start.Add(u.opts.HealthTimeout)
	var down, back bool
	for {
		last := func() error {
			ts, err := u.buildTimestamp(ctx)
			if err != nil {
				if !back {
					down = true
				}
				return err
			}
			if down && !back {
				back = true
				deadline = time.Now().Add(u.opts.HealthTimeout)
			}
			if ts != u.opts.BuildTimestamp {
				return fmt.Errorf("box runs build %s", ts)
			}
			sawNew = true
			return u.healthy(ctx, ts)
		}()
		if last == nil {
			return sawNew, nil
		}
		now := time.Now()
		if down && !back {
			if now.Sub(start) > u.opts.BootTimeout {
				return sawNew, fmt.Errorf("%w (silent for %v: %v)", ErrNoAnswer, u.opts.BootTimeout, last)
			}
		} else if now.After(deadline) {
			return sawNew, fmt.Errorf("gave up after %v: %w", u.opts.HealthTimeout, last)
		}
		select {
		case <-ctx.Done():
			return sawNew, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (u *updateRun) stream(ctx context.Context, target *updater.Target, dest, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := target.StreamTo(ctx, dest, f); err != nil {
		if dest == "mbr" && errors.Is(err, updater.ErrUpdateHandlerNotImplemented) {
			return nil
		}
		return fmt.Errorf("streaming %s to /update/%s: %w", file, dest, err)
	}
	return nil
}

// reboot asks for a reboot; a connection the box drops while going down is
// expected and not an error.
func (u *updateRun) reboot(ctx context.Context, target *updater.Target) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := target.Reboot(rctx, updater.WithKexec(!u.opts.NoKexec)); err != nil && !isConnDrop(err) {
		return fmt.Errorf("reboot: %w", err)
	}
	return nil
}

func isConnDrop(err error) bool {
	s := err.Error()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(s, "connection reset") || strings.Contains(s, "EOF")
}

// buildTimestamp reads the running build from gokrazy's status JSON.
func (u *updateRun) buildTimestamp(ctx context.Context) (string, error) {
	var st struct{ BuildTimestamp string }
	if err := u.getJSON(ctx, u.opts.BaseURL, &st); err != nil {
		return "", fmt.Errorf("gokrazy status: %w", err)
	}
	return st.BuildTimestamp, nil
}

// healthy checks the appliance's /healthz and that it reports build ts.
func (u *updateRun) healthy(ctx context.Context, ts string) error {
	var h struct {
		Status string `json:"status"`
		Build  string `json:"build"`
	}
	if err := u.getJSON(ctx, u.opts.HealthURL, &h); err != nil {
		return fmt.Errorf("appliance health: %w", err)
	}
	if h.Status != "ok" {
		return fmt.Errorf("appliance health: status %q", h.Status)
	}
	if h.Build != ts {
		return fmt.Errorf("appliance reports build %q, gokrazy %q", h.Build, ts)
	}
	return nil
}

func (u *updateRun) getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", redact(url), resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

func (u *updateRun) waitFor(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(ctx); last == nil {
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

func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "…" + url[i:]
		}
	}
	return url
}
