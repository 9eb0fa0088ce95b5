package qemutest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/boxupdate"
	"e1kbox/firmware/vm"
)

// missingRoot is a root device no test disk has: a kernel told to wait
// for it (rootwait) waits forever, without panicking.
const missingRoot = "/dev/sdz9"

// Console lines of the hang and of the watchdog (Linux, i6300esb).
const (
	hangSign    = "Waiting for root device " + missingRoot
	kexecSign   = "kexec_core: Starting new kernel"
	kernelStart = "Command line:"
	// i6300esb's probe finds the lock bit set: the timer gokrazy's init
	// started in the previous kernel is still running, and the probe
	// cannot stop it.
	lockedSign = "nowayout already set"
	probeSign  = "i6300ESB timer" // and "initialized": the driver's probe
	openSign   = "found hardware watchdog"
)

// hanging is the update whose kernel hangs at boot.
func hanging(bs *builds) deadKernel {
	return deadKernel{what: "hangs", m: bs.hangs, ended: hangsEnded, resets: 1, check: watchdogReset}
}

// hangsEnded counts the waits for missingRoot after which another kernel
// started.
func hangsEnded(console string) int {
	n := 0
	for _, after := range strings.Split(console, hangSign)[1:] {
		if strings.Contains(after, kernelStart) {
			n++
		}
	}
	return n
}

// watchdogReset checks that the last wait for missingRoot was ended by the
// watchdog: the test boot's kernel found it running, QEMU's watchdog fired
// after the wait began, the wait ended in no panic, and the kernel that
// followed was the firmware's boot of the previous build (no test-boot
// flag), not a kexec. It says when each happened, in host time since QEMU
// started.
func watchdogReset(s shown) (string, error) {
	console := s.console
	i := strings.LastIndex(console, hangSign)
	if i < 0 {
		return "", errors.New("the console has no wait for the missing root device")
	}
	testBoot := console[:i]
	if k := strings.LastIndex(testBoot, kexecSign); k >= 0 {
		testBoot = testBoot[k:]
	}
	var errs []error
	if !strings.Contains(testBoot, lockedSign) {
		errs = append(errs, fmt.Errorf("the test boot's kernel did not find the watchdog running (no %q before the hang)", lockedSign))
	}
	after := console[i:]
	j := strings.Index(after, kernelStart)
	if j < 0 {
		return "", errors.New("no kernel started after the hang")
	}
	if strings.Contains(after[:j], "Kernel panic") {
		errs = append(errs, errors.New("the hang ended in a kernel panic, not by the watchdog"))
	}
	if next, _, _ := strings.Cut(after[j:], "\n"); strings.Contains(next, boxupdate.TestbootFlag) {
		errs = append(errs, fmt.Errorf("the kernel after the hang is a test boot, not the previous build: %q", next))
	}
	times, wait := hangTimes(s.events, s.fired)
	if wait > 0 && !slices.ContainsFunc(s.fired, func(f time.Duration) bool { return f >= wait }) {
		errs = append(errs, fmt.Errorf("QEMU's watchdog did not fire after the hang began (fired at %v)", s.fired))
	}
	return times, errors.Join(errs...)
}

