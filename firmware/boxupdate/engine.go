package boxupdate

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"e1kbox/firmware/bootpart"
	"e1kbox/firmware/gaf"
	"e1kbox/firmware/watchdog"
)

// MaxUpload bounds an uploaded archive (the two partitions' sizes and
// some room).
const MaxUpload = gaf.MaxBoot + gaf.MaxRoot + gaf.MaxSBOM + 1<<20

// TestbootFlag marks the kernel command line of a test boot; its value is
// the update's ID.
const TestbootFlag = "e1kbox.testboot="

// Engine applies updates on the box. One update runs at a time.
type Engine struct {
	Devices *Devices
	State   State
	TmpDir  string // where the upload is kept (tmpfs); default os.TempDir()
	// PublicKey returns the key updates must be signed with (nil: any
	// archive is taken).
	PublicKey func() ed25519.PublicKey
	// Current is the running build (gokrazy's timestamp and SBOM hash).
	Current func() Build
	// HealthTimeout is how long the test boot has to become healthy
	// (default 120 s), counted from the new kernel's start.
	HealthTimeout time.Duration
	// TestBoot starts the new kernel (kexec); nil: KexecTestBoot.
	TestBoot func(kernel []byte, cmdline string) error
	Log      *slog.Logger

	mu       sync.Mutex
	busy     bool
	phase    string
	received int64
}

// Refused is an update the box did not take (bad archive, signature,
// nothing to update): nothing was written.
type Refused struct{ Err error }

func (r *Refused) Error() string { return r.Err.Error() }
func (r *Refused) Unwrap() error { return r.Err }

// ErrBusy is returned while another update runs.
var ErrBusy = errors.New("another update is in progress")

// Status is what the dashboard shows: the running phase, if any, and the
// last update's record.
type Status struct {
	Phase    string  `json:"phase"` // "" when idle
	Received int64   `json:"received"`
	Pending  *Record `json:"pending,omitempty"`
	Last     *Record `json:"last,omitempty"`
	Signed   bool    `json:"signed_only"` // a public key is configured
}

// Status reports the engine's state.
func (e *Engine) Status() Status {
	e.mu.Lock()
	st := Status{Phase: e.phase, Received: e.received}
	e.mu.Unlock()
	st.Pending, _ = e.State.Pending()
	if st.Pending != nil {
		st.Pending.Commit, st.Pending.Revert = nil, nil
	}
	st.Last, _ = e.State.Last()
	st.Signed = e.PublicKey != nil && e.PublicKey() != nil
	return st
}

func (e *Engine) setPhase(p string) {
	e.mu.Lock()
	e.phase = p
	e.mu.Unlock()
}

// counter counts bytes read for the progress the dashboard shows.
type counter struct {
	r io.Reader
	e *Engine
}

func (c counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.e.mu.Lock()
	c.e.received += int64(n)
	c.e.mu.Unlock()
	return n, err
}

// Apply takes an archive (body) and its detached signature (may be empty),
// writes the new build beside the running one and starts its test boot.
// It returns once the test boot is about to start (the box goes down a
// moment later) with the pending record.
func (e *Engine) Apply(ctx context.Context, client string, body io.Reader, sig []byte) (*Record, error) {
	e.mu.Lock()
	if e.busy {
		e.mu.Unlock()
		return nil, &Refused{ErrBusy}
	}
	e.busy, e.received = true, 0
	e.mu.Unlock()
	rec, err := e.apply(ctx, client, body, sig)
	e.mu.Lock()
	e.phase = ""
	if err != nil || rec == nil {
		e.busy = false // after a successful apply the box reboots
	}
	e.mu.Unlock()
	return rec, err
}

