package qemutest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"e1kbox/firmware/boxupdate"
	"e1kbox/firmware/build"
	"e1kbox/firmware/ota"
)

// updateOrRecover updates the box from build from to build to. A test boot
// that panicked (a TCG flake: the build boots elsewhere) reverts by itself
// and is retried once. A box that stops answering (ota.ErrNoAnswer, see
// powerCycle) is power-cycled: back on from, the update is retried once; on
// to — its guard committed the test boot before the silence — the update is
// done, and the box's own record of it stands for the client's report.
// unplug and replug, if set, run while the box is off and once it is back.
func (b *box) updateOrRecover(t *testing.T, owner testing.TB, from, to *build.Manifest, unplug, replug func()) (*box, *ota.Report, error) {
	t.Helper()
	panics := b.panics()
	rep, err := b.update(to)
	if errors.Is(err, ota.ErrReverted) && b.panics() > panics {
		// The good build's kernel oopsed early in its kexec test boot (CI,
		// 2026-12-01: a fault in the boot-time W+X page-table walk), the
		// TCG flake bootFor retries on a fresh boot; the box reverted by
		// itself, as it must. Said loudly and retried once.
		t.Logf("TCG FLAKE: the test boot of a good build panicked and the box reverted by itself (%v); retrying the update once. Console tail:\n%s",
			err, tail(b.Console(), 30))
		rep, err = b.update(to)
	}
	if !errors.Is(err, ota.ErrNoAnswer) {
		return b, rep, err
	}
	b, on := b.powerCycleAny(t, owner, []*build.Manifest{from, to}, rep, err, unplug)
	if replug != nil {
		replug()
	}
	if on == from {
		rep, err = b.update(to)
		return b, rep, err
	}
	last := b.waitLast(t, func(r *boxupdate.Record) bool { return r.To.Timestamp == to.BuildTimestamp }, 2*time.Minute)
	t.Logf("the guard had committed the update before the box went silent: %s (%s)", last.Outcome, last.ID)
	rep = recordReport(from, to, last)
	if last.Outcome != boxupdate.Committed {
		return b, rep, fmt.Errorf("the box runs the new build but its record says %q", last.Outcome)
	}
	return b, rep, nil
}

// recordReport is the box's record of an update from one build to
// another, as the client's report of it: what stands for the report when
// the client lost the box and a power cycle brought it back.
func recordReport(from, to *build.Manifest, last *boxupdate.Record) *ota.Report {
	return &ota.Report{OldBuild: from.BuildTimestamp, NewBuild: to.BuildTimestamp, Outcome: last.Outcome,
		Reason: last.Reason, BootWritten: last.BootWritten, BoxSteps: last.Steps}
}

// otaOptions are the update client's options for updating the box to m.
func (b *box) otaOptions(m *build.Manifest) ota.Options {
	return ota.Options{
		BaseURL: b.gokrazyURL(b.password), DashboardURL: "http://" + b.DashboardAddr() + "/",
		GAF: m.GAF, Signature: m.Signature, Boot: m.Boot, Root: m.Root, MBR: m.MBR, BuildTimestamp: m.BuildTimestamp,
		BootTimeout: bootTimeout, HealthTimeout: healthTimeout, Log: quietLog(),
	}
}

// update runs `firmware update`'s client against the box.
func (b *box) update(m *build.Manifest) (*ota.Report, error) {
	return ota.Update(context.Background(), b.otaOptions(m))
}

// updateStatus is the box's GET /api/system/update.
func (b *box) updateStatus() (boxupdate.Status, error) {
	var st boxupdate.Status
	err := b.api(http.MethodGet, "/api/system/update", nil, &st)
	return st, err
}

// waitLast polls the box's update state until its last record matches.
func (b *box) waitLast(t *testing.T, match func(*boxupdate.Record) bool, timeout time.Duration) *boxupdate.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := b.updateStatus()
		if err == nil && st.Last != nil && match(st.Last) {
			return st.Last
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s\nno matching update record within %v: %+v, %v", b.diagnosis(&ota.Report{}), timeout, st.Last, err)
		}
		time.Sleep(2 * time.Second)
	}
}
