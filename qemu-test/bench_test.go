package qemutest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/ota"
	"e1kbox/firmware/vm"
)

// BenchmarkFirmware measures the firmware lifecycle: a build, a warm
// rebuild, BIOS boot to a healthy appliance under TCG, and an OTA round trip
// (upload, test boot, health gate, commit reboot, healthy on the new build).
// Run it with `make bench-firmware`.
func BenchmarkFirmware(b *testing.B) {
	requireQEMU(b)
	dir := b.TempDir()
	cfg := filepath.Join(repoRoot, "config.json")
	run := func(out string, noImage bool) (*build.Manifest, time.Duration) {
		start := time.Now()
		m, err := build.Run(build.Options{ConfigPath: cfg, SourceDir: repoRoot, OutDir: filepath.Join(dir, out),
			NoDiskImage: noImage, Log: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		return m, time.Since(start)
	}
	for i := 0; i < b.N; i++ {
		first, firstTook := run("first", false)
		_, warmTook := run("warm", false)

		start := time.Now()
		v, err := vm.Start(context.Background(), vm.Options{Image: copyImage(b, first.Image)})
		if err != nil {
			b.Fatal(err)
		}
		bx := &box{VM: v, t: b, password: first.Password}
		if err := bx.waitHealthy(first.BuildTimestamp, bootTimeout); err != nil {
			v.Kill()
			b.Fatalf("boot: %v\n%s", err, tail(v.Console(), 40))
		}
		bootTook := time.Since(start)

		second, _ := run("second", true)
		rep, err := ota.Update(context.Background(), ota.Options{
			BaseURL: bx.gokrazyURL(bx.password), HealthURL: bx.dashboardURL("/healthz"),
			Boot: second.Boot, Root: second.Root, MBR: second.MBR, BuildTimestamp: second.BuildTimestamp,
			HealthTimeout: healthTimeout, BootTimeout: bootTimeout, Log: quietLog(),
		})
		v.Kill()
		if err != nil {
			b.Fatalf("OTA: %v\n%s", err, rep)
		}
		healthyOnNew := time.Duration(0)
		for _, s := range rep.Steps[:4] {
			healthyOnNew += s.Took
		}
		b.ReportMetric(firstTook.Seconds(), "build-s")
		b.ReportMetric(warmTook.Seconds(), "warm-build-s")
		b.ReportMetric(bootTook.Seconds(), "boot-healthy-s")
		b.ReportMetric(healthyOnNew.Seconds(), "ota-healthy-new-s")
		b.ReportMetric(rep.Total.Seconds(), "ota-committed-s")
		fmt.Fprintf(os.Stderr, "\nfirmware lifecycle (TCG, %s):\n", time.Now().Format(time.DateOnly))
		fmt.Fprintf(os.Stderr, "  %-44s %6.1fs\n", "firmware build (first in this run)", firstTook.Seconds())
		fmt.Fprintf(os.Stderr, "  %-44s %6.1fs   (target < 15 s)\n", "firmware build (warm)", warmTook.Seconds())
		fmt.Fprintf(os.Stderr, "  %-44s %6.1fs   (target < 45 s)\n", "BIOS boot to healthy appliance", bootTook.Seconds())
		fmt.Fprintf(os.Stderr, "  %-44s %6.1fs   (target < 90 s)\n", "OTA: upload, reboot, healthy on new build", healthyOnNew.Seconds())
		fmt.Fprintf(os.Stderr, "  %-44s %6.1fs\n", "OTA: committed and rebooted clean", rep.Total.Seconds())
		fmt.Fprintf(os.Stderr, "%s\n", rep)
	}
}
