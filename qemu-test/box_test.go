package qemutest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/vm"
)

// box is a booted VM plus what a user knows about it.
type box struct {
	*vm.VM
	t        testing.TB
	password string
	image    string
}

// copyImage gives each VM its own disk (sparse copy).
func copyImage(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "disk.img")
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("copying the image: %v: %s", err, out)
	}
	return dst
}

// boot starts a VM (on a fresh copy of the image, or on opts.Image as it
// is) and waits for gokrazy and a healthy appliance.
// TCG very rarely panics early in boot (a text-patching race); such a boot
// is retried once on a fresh copy of the disk.
func boot(t testing.TB, m *build.Manifest, opts vm.Options) *box {
	t.Helper()
	return bootFor(t, t, m, opts)
}

// bootFor is boot with the VM's lifetime tied to owner (a parent test),
// not to t: a subtest that power-cycles a box hands the new one on.
func bootFor(t, owner testing.TB, m *build.Manifest, opts vm.Options) *box {
	t.Helper()
	b, _ := bootForAny(t, owner, []*build.Manifest{m}, opts)
	return b
}

// bootForAny is bootFor for a disk that may hold any of builds (the first
// one's password): a box silent in an update's test boot may have had its
// guard commit the new build just before. It returns the build the box
// came up healthy on.
func bootForAny(t, owner testing.TB, builds []*build.Manifest, opts vm.Options) (*box, *build.Manifest) {
	t.Helper()
	m := builds[0]
	opts.OneTCGThread = true // see vm.Options: no multi-threaded TCG hangs in functional tests
	keep := opts.Image       // boot this disk as it is (a reboot after a power cut)
	for attempt := 1; ; attempt++ {
		if keep == "" {
			opts.Image = copyImage(t, m.Image)
		}
		start := time.Now()
		v, err := vm.Start(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		b := &box{VM: v, t: t, password: m.Password, image: opts.Image}
		on, err := b.waitHealthyAny(builds, bootTimeout)
		if err == nil {
			t.Logf("boot (attempt %d, uefi=%v): healthy after %.1fs on build %s", attempt, opts.UEFI, time.Since(start).Seconds(), on.BuildTimestamp)
			if fired := v.WatchdogFired(); len(fired) > 0 {
				// A hang early in the boot (TCG), ended by the watchdog.
				t.Logf("WATCHDOG RESET: the box hung in this boot and its watchdog reset it (%s); console saved", b.watchdogNote())
			}
			owner.Cleanup(func() {
				b.saveConsole(owner.Name()) // an artifact of every boot, passed or failed
				b.Kill()
			})
			return b, on
		}
		console := v.Console()
		// What answers while the box is unhealthy, for the report.
		var h health
		herr := getJSON(b.dashboardURL("/healthz"), &h)
		early := strings.Contains(console, "Kernel panic") || strings.Contains(console, "Oops")
		var hang string
		if !early {
			hang = b.hangReport()
		}
		b.saveConsole(owner.Name())
		v.Kill()
		if attempt == 1 && early {
			t.Logf("boot attempt 1 panicked early (TCG flake); retrying once. Console tail:\n%s", tail(console, 30))
			continue
		}
		if attempt == 1 {
			// gokrazy's UI accepting connections and never answering
			// was the management port without routes (see powerCycle).
			// Power-cycled once, said loudly; a second hang fails.
			t.Logf("BOOT HANG: box not healthy within %v (%v; appliance /healthz: %+v, %v); power-cycling once. Console tail:\n%s\nboot timeline:\n%s\n%s",
				bootTimeout, err, h, herr, tail(console, 30), v.Timeline(), hang)
			continue
		}
		t.Fatalf("serial console tail:\n%s\nboot timeline (host time since QEMU started):\n%s\n%s\nbox did not become healthy within %v (attempt %d): %v",
			tail(console, 40), v.Timeline(), hang, bootTimeout, attempt, err)
	}
}

var (
	consolesMu sync.Mutex
	consoles   = map[string]int{} // boots saved per test name
)

// saveConsole writes the box's console to artifacts/NAME.console.log, or
// NAME.N.console.log for the Nth box a test booted (power cuts, retries).
func (b *box) saveConsole(name string) {
	name = strings.ReplaceAll(name, "/", "_")
	consolesMu.Lock()
	consoles[name]++
	if n := consoles[name]; n > 1 {
		name = fmt.Sprintf("%s.%d", name, n)
	}
	consolesMu.Unlock()
	p := filepath.Join(artifacts, name+".console.log")
	os.WriteFile(p, []byte(b.Console()), 0o644)
	b.t.Logf("serial console saved to %s", p)
}

// powerCycle is what a user does with a box that stopped answering in an
// update (ota.ErrNoAnswer): pull the plug and boot the same disk again. What
// must hold then is that it boots, healthy, on build m, the one it ran
// before (an unconfirmed test boot of the new build, if the cut came before
// the init consumed the test-boot flag, reverts by itself within bootTimeout).
// Boxes went silent after about one boot in seven, until the supervisor
// learnt to repair the management port's routes that gokrazy's DHCP
// client can lose at boot (appliance/mgmtnet); a silent box is still
// power-cycled once, loudly, and callers retry what it was doing once.
// unplug, if set, runs while the box is off (e.g. moving its taps back to
// where the new QEMU opens them).
func (b *box) powerCycle(t, owner testing.TB, m *build.Manifest, rep fmt.Stringer, err error, unplug func()) *box {
	t.Helper()
	nb, _ := b.powerCycleAny(t, owner, []*build.Manifest{m}, rep, err, unplug)
	return nb
}

// powerCycleAny is powerCycle for a box that may come back on any of
// builds: silent in an update's test boot, after or before its guard
// committed the new build. It returns the build the box runs.
func (b *box) powerCycleAny(t, owner testing.TB, builds []*build.Manifest, rep fmt.Stringer, err error, unplug func()) (*box, *build.Manifest) {
	t.Helper()
	quiet := b.Quiet().Round(time.Second)
	t.Logf("%s\nthe box stopped answering (console silent for %v before the report): %v\npower-cycling it; what it was doing is retried once",
		b.diagnosis(rep), quiet, err)
	b.saveConsole(owner.Name())
	b.Kill()
	if unplug != nil {
		unplug()
	}
	opts := b.Opts
	opts.HTTPPort, opts.DashboardPort = 0, 0
	return bootForAny(t, owner, builds, opts)
}

// hangReport asks QEMU where the vCPUs are and the guest kernel (magic
// SysRq) for its CPUs' backtraces and blocked tasks, which it prints on the
// console, the saved artifact: what tells a frozen guest from a busy one or
// from a box whose programs stopped answering.
func (b *box) hangReport() string {
	r := b.HangReport()
	time.Sleep(3 * time.Second) // SysRq's output reaches the console
	return "QEMU on the silent box:\n" + r + "(the guest's SysRq backtraces are in the saved console)"
}

// panics counts the kernel panics in the retained console.
func (b *box) panics() int { return panicCount(b.Console()) }

// panicCount counts the kernel panics in a console.
func panicCount(console string) int { return strings.Count(console, "Kernel panic") }

// reason says what a power cycle interrupted when no update report does.
type reason string

func (r reason) String() string { return string(r) }

// diagnosis is what a failed update prints, the most telling part last
// (CI shows the end of a failure): the console's tail, where QEMU's vCPUs
// are (hangReport), the update's steps with their durations, and the boot
// timeline with host times.
func (b *box) diagnosis(rep fmt.Stringer) string {
	console := tail(b.Console(), 40) // before SysRq prints its backtraces
	return fmt.Sprintf("serial console tail:\n%s\n%s\n%s\nboot timeline (host time since QEMU started):\n%s\n%s",
		console, b.hangReport(), rep, tail(b.Timeline(), 30), b.watchdogNote())
}

// watchdogNote says when QEMU's watchdog reset the box (host time since
// QEMU started).
func (b *box) watchdogNote() string {
	fired := b.WatchdogFired()
	if len(fired) == 0 {
		return "QEMU's watchdog never fired"
	}
	var at []string
	for _, f := range fired {
		at = append(at, seen(f))
	}
	return "QEMU's watchdog fired (a reset) at " + strings.Join(at, ", ")
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// gokrazyURL is the box's gokrazy UI with credentials.
func (b *box) gokrazyURL(password string) string {
	return (&url.URL{Scheme: "http", User: url.UserPassword("gokrazy", password), Host: b.HTTPAddr(), Path: "/"}).String()
}

func (b *box) dashboardURL(path string) string { return "http://" + b.DashboardAddr() + path }

// waitHealthy waits until gokrazy reports build ts and the appliance is
// healthy on it.
func (b *box) waitHealthy(ts string, timeout time.Duration) error {
	_, err := b.waitHealthyAny([]*build.Manifest{{BuildTimestamp: ts}}, timeout)
	return err
}

// waitHealthyAny waits until the box is healthy on one of builds and
// returns that one.
func (b *box) waitHealthyAny(builds []*build.Manifest, timeout time.Duration) (*build.Manifest, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-b.Done():
			return nil, fmt.Errorf("QEMU exited: %v", b.Err())
		default:
		}
		for _, m := range builds {
			if last = b.healthyOn(m.BuildTimestamp); last == nil {
				return m, nil
			}
		}
		time.Sleep(time.Second)
	}
	return nil, last
}

