// Package qemutest boots the real e1kbox image under QEMU with e1000e NICs
// and tests it from the outside, the way a user would.
package qemutest

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/vm"
	"e1kbox/internal/testenv"
)

// Timeouts for TCG: boots take 20–40 s on an idle 2-core machine.
const (
	bootTimeout   = 4 * time.Minute
	healthTimeout = 75 * time.Second // the gok path's wait for health
)

var (
	repoRoot  string
	artifacts string
)

func TestMain(m *testing.M) {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	repoRoot = filepath.Dir(wd)
	artifacts = filepath.Join(wd, "artifacts")
	os.MkdirAll(artifacts, 0o755)
	code := m.Run()
	cleanupBuilds()
	os.Exit(code)
}

// requireQEMU fails (under CI) or skips when QEMU is missing.
func requireQEMU(t testing.TB) {
	t.Helper()
	testenv.Require(t, "qemu-system-x86_64", "mkfs.ext4")
	if _, err := os.Stat(vm.OVMFCode); err != nil && os.Getenv("CI") == "true" {
		t.Fatalf("OVMF is required under CI: %v", err) // elsewhere only the UEFI boot skips
	}
}

// builds are made once per test binary and shared.
type builds struct {
	dir string
	// good is the image under test; second is the same with another
	// build timestamp (an update that leaves the boot partition as it is);
	// changed has another kernel command line, so its boot file system
	// differs; broke's appliance never becomes healthy; panics' kernel
	// panics at boot (init=/nonexistent); hangs' kernel waits forever for
	// a root device that does not exist (rootwait), without panicking.
	// All share config.json, with the guard's health deadline shortened
	// for the tests.
	good, second, changed, broke, panics, hangs *build.Manifest
	err                                         error
}

var (
	buildOnce sync.Once
	shared    builds
)

func cleanupBuilds() {
	for _, dir := range []string{shared.dir, router.dir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// theBuilds makes the builds once per test binary.
func theBuilds(t testing.TB) *builds {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "e1kbox-qemu-test-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		for _, b := range []struct {
			name  string
			to    **build.Manifest
			image bool
			edit  func(cfg map[string]any)
		}{
			{"good", &shared.good, true, nil},
			{"second", &shared.second, false, nil},
			{"changed", &shared.changed, false, func(cfg map[string]any) { cfg["KernelExtraArgs"] = []string{"e1kbox.test=changed"} }},
			{"broken", &shared.broke, false, func(cfg map[string]any) {
				// an address the appliance cannot listen on: it exits at once
				pkgConfig(cfg, "e1kbox/appliance")["CommandLineFlags"] = []string{"-listen=256.0.0.1:8080"}
			}},
			{"panics", &shared.panics, false, func(cfg map[string]any) { cfg["KernelExtraArgs"] = []string{"init=/nonexistent"} }},
			// The last root= counts: after the real one (which updates
			// edit), one no disk has.
			{"hangs", &shared.hangs, false, func(cfg map[string]any) { cfg["KernelExtraArgs"] = []string{"root=" + missingRoot} }},
		} {
			cfgPath, err := testConfig(filepath.Join(dir, b.name+"-config.json"), b.edit)
			if err != nil {
				shared.err = err
				return
			}
			o := build.Options{ConfigPath: cfgPath, SourceDir: repoRoot, OutDir: filepath.Join(dir, b.name), NoDiskImage: !b.image, Log: quietLog()}
			if *b.to, err = build.Run(o); err != nil {
				shared.err = fmt.Errorf("building %s: %w", b.name, err)
				return
			}
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return &shared
}

// routerConfig is the home router's instance config (NAT, the WAN by
// DHCP, DHCP and DNS on the LAN): the image a household flashes.
const routerConfig = "examples/router/config.json"

var (
	routerOnce sync.Once
	router     struct {
		dir string
		m   *build.Manifest
		err error
	}
)

// theRouterBuild builds the router image, as it ships, once per test
// binary.
func theRouterBuild(t testing.TB) *build.Manifest {
	t.Helper()
	routerOnce.Do(func() {
		if router.dir, router.err = os.MkdirTemp("", "e1kbox-qemu-router-"); router.err != nil {
			return
		}
		o := build.Options{ConfigPath: filepath.Join(repoRoot, routerConfig), SourceDir: repoRoot, OutDir: router.dir, Log: quietLog()}
		if router.m, router.err = build.Run(o); router.err != nil {
			router.err = fmt.Errorf("building the router image: %w", router.err)
		}
	})
	if router.err != nil {
		t.Fatal(router.err)
	}
	return router.m
}

// guardTimeout is the test builds' health deadline for a new build.
const guardTimeout = "60s"

// testConfig writes config.json with the guard's deadline at guardTimeout
// and edit applied.
func testConfig(dst string, edit func(map[string]any)) (string, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "config.json"))
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", err
	}
	pkgConfig(cfg, "e1kbox/firmware/guard")["CommandLineFlags"] = []string{"-health=http://127.0.0.1:8080/healthz", "-timeout=" + guardTimeout}
	if edit != nil {
		edit(cfg)
	}
	out, _ := json.MarshalIndent(cfg, "", "  ")
	return dst, os.WriteFile(dst, out, 0o644)
}

func pkgConfig(cfg map[string]any, pkg string) map[string]any {
	pcs := cfg["PackageConfig"].(map[string]any)
	pc, ok := pcs[pkg].(map[string]any)
	if !ok {
		pc = map[string]any{}
		pcs[pkg] = pc
	}
	return pc
}

// joined runs f in a goroutine, which reports only through f's result,
// and returns the wait for that result. The goroutine is joined at t's
// cleanup too, when the test ends before it waited.
func joined(t testing.TB, f func() error) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	var once sync.Once
	var err error
	wait = func() error {
		once.Do(func() { err = <-done })
		return err
	}
	t.Cleanup(func() { wait() })
	return wait
}