func (e *Engine) apply(ctx context.Context, client string, body io.Reader, sig []byte) (*Record, error) {
	if err := e.State.Writable(); err != nil {
		return nil, &Refused{fmt.Errorf("updates need a writable /perm to follow the test boot: %w", err)}
	}
	if p, _ := e.State.Pending(); p != nil {
		return nil, &Refused{fmt.Errorf("update %s is still %s; reboot the box to resolve it first", p.ID, p.Outcome)}
	}
	rec := &Record{ID: newID(), Client: client, From: e.current(), Outcome: Installing, Started: time.Now().UTC(),
		HealthTimeout: Duration(e.healthTimeout())}
	rec.From.Root = e.Devices.Active
	rec.To.Root = e.Devices.Inactive()
	tmp, err := os.CreateTemp(e.TmpDir, "e1kbox-update-*.gaf")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	a, plan, err := e.receive(rec, tmp, body, sig)
	if err != nil {
		return nil, err
	}
	return e.install(rec, a, plan)
}

// receive keeps the upload in tmp and checks it: signature, archive, the
// boot file system against the active one. Nothing is written to the disk.
func (e *Engine) receive(rec *Record, tmp *os.File, body io.Reader, sig []byte) (*gaf.Archive, *bootpart.Plan, error) {
	e.setPhase("receiving")
	t := time.Now()
	n, err := io.Copy(tmp, io.LimitReader(counter{body, e}, MaxUpload+1))
	if err != nil {
		return nil, nil, &Refused{fmt.Errorf("receiving the update: %w", err)}
	}
	if n > MaxUpload {
		return nil, nil, &Refused{fmt.Errorf("the update is larger than %d MiB", MaxUpload>>20)}
	}
	rec.step("receive", t)
	e.setPhase("verifying")
	t = time.Now()
	if e.PublicKey != nil {
		if key := e.PublicKey(); key != nil {
			msg, err := os.ReadFile(tmp.Name())
			if err != nil {
				return nil, nil, err
			}
			if err := gaf.Verify(key, msg, sig); err != nil {
				return nil, nil, &Refused{err}
			}
		}
	}
	a, err := gaf.Open(tmp, n)
	if err != nil {
		return nil, nil, &Refused{err}
	}
	plan, err := e.plan(a, rec)
	if err != nil {
		return nil, nil, &Refused{err}
	}
	rec.step("verify", t)
	return a, plan, nil
}

// install writes the new build beside the running one and starts its test
// boot (after a second, so that the answer reaches the client).
func (e *Engine) install(rec *Record, a *gaf.Archive, plan *bootpart.Plan) (*Record, error) {
	log := e.Log
	if log == nil {
		log = slog.Default()
	}
	log.Info("update: verified", "id", rec.ID, "to_sbom", rec.To.SBOMHash, "boot", map[bool]string{true: "unchanged", false: "new " + plan.Body.String() + " body"}[plan.Unchanged])
	if err := e.State.SavePending(rec); err != nil {
		return nil, err
	}
	fail := func(err error) (*Record, error) {
		rec.Outcome, rec.Reason = Failed, err.Error()
		e.State.Finish(rec)
		return nil, err
	}
	e.setPhase("writing root")
	kmsg("update %s: writing root partition %d", rec.ID, rec.To.Root)
	t := time.Now()
	if err := writeMember(a, gaf.Root, e.Devices.Root(rec.To.Root)); err != nil {
		return fail(fmt.Errorf("writing root partition %d: %w", rec.To.Root, err))
	}
	rec.step("write root", t)
	e.setPhase("writing boot")
	kmsg("update %s: writing %d boot file system write(s)", rec.ID, len(plan.Stage))
	t = time.Now()
	if err := e.applyWrites(plan.Stage); err != nil {
		return fail(err)
	}
	rec.step("write boot", t)

	// The watchdog's parameters whichever packer built the update: a test
	// boot whose kernel hangs is reset into the previous build.
	cmdline := watchdog.Append(strings.TrimSpace(string(plan.Cmdline))) + " " + TestbootFlag + rec.ID + " panic=10"
	rec.Outcome, rec.Rebooted = Testing, time.Now().UTC()
	if err := e.State.SavePending(rec); err != nil {
		return fail(err)
	}
	e.setPhase("rebooting")
	log.Info("update: test-booting the new build", "id", rec.ID, "cmdline", cmdline)
	boot := e.TestBoot
	if boot == nil {
		boot = KexecTestBoot
	}
	go func() {
		time.Sleep(time.Second)
		if err := boot(plan.Kernel, cmdline); err != nil {
			log.Error("update: test boot failed to start", "err", err)
			rec.Outcome, rec.Reason = Failed, "the test boot did not start: "+err.Error()
			e.State.Finish(rec)
			e.mu.Lock()
			e.busy = false
			e.mu.Unlock()
		}
	}()
	out := *rec
	out.Commit, out.Revert = nil, nil
	return &out, nil
}