// hangTimes says when the last hung test boot started, found the watchdog
// and began waiting (which it returns, 0 if not seen), when the watchdog
// fired and the next kernel started (after the firmware and the loader),
// and how long the boot after it took from the watchdog's probe to
// gokrazy's init opening it (the margin a good boot has).
func hangTimes(events []vm.Event, fired []time.Duration) (string, time.Duration) {
	wait := -1
	for i, e := range events {
		if strings.Contains(e.Line, hangSign) {
			wait = i
		}
	}
	if wait < 0 {
		return "no wait for the root device among the console's milestones", 0
	}
	probed := func(e vm.Event) bool {
		return strings.Contains(e.Line, probeSign) && strings.Contains(e.Line, "initialized")
	}
	var kexec, probe, next, nextProbe, nextOpen time.Duration // 0: not seen
	for _, e := range events[:wait] {
		switch {
		case strings.Contains(e.Line, kexecSign):
			kexec, probe = e.At, 0
		case probed(e):
			probe = e.At
		}
	}
	for _, e := range events[wait+1:] {
		switch {
		case next == 0 && strings.Contains(e.Line, kernelStart):
			next = e.At
		case next > 0 && nextProbe == 0 && probed(e):
			nextProbe = e.At
		case nextProbe > 0 && strings.Contains(e.Line, openSign):
			nextOpen = e.At
		}
		if nextOpen > 0 {
			break
		}
	}
	at := events[wait].At
	var fire time.Duration
	if i := slices.IndexFunc(fired, func(f time.Duration) bool { return f >= at }); i >= 0 {
		fire = fired[i]
	}
	s := fmt.Sprintf("hung test boot (host time since QEMU started): kexec %s, watchdog probed %s, waiting for %s from %s, watchdog fired %s, next kernel %s",
		seen(kexec), seen(probe), missingRoot, seen(at), seen(fire), seen(next))
	if fire > 0 {
		s += fmt.Sprintf(": fired %.1fs into the hang", (fire - at).Seconds())
		if probe > 0 {
			s += fmt.Sprintf(", %.1fs after the test boot's kernel found it", (fire - probe).Seconds())
		}
		if next > 0 {
			s += fmt.Sprintf("; the firmware and loader took %.1fs to the next kernel", (next - fire).Seconds())
		}
	}
	if nextOpen > 0 {
		s += fmt.Sprintf("; the previous build's init opened the watchdog %.1fs after its probe", (nextOpen - nextProbe).Seconds())
	}
	return s, at
}

// TestWatchdogResetConsole: what watchdogReset and hangsEnded take for a
// hang the watchdog ended, and what they refuse, on made-up consoles.
func TestWatchdogResetConsole(t *testing.T) {
	const (
		test     = "[ 28.0] " + kexecSign + "\n[ 0.0] " + kernelStart + " root=x e1kbox.testboot=abc panic=10\n"
		locked   = "[ 3.2] i6300ESB timer 0000:00:05.0: " + lockedSign + "\n"
		hang     = "[ 3.6] " + hangSign + "...\n"
		firmBoot = "[ 0.0] " + kernelStart + " root=x\n"
	)
	waiting := []vm.Event{{At: 10 * time.Second, Line: hang}} // the hang's milestone
	tests := []struct {
		name    string
		console string
		fired   []time.Duration // QEMU's WATCHDOG events
		ended   int
		err     string // "" for none
	}{
		{"reset by the watchdog", test + locked + hang + firmBoot, []time.Duration{41 * time.Second}, 1, ""},
		{"still hanging", test + locked + hang, nil, 0, "no kernel started after the hang"},
		{"the watchdog was not running", test + hang + firmBoot, []time.Duration{41 * time.Second}, 1, "did not find the watchdog running"},
		{"QEMU's watchdog did not fire", test + locked + hang + firmBoot, nil, 1, "did not fire after the hang began"},
		{"it fired before the hang only", test + locked + hang + firmBoot, []time.Duration{5 * time.Second}, 1, "did not fire after the hang began"},
		{"ended by a panic", test + locked + hang + "Kernel panic - not syncing: hung_task\n" + firmBoot, []time.Duration{41 * time.Second}, 1, "ended in a kernel panic"},
		{"followed by another test boot", test + locked + hang + test, []time.Duration{41 * time.Second}, 1, "is a test boot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hangsEnded(tt.console); got != tt.ended {
				t.Errorf("hangsEnded = %d, want %d", got, tt.ended)
			}
			_, err := watchdogReset(shown{console: tt.console, events: waiting, fired: tt.fired})
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("watchdogReset: %v, want an error with %q", err, tt.err)
			}
		})
	}
}
