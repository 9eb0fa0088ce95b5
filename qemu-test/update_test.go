package qemutest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/bootpart"
	"e1kbox/firmware/boxupdate"
	"e1kbox/firmware/build"
	"e1kbox/firmware/image"
	"e1kbox/firmware/ota"
	"e1kbox/firmware/vm"
)

// TestGokPathThenFirmwareUpdate updates a box built by firmware build the
// way gok does (plain /update/root, /update/boot, /update/mbr,
// /update/switch, reboot; programs without -ldflags; gokrazy's generated
// init): it comes up healthy, without a watchdog reset in gokrazy's kexec
// reboot, and its guard checks and records the build.
// Then `firmware update` takes it to a build with another boot file system
// (health gate passing), and a power cycle boots that through the
// firmware (BIOS) from the moved pointers.
func TestGokPathThenFirmwareUpdate(t *testing.T) {
	requireQEMU(t)
	bs := theBuilds(t)
	b := boot(t, bs.good, vm.Options{})
	outer := t

	start := time.Now()
	rep, err := ota.GokPath(context.Background(), b.otaOptions(bs.second))
	if errors.Is(err, ota.ErrNoAnswer) {
		// A TCG hang in the reboot (see powerCycle). gok switched for good:
		// the power cycle boots its build.
		b = b.powerCycle(t, outer, bs.second, rep, err, nil)
		err = nil
	}
	if err != nil {
		t.Fatalf("%s\ngok's update path: %v", b.diagnosis(rep), err)
	}
	t.Logf("gok's path: %s", rep)
	if err := b.healthyOn(bs.second.BuildTimestamp); err != nil {
		t.Fatal(err)
	}
	// gokrazy's reboot is a kexec: the watchdog ran through it, and the
	// new build's init took it over in time.
	if len(b.WatchdogFired()) > 0 {
		t.Errorf("the watchdog reset the box on gok's path: %s", b.watchdogNote())
	}
	// The guard (a supervised package under the generated init) checked
	// the build gok switched to.
	last := b.waitLast(t, func(r *boxupdate.Record) bool { return r.Client == "gokrazy" }, 2*time.Minute)
	if last.Outcome != boxupdate.Committed || last.To.Timestamp != bs.second.BuildTimestamp || last.To.Root != 3 {
		t.Errorf("guard's record of gok's update: %+v", last)
	}
	t.Logf("gok path to a healthy, guard-confirmed build: %.1fs", time.Since(start).Seconds())

	b, rep, err = b.updateOrRecover(t, outer, bs.second, bs.changed, nil, nil)
	if err != nil {
		t.Fatalf("%s\nfirmware update after gok: %v", b.diagnosis(rep), err)
	}
	t.Logf("firmware update: %s", rep)
	if !rep.BootWritten || rep.Outcome != boxupdate.Committed {
		t.Errorf("outcome %q, boot written %v; want committed with a new boot file system", rep.Outcome, rep.BootWritten)
	}
	// A power cycle boots the committed build through BIOS.
	b.Kill()
	opts := b.Opts
	opts.HTTPPort, opts.DashboardPort = 0, 0
	b = bootFor(t, outer, bs.changed, opts)
	var h health
	if err := getJSON(b.dashboardURL("/healthz"), &h); err != nil || h.Build != bs.changed.BuildTimestamp {
		t.Errorf("after a power cycle: %+v, %v", h, err)
	}
}