func (e *Engine) healthTimeout() time.Duration {
	if e.HealthTimeout > 0 {
		return e.HealthTimeout
	}
	return 120 * time.Second
}

func (e *Engine) current() Build {
	if e.Current != nil {
		return e.Current()
	}
	return Build{}
}

// plan reads the archive's boot pieces against the active boot partition.
func (e *Engine) plan(a *gaf.Archive, rec *Record) (*bootpart.Plan, error) {
	if a.Has(gaf.SBOM) {
		b, err := a.ReadAll(gaf.SBOM)
		if err != nil {
			return nil, err
		}
		var s struct {
			SBOMHash string `json:"sbom_hash"`
		}
		if json.Unmarshal(b, &s) == nil {
			rec.To.SBOMHash = s.SBOMHash
		}
	}
	if rec.To.SBOMHash != "" && rec.To.SBOMHash == rec.From.SBOMHash {
		return nil, fmt.Errorf("the box already runs this build (SBOM %s)", rec.To.SBOMHash)
	}
	bootImg, err := a.ReadAll(gaf.Boot)
	if err != nil {
		return nil, err
	}
	mbr, err := a.ReadAll(gaf.MBR)
	if err != nil {
		return nil, err
	}
	files, _, err := bootpart.ReadFiles(bytes.NewReader(bootImg))
	if err != nil {
		return nil, fmt.Errorf("the update's boot.img: %w", err)
	}
	boot, err := os.Open(e.Devices.Boot)
	if err != nil {
		return nil, err
	}
	defer boot.Close()
	active, err := bootpart.ReadActive(boot)
	if err != nil {
		return nil, err
	}
	plan, err := bootpart.NewPlan(active, files, mbr, bootpart.RootArg(e.Devices.P1GUID, rec.To.Root))
	if err != nil {
		return nil, err
	}
	rec.BootWritten = !plan.Unchanged
	rec.Commit = plan.Commit
	// Undoing a torn commit: the pointers as they are now.
	for _, w := range plan.Commit {
		old := make([]byte, len(w.Data))
		dev := e.Devices.Boot
		if w.Disk {
			dev = e.Devices.Disk
		}
		if err := readAt(dev, old, w.Off); err != nil {
			return nil, err
		}
		rec.Revert = append([]bootpart.Write{{Disk: w.Disk, Off: w.Off, Data: old, What: "previous " + w.What}}, rec.Revert...)
	}
	return plan, nil
}

func readAt(dev string, b []byte, off int64) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(b, off)
	return err
}

// applyWrites performs bootpart writes on the box's devices.
func (e *Engine) applyWrites(ws []bootpart.Write) error {
	return ApplyWrites(e.Devices, ws)
}

// ApplyWrites performs bootpart writes on d's disk and boot partition.
func ApplyWrites(d *Devices, ws []bootpart.Write) error {
	if len(ws) == 0 {
		return nil
	}
	disk, err := os.OpenFile(d.Disk, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer disk.Close()
	boot, err := os.OpenFile(d.Boot, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer boot.Close()
	if err := bootpart.Apply(disk, boot, ws); err != nil {
		return err
	}
	if err := disk.Close(); err != nil {
		return err
	}
	return boot.Close()
}

func writeMember(a *gaf.Archive, name, dev string) error {
	rc, err := a.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil { // the zip reader checks the CRC at the end
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}
