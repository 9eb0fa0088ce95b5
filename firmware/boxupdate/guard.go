package boxupdate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"e1kbox/firmware/bootpart"
)

// Guard runs once per boot (the supervised /user/guard) and decides
// whether the running build is kept.
type Guard struct {
	Devices *Devices
	State   State
	Cmdline string // /proc/cmdline
	// Current reads the running build (gokrazy's timestamp and SBOM hash).
	Current func(context.Context) (Build, error)
	// Healthy checks the appliance is healthy on the running build.
	Healthy func(context.Context) error
	// Reboot restarts the box (through gokrazy, which boots what the boot
	// partition names).
	Reboot func() error
	// HealthTimeout bounds the wait for a build another client installed
	// (gok: /update/switch); test boots use their record's.
	HealthTimeout time.Duration
	Poll          time.Duration // default 1 s
	Log           *slog.Logger
}

func (g *Guard) log() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}

// Run resolves a pending update or checks a build it does not know. It
// returns when there is nothing more to do (nil), or after asking for a
// reboot into the previous build (ErrReverted).
func (g *Guard) Run(ctx context.Context) error {
	if err := g.State.Writable(); err != nil {
		return fmt.Errorf("no writable /perm (%v): the guard cannot keep records; builds are not checked", err)
	}
	var cur Build
	if err := g.wait(ctx, time.Minute, func(ctx context.Context) (err error) {
		cur, err = g.Current(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("reading the running build: %w", err)
	}
	cur.Root = g.Devices.Active
	pending, err := g.State.Pending()
	if err != nil {
		return err
	}
	if pending != nil {
		return g.resolve(ctx, pending, cur)
	}
	return g.check(ctx, cur)
}

// ErrReverted means the guard asked for a reboot into the previous build.
var ErrReverted = errors.New("reverted: rebooting into the previous build")

func (g *Guard) resolve(ctx context.Context, p *Record, cur Build) error {
	log := g.log()
	switch {
	case g.testbootID() == p.ID && p.Outcome == Testing:
		p.To.Timestamp = cur.Timestamp
		log.Info("guard: test boot of an update; waiting for the appliance to be healthy", "id", p.ID, "timeout", time.Duration(p.HealthTimeout))
		err := g.wait(ctx, time.Duration(p.HealthTimeout), g.Healthy)
		if err != nil {
			p.Outcome, p.Reason = Reverted, fmt.Sprintf("the new build was not healthy within %v: %v", time.Duration(p.HealthTimeout), err)
			p.step("test boot (not healthy)", p.Rebooted)
			log.Warn("guard: "+p.Reason+"; rebooting into the previous build", "id", p.ID)
			kmsg("guard: update %s reverted: %s", p.ID, p.Reason)
			if err := g.State.Finish(p); err != nil {
				log.Error("guard: recording the revert", "err", err)
			}
			return g.reboot()
		}
		return g.commit(p, cur, "test boot to healthy")
	case p.Outcome == Testing && cur.Root == p.To.Root && cur.SBOMHash == p.To.SBOMHash:
		// The firmware booted the new build: a commit was torn after the
		// MBR (BIOS) moved. Finish it.
		log.Info("guard: finishing a commit that was interrupted", "id", p.ID)
		p.To.Timestamp = cur.Timestamp
		return g.commit(p, cur, "commit finished at the next boot")
	}
	// The box runs the previous build: the update never got to a healthy
	// test boot. Put back a pointer a torn commit may have moved.
	if err := ApplyWrites(g.Devices, p.Revert); err != nil {
		log.Error("guard: restoring the boot pointers", "err", err)
	}
	was := p.Outcome
	p.Outcome = Reverted
	if was == Installing {
		p.Reason = "interrupted while installing (power cut or crash); the previous build kept running"
	} else {
		p.Reason = "the new build did not come up (its kernel panicked or hung, its init failed, or the power went): the box restarted on the previous build"
	}
	log.Warn("guard: "+p.Reason, "id", p.ID)
	kmsg("guard: update %s reverted: %s", p.ID, p.Reason)
	if err := g.State.Finish(p); err != nil {
		return err
	}
	return g.check(context.Background(), cur)
}

func (g *Guard) commit(p *Record, cur Build, step string) error {
	if err := ApplyWrites(g.Devices, p.Commit); err != nil {
		return fmt.Errorf("committing update %s: %w", p.ID, err)
	}
	p.Outcome, p.Reason = Committed, ""
	p.step(step, p.Rebooted)
	g.log().Info("guard: update committed: the new build is the one the box boots", "id", p.ID, "build", cur.Timestamp)
	kmsg("guard: update %s committed (build %s)", p.ID, cur.Timestamp)
	if err := g.State.Confirm(cur); err != nil {
		return err
	}
	return g.State.Finish(p)
}

// check handles a boot without a pending update: a known build, or one
// another client installed (gok's /update/switch) or the first boot.
func (g *Guard) check(ctx context.Context, cur Build) error {
	log := g.log()
	conf, err := g.State.Confirmed()
	if err != nil {
		return err
	}
	if conf != nil && conf.Root == cur.Root && conf.Timestamp == cur.Timestamp {
		log.Info("guard: running the confirmed build", "build", cur.Timestamp, "root", cur.Root)
		return nil
	}
	start := time.Now()
	log.Info("guard: build not confirmed yet; waiting for the appliance to be healthy", "build", cur.Timestamp, "root", cur.Root, "timeout", g.HealthTimeout)
	err = g.wait(ctx, g.HealthTimeout, g.Healthy)
	rec := &Record{ID: newID(), Client: "gokrazy", To: cur, Started: start.UTC(), HealthTimeout: Duration(g.HealthTimeout)}
	if conf != nil {
		rec.From = conf.Build
	}
	if err == nil {
		if conf != nil { // not the first boot: another client updated the box
			rec.Outcome = Committed
			rec.step("boot to healthy", start)
			g.State.Finish(rec)
		}
		log.Info("guard: build confirmed", "build", cur.Timestamp)
		return g.State.Confirm(cur)
	}
	if conf == nil || conf.Root == cur.Root {
		log.Error("guard: the build is not healthy and there is no other build to go back to", "err", err)
		return nil
	}
	rec.Outcome = Reverted
	rec.Reason = fmt.Sprintf("the build on root %d was not healthy within %v (%v): switched back to root %d", cur.Root, g.HealthTimeout, err, conf.Root)
	rec.step("boot (not healthy)", start)
	boot, oerr := os.Open(g.Devices.Boot)
	if oerr != nil {
		return oerr
	}
	active, aerr := bootpart.ReadActive(boot)
	boot.Close()
	if aerr != nil {
		return aerr
	}
	plan, perr := bootpart.InPlace(active, bootpart.RootArg(g.Devices.P1GUID, conf.Root))
	if perr != nil {
		return perr
	}
	if err := ApplyWrites(g.Devices, plan.Commit); err != nil {
		return err
	}
	log.Warn("guard: " + rec.Reason)
	kmsg("guard: %s", rec.Reason)
	g.State.Finish(rec)
	return g.reboot()
}

func (g *Guard) reboot() error {
	if err := g.Reboot(); err != nil {
		return fmt.Errorf("%w: the reboot failed: %v", ErrReverted, err)
	}
	return ErrReverted
}

func (g *Guard) testbootID() string {
	for _, f := range strings.Fields(g.Cmdline) {
		if id, ok := strings.CutPrefix(f, TestbootFlag); ok {
			return id
		}
	}
	return ""
}

// wait retries f every Poll until it succeeds or timeout passes.
func (g *Guard) wait(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	poll := g.Poll
	if poll <= 0 {
		poll = time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