// TestFailedUpdates puts one box per boot mode through the updates that
// must leave it on the previous build, sharing its boots:
//   - the client dies halfway through uploading an update whose boot file
//     system differs, then the power goes; on that disk, a write of the
//     boot file system torn halfway (the new root already on its
//     partition): the box boots the previous build, nothing pending;
//   - an update whose kernel panics at boot (init=/nonexistent) comes back
//     on the previous build by itself: the test boot is a kexec, the boot
//     pointers never moved, so the panic's reboot (panic=10) boots the
//     previous build, whose guard records why;
//   - an update whose kernel hangs without panicking (it waits forever for
//     a root device no disk has) comes back on the previous build by
//     itself too: the hardware watchdog gokrazy's init started kept
//     running through the kexec, and its reset boots the previous build;
//   - (UEFI) the changed update, whole, commits, and a power cycle boots
//     its new body through OVMF and systemd-boot (BIOS booting a committed
//     new body: TestGokPathThenFirmwareUpdate).
func TestFailedUpdates(t *testing.T) {
	requireQEMU(t)
	bs := theBuilds(t)
	for _, tc := range []struct {
		name string
		uefi bool
	}{{"UEFI", true}, {"BIOS", false}} {
		t.Run(tc.name, func(t *testing.T) {
			outer := t
			opts := vm.Options{Image: copyImage(t, bs.good.Image), UEFI: tc.uefi}
			b := boot(t, bs.good, opts)
			if !t.Run("client dies mid-upload, power cut, torn boot write", func(t *testing.T) {
				sent, err := b.uploadHalf(bs.changed.GAF)
				t.Logf("client died after sending %d bytes: %v", sent, err)
				b.Kill() // power cut
				t.Logf("power cut; then the disk torn: %s", tearBootWrite(t, opts.Image, bs.changed))
				b = bootFor(t, outer, bs.good, opts)
				st, err := b.updateStatus()
				if err != nil || st.Pending != nil {
					t.Errorf("after the power cut: pending %+v, %v", st.Pending, err)
				}
				t.Logf("the torn disk boots the previous build")
			}) {
				return
			}
			if !t.Run("kernel that panics", func(t *testing.T) { b = revertsByItself(t, outer, b, bs.good, panicking(bs)) }) {
				return
			}
			if !t.Run("kernel that hangs", func(t *testing.T) { b = revertsByItself(t, outer, b, bs.good, hanging(bs)) }) || !tc.uefi {
				return
			}
			t.Run("whole update, then a power cycle", func(t *testing.T) {
				var rep *ota.Report
				var err error
				b, rep, err = b.updateOrRecover(t, outer, bs.good, bs.changed, nil, nil)
				if err != nil || !rep.BootWritten {
					t.Fatalf("%s\nupdate after the tear: %v (boot written %v)", b.diagnosis(rep), err, rep.BootWritten)
				}
				t.Logf("%s", rep)
				b.Kill()
				bootFor(t, outer, bs.changed, opts)
			})
		})
	}
}

// deadKernel is an update whose kernel never reaches userspace.
type deadKernel struct {
	what string // "panics", "hangs"
	m    *build.Manifest
	// ended counts the test boots of this kind the console shows ended
	// (by a panic, by the watchdog's reset).
	ended func(console string) int
	// resets is how often the hardware watchdog must fire for it: a panic
	// reboots the box itself before the watchdog's time is up.
	resets int
	// check, if set, looks at what the box that ran the test boot showed
	// of it, once it reverted; it says what it saw.
	check func(shown) (string, error)
}

// shown is what a box showed: its console, the console's milestones and
// when QEMU's watchdog fired.
type shown struct {
	console string
	events  []vm.Event
	fired   []time.Duration
}

func (b *box) shown() shown { return shown{b.Console(), b.Events(), b.WatchdogFired()} }

// panicking is the update whose kernel panics at boot.
func panicking(bs *builds) deadKernel {
	return deadKernel{what: "panics", m: bs.panics, ended: panicCount}
}