func (b *box) healthyOn(ts string) error {
	var st struct{ BuildTimestamp string }
	if err := getJSON(b.gokrazyURL(b.password), &st); err != nil {
		return fmt.Errorf("gokrazy status: %w", err)
	}
	if st.BuildTimestamp != ts {
		return fmt.Errorf("gokrazy reports build %q, want %q", st.BuildTimestamp, ts)
	}
	var h health
	if err := getJSON(b.dashboardURL("/healthz"), &h); err != nil {
		return fmt.Errorf("appliance health: %w", err)
	}
	if h.Status != "ok" || h.Build != ts {
		return fmt.Errorf("appliance health = %+v, want ok on build %s", h, ts)
	}
	return nil
}

type health struct {
	Status string `json:"status"`
	Build  string `json:"build"`
	Perm   struct {
		Dir      string `json:"dir"`
		Writable bool   `json:"writable"`
		Error    string `json:"error"`
	} `json:"perm"`
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func getJSON(u string, v any) error {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusError{resp.StatusCode}
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v)
}

type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

func statusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return 0
}

// logLine waits up to timeout for a line containing s in gokrazy's log of
// the service at path (stream "stdout" or "stderr"): its last 100 lines,
// then what follows. It returns the line.
func (b *box) logLine(path, stream, s string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u := b.gokrazyURL(b.password) + "log?" + url.Values{"path": {path}, "stream": {stream}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req) // no client timeout: the log streams until ctx ends
	if err != nil {
		return "", fmt.Errorf("gokrazy's log of %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("gokrazy's log of %s: %w", path, &statusError{resp.StatusCode})
	}
	var seen []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return sc.Text(), nil
		}
		seen = append(seen, sc.Text())
	}
	return "", fmt.Errorf("no %q in the %s of %s within %v (%v); it said:\n%s", s, stream, path, timeout, sc.Err(), tail(strings.Join(seen, "\n"), 20))
}
