package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"e1kbox/firmware/instance"
)

func testConfig(t *testing.T, extraArgs ...string) *instance.Config {
	t.Helper()
	k, fw := "github.com/gokrazy/kernel.amd64", ""
	return &instance.Config{Hostname: "e1kbox", KernelPackage: &k, FirmwarePackage: &fw, EEPROMPackage: &fw,
		SerialConsole: "ttyS0,115200", KernelExtraArgs: extraArgs}
}

func TestCmdline(t *testing.T) {
	got, err := Cmdline(testConfig(t, "e1000e.InterruptThrottleRate=3000"), "root=/dev/sda2 ro init=/gokrazy/init panic=10 oops=panic rootdelay=10 pci=nommconf", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "console=tty1 console=ttyS0,115200 root=PARTUUID=60c24cc1-f3f9-427a-8199-898504b10001/PARTNROFF=1 ro init=/gokrazy/init panic=10 oops=panic rootwait pci=nommconf e1000e.InterruptThrottleRate=3000\n" + strings.Repeat(" ", 64)
	if got != want {
		t.Errorf("Cmdline =\n%q\nwant\n%q", got, want)
	}
	// gokrazy's testboot replaces "\n" with " gokrazy.try_boot_inactive=1\n":
	// there must be exactly one newline, before the padding.
	if strings.Count(got, "\n") != 1 {
		t.Error("cmdline must hold exactly one newline")
	}
	if _, err := Cmdline(testConfig(t, strings.Repeat("x", 400)), "root=/dev/sda2", 2); err == nil {
		t.Error("an over-long command line was accepted")
	}
}

// TestBuildErrors checks that firmware build names the problem of a bad
// config.json: unknown field, missing kernel package, a package that does
// not build.
func TestBuildErrors(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join(repo, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"unknown field", `"SerialConsole"`, `"SerialConsoel"`, `unknown field "SerialConsoel"`},
		{"missing kernel package", `"KernelPackage": "github.com/gokrazy/kernel.amd64",`, ``, "KernelPackage: missing"},
		{"kernel package not in go.mod", `"KernelPackage": "github.com/gokrazy/kernel.amd64"`, `"KernelPackage": "github.com/gokrazy/kernel.rpi"`, `KernelPackage "github.com/gokrazy/kernel.rpi"`},
		{"package that does not build", `"e1kbox/appliance"
    ],`, `"e1kbox/appliance",
        "e1kbox/firmware/build/testdata/broken"
    ],`, "package e1kbox/firmware/build/testdata/broken does not build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.Replace(string(base), tc.from, tc.to, 1)
			if cfg == string(base) {
				t.Fatalf("test setup: %q not found in config.json", tc.from)
			}
			dir := t.TempDir()
			p := filepath.Join(dir, "config.json")
			if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Run(Options{ConfigPath: p, SourceDir: repo, OutDir: filepath.Join(dir, "out"), NoDiskImage: true, Log: nil})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