// revertsByItself updates b, which runs build from, to the dead kernel dk
// and checks that the box comes back on from, with the test boot's end on
// the console. A box whose test boot ended as it must and that then went
// silent booting the previous build (the TCG silence of powerCycle) is
// power-cycled, and its own record of the update stands for the client's
// report. It returns the box that runs.
func revertsByItself(t *testing.T, owner testing.TB, b *box, from *build.Manifest, dk deadKernel) *box {
	before := b.shown()
	start := time.Now()
	rep, err := b.update(dk.m)
	after := b.shown() // of the box that ran the test boot
	came := dk.ended(after.console) > dk.ended(before.console)
	resets := len(after.fired) - len(before.fired)
	if errors.Is(err, ota.ErrNoAnswer) && came {
		b = b.powerCycle(t, owner, from, rep, err, nil)
		last := b.waitLast(t, func(r *boxupdate.Record) bool { return r.To.Timestamp == dk.m.BuildTimestamp }, 2*time.Minute)
		rep = recordReport(from, dk.m, last)
		if err = nil; last.Outcome != boxupdate.Committed {
			err = fmt.Errorf("%w: %s", ota.ErrReverted, last.Reason)
		}
	}
	if !errors.Is(err, ota.ErrReverted) {
		t.Fatalf("%s\nupdate to a kernel that %s: %v, want ErrReverted", b.diagnosis(rep), dk.what, err)
	}
	t.Logf("%s", rep)
	if !strings.Contains(rep.Reason, "did not come up") {
		t.Errorf("reason %q", rep.Reason)
	}
	if !came {
		t.Errorf("%s\nthe console shows no test boot whose kernel %s and ended", b.diagnosis(rep), dk.what)
	}
	if resets != dk.resets {
		t.Errorf("%s\nQEMU's watchdog fired %d times in the update, want %d", b.diagnosis(rep), resets, dk.resets)
	}
	if dk.check != nil {
		saw, err := dk.check(after)
		if err != nil {
			t.Errorf("%s\n%v", b.diagnosis(rep), err)
		}
		t.Logf("%s", saw)
	}
	// The outcome is read from the dashboard of the previous build, which
	// answers before its dataplane runs (/healthz 503 until then): the box
	// must become healthy on that build, not be at that moment.
	if err := b.waitHealthy(from.BuildTimestamp, bootTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel that %s reverted by itself in %.0fs (upload to healthy on the previous build)", dk.what, time.Since(start).Seconds())
	return b
}

// uploadHalf starts uploading an archive to the dashboard and drops the
// connection halfway.
func (b *box) uploadHalf(file string) (int64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	half := int64(len(data) / 2)
	pr, pw := io.Pipe()
	died := errors.New("client died")
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := pw.Write(data[:half]); err != nil {
			return // the request ended first
		}
		time.Sleep(500 * time.Millisecond)
		pw.CloseWithError(died)
	}()
	req, _ := http.NewRequest(http.MethodPost, b.dashboardURL("/api/system/update"), pr)
	req.ContentLength = int64(len(data))
	req.SetBasicAuth("gokrazy", b.password)
	req.Header.Set("X-E1kbox-CSRF", "1")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	pr.CloseWithError(died) // a writer still blocked (the request ended early) stops
	<-wrote
	return half, err
}

// tearBootWrite does to the disk image (box off) what an update to m does
// up to halfway through its boot file system write: m's root on the
// inactive partition, half of the new body in the boot partition.
func tearBootWrite(t *testing.T, disk string, m *build.Manifest) string {
	t.Helper()
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bootOff := int64(image.BootStart * image.SectorSize)
	active, err := bootpart.ReadActive(io.NewSectionReader(f, bootOff, image.BootSectors*image.SectorSize))
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(m.Boot)
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := bootpart.ReadFiles(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	mbr, _ := os.ReadFile(m.MBR)
	parts, err := image.ReadGPTPartitions(f)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := bootpart.NewPlan(active, files, mbr, bootpart.RootArg(parts[0].GUID.String(), 3))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Unchanged || len(plan.Stage) != 1 {
		t.Fatalf("the update's boot file system is not new (unchanged %v)", plan.Unchanged)
	}
	root, err := os.ReadFile(m.Root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(root, image.RootBStart*image.SectorSize); err != nil {
		t.Fatal(err)
	}
	w := plan.Stage[0]
	half := w.Data[:len(w.Data)/2/image.SectorSize*image.SectorSize]
	if _, err := f.WriteAt(half, bootOff+w.Off); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("root B written, %d of %d bytes of the %s body", len(half), len(w.Data), plan.Body)
}
