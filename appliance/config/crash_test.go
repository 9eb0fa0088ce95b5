package config

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// saverEnv makes the test binary a saver process (see TestMain).
const saverEnv = "E1KBOX_CONFIG_SAVER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(saverEnv); dir != "" {
		if err := runSaver(dir); err != nil {
			fmt.Fprintln(os.Stderr, "saver:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	// The Store logs its warnings; the tests check them through Warnings.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

func crashPaths(dir string) Paths {
	return Paths{Factory: filepath.Join(dir, "factory.json"), Live: filepath.Join(dir, "perm", "config.json")}
}

// runSaver loads the store in dir and applies and confirms configs with
// ever larger FDB sizes until it is killed.
func runSaver(dir string) error {
	s := NewStore(crashPaths(dir), testEnv)
	c, _, err := s.Load()
	if err != nil {
		return err
	}
	base, err := Parse([]byte(`{"version": 2, "ports": [{"name": "port1", "interface": "eth1"}, {"name": "port2", "interface": "eth2"}]}`))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	for n := c.Bridge.FDBSize + 1; ; n++ {
		base.Bridge.FDBSize = n
		id, err := s.Apply(base, time.Hour)
		if err != nil {
			return err
		}
		if err := s.Confirm(id); err != nil {
			return err
		}
	}
}

// TestCrashSafety kills a saver process at random points, at least 200
// times. After every kill the live file must be a complete config that is
// one of the saved versions, every history file must parse, and a new
// Store must load: the last confirmed config, or (when the kill hit an
// unconfirmed apply) the version before it. At least a quarter of 200
// kills must hit the saver after it saved something; on a loaded machine,
// where the saver starts slowly, it keeps killing (up to maxKills) until
// that many did.
func TestCrashSafety(t *testing.T) {
	const kills, maxKills = 200, 800
	dir := t.TempDir()
	paths := crashPaths(dir)
	factory := []byte(`{"version": 1, "ports": [{"name": "port1", "interface": "eth1"}, {"name": "port2", "interface": "eth2"}]}`)
	if err := os.WriteFile(paths.Factory, factory, 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	floor := DefaultFDBSize
	var pendingSeen, progressed int
	// A kill comes up to 20ms after the start, or up to window after
	// "ready". On a loaded machine the saver may save nothing that soon:
	// a kill after "ready" that found no progress doubles the window (up
	// to maxWindow), one that did shrinks it back towards 20ms, so that
	// most of these kills land in the save loop, early in it.
	const minWindow, maxWindow = 20 * time.Millisecond, 640 * time.Millisecond
	window := minWindow
	i := 0
	for ; i < maxKills && (i < kills || progressed < kills/4); i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), saverEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill during Load half of the time, during the save loop otherwise.
		afterReady := rng.IntN(2) == 0
		if afterReady {
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("kill %d: saver said %q; stderr: %s", i, line, stderr.String())
			}
		}
		if afterReady {
			time.Sleep(time.Duration(rng.Int64N(int64(window))))
		} else {
			time.Sleep(time.Duration(rng.Int64N(int64(minWindow))))
		}
		if err := cmd.Process.Kill(); err != nil {
			cmd.Wait()
			t.Fatalf("kill %d: %v; stderr: %s", i, err, stderr.String())
		}
		cmd.Wait()
		if strings.Contains(stderr.String(), "saver:") {
			t.Fatalf("kill %d: saver failed: %s", i, stderr.String())
		}

		live, err := os.ReadFile(paths.Live)
		if os.IsNotExist(err) && floor == DefaultFDBSize {
			continue // killed before the first boot wrote anything
		}
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		c, err := Parse(live)
		if err != nil {
			t.Fatalf("kill %d: live config broken: %v\n%s", i, err, live)
		}
		n := c.Bridge.FDBSize
		if n < floor {
			t.Fatalf("kill %d: live fdbSize %d went back behind %d", i, n, floor)
		}
		if n > floor {
			progressed++
		}
		switch {
		case afterReady && n > floor:
			window = max(window*4/5, minWindow)
		case afterReady:
			window = min(2*window, maxWindow)
		}
		history, _ := filepath.Glob(filepath.Join(filepath.Dir(paths.Live), "history", "*.json"))
		inHistory := false
		for _, f := range history {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatalf("kill %d: %v", i, err)
			}
			if _, err := Parse(b); err != nil {
				t.Fatalf("kill %d: history file %s broken: %v", i, filepath.Base(f), err)
			}
			inHistory = inHistory || bytes.Equal(b, live)
		}
		if !inHistory {
			t.Fatalf("kill %d: the live config is not a saved version", i)
		}
		if len(history) > HistorySize+2 {
			t.Fatalf("kill %d: %d history files", i, len(history))
		}

		marker := markerExists(paths)
		s := NewStore(paths, testEnv)
		loaded, warnings, err := s.Load()
		s.Close()
		if err != nil {
			t.Fatalf("kill %d: Load: %v", i, err)
		}
		got := loaded.Bridge.FDBSize
		switch {
		case marker:
			pendingSeen++
			if got != n && got != n-1 {
				t.Fatalf("kill %d: pending marker with live %d, Load gave %d", i, n, got)
			}
			if !containsWarning(warnings, "not confirmed before the restart") {
				t.Fatalf("kill %d: rollback without a warning: %q", i, warnings)
			}
		case got != n:
			t.Fatalf("kill %d: live %d, Load gave %d (warnings %q)", i, n, got, warnings)
		}
		if stale, _ := filepath.Glob(filepath.Join(filepath.Dir(paths.Live), "*", ".*tmp*")); len(stale) > 0 {
			t.Fatalf("kill %d: Load left temp files %v", i, stale)
		}
		floor = got
	}
	t.Logf("%d kills: the saver progressed before %d of them, %d hit a pending change; final fdbSize %d, kill window %s", i, progressed, pendingSeen, floor, window.Round(time.Millisecond))
	if progressed < kills/4 {
		t.Errorf("the saver made progress before only %d of %d kills; the kills do not exercise saving", progressed, i)
	}
}
