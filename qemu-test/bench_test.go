package qemutest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/ota"
	"e1kbox/firmware/vm"
)

// BenchmarkFirmware measures the firmware lifecycle: a build and a warm
// rebuild, BIOS boot to a healthy appliance under TCG, OTA with an
// unchanged kernel (no boot partition write) and with a changed boot file
// system, and a dashboard upload to healthy. Run it with `make
// bench-firmware`.
func BenchmarkFirmware(b *testing.B) {
	requireQEMU(b)
	dir := b.TempDir()
	run := func(out string, noImage bool, edit func(map[string]any)) (*build.Manifest, time.Duration) {
		cfg, err := testConfig(filepath.Join(dir, out+"-config.json"), edit)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		m, err := build.Run(build.Options{ConfigPath: cfg, SourceDir: repoRoot, OutDir: filepath.Join(dir, out),
			NoDiskImage: noImage, Log: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		return m, time.Since(start)
	}
	cmdline := func(arg string) func(map[string]any) {
		return func(cfg map[string]any) { cfg["KernelExtraArgs"] = []string{arg} }
	}
	for i := 0; i < b.N; i++ {
		first, firstTook := run("first", false, nil)
		_, warmTook := run("warm", false, nil)
		same, _ := run("same-kernel", true, nil)
		changed, _ := run("changed", true, cmdline("e1kbox.bench=changed"))
		ui, _ := run("ui", true, cmdline("e1kbox.bench=ui"))

		start := time.Now()
		v, err := vm.Start(context.Background(), vm.Options{Image: copyImage(b, first.Image), OneTCGThread: true})
		if err != nil {
			b.Fatal(err)
		}
		bx := &box{VM: v, t: b, password: first.Password}
		if err := bx.waitHealthy(first.BuildTimestamp, bootTimeout); err != nil {
			v.Kill()
			b.Fatalf("boot: %v\n%s", err, tail(v.Console(), 40))
		}
		bootTook := time.Since(start)
		defer func() { bx.Kill() }()
		// otaTo updates the box from build from to m. A test boot that goes
		// silent under TCG (see powerCycle) is power-cycled and retried
		// once, as in the tests; the retry's timings are the ones reported.
		otaTo := func(from, m *build.Manifest, wantBoot bool, what string) *ota.Report {
			rep, err := bx.update(m)
			if errors.Is(err, ota.ErrNoAnswer) {
				bx = bx.powerCycle(b, b, from, rep, err, nil)
				rep, err = bx.update(m)
			}
			if err != nil || rep.BootWritten != wantBoot {
				b.Fatalf("OTA, %s: %v (boot written %v)\n%s", what, err, rep.BootWritten, rep)
			}
			return rep
		}
		ota1 := otaTo(first, same, false, "unchanged kernel")
		ota2 := otaTo(same, changed, true, "changed boot file system")
		start = time.Now()
		ctx := browse(b, bx, "/#/system")
		res := uploadInUI(b, ctx, bx, ui.GAF)
		uiTook := time.Since(start)
		if res.Outcome != "committed" {
			b.Fatalf("UI upload: %+v", res)
		}
		b.ReportMetric(firstTook.Seconds(), "build-s")
		b.ReportMetric(warmTook.Seconds(), "warm-build-s")
		b.ReportMetric(bootTook.Seconds(), "boot-healthy-s")
		b.ReportMetric(ota1.Total.Seconds(), "ota-same-kernel-s")
		b.ReportMetric(ota2.Total.Seconds(), "ota-changed-kernel-s")
		b.ReportMetric(uiTook.Seconds(), "ui-upload-healthy-s")
		fmt.Fprintf(os.Stderr, "\nfirmware lifecycle (TCG, %s):\n", time.Now().Format(time.DateOnly))
		for _, r := range []struct {
			what   string
			took   time.Duration
			target string
		}{
			{"firmware build (first in this run)", firstTook, ""},
			{"firmware build (warm)", warmTook, "< 15 s"},
			{"BIOS boot to healthy appliance", bootTook, "< 45 s"},
			{"OTA, unchanged kernel (no boot write), to healthy", ota1.Total, "< 60 s"},
			{"OTA, changed boot file system, to healthy", ota2.Total, "< 90 s"},
			{"dashboard upload (chromium) to healthy", uiTook, "< 90 s"},
		} {
			fmt.Fprintf(os.Stderr, "  %-52s %6.1fs   %s\n", r.what, r.took.Seconds(), r.target)
		}
		fmt.Fprintf(os.Stderr, "%s\n%s\n", ota1, ota2)
	}
}
