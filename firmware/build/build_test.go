package build

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"e1kbox/firmware/bootpart"
	"e1kbox/firmware/gaf"
	"e1kbox/firmware/instance"
	"e1kbox/firmware/watchdog"
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
		{"missing kernel package", `"KernelPackage": "e1kbox/firmware/kernel",`, ``, "KernelPackage: missing"},
		{"kernel package not in go.mod", `"KernelPackage": "e1kbox/firmware/kernel"`, `"KernelPackage": "github.com/gokrazy/kernel.rpi"`, `KernelPackage "github.com/gokrazy/kernel.rpi"`},
		{"package that does not build", `"e1kbox/firmware/guard"
    ],`, `"e1kbox/firmware/guard",
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

// TestReproducibleBoot: two builds of the same config (different build
// timestamps) give the same boot file system and MBR, so an update with an
// unchanged kernel writes no boot partition; the root differs (the init's
// timestamp), and the .gaf holds what the manifest names. Both command
// lines (BIOS's and UEFI's) carry the watchdog's parameters.
func TestReproducibleBoot(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var ms []*Manifest
	for i := 0; i < 2; i++ {
		m, err := Run(Options{ConfigPath: repo, SourceDir: repo, OutDir: filepath.Join(t.TempDir(), "out"), NoDiskImage: true})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read(ms[0].Boot), read(ms[1].Boot)) || !bytes.Equal(read(ms[0].MBR), read(ms[1].MBR)) {
		t.Error("two builds of the same kernel and command line have different boot file systems or MBRs")
	}
	if bytes.Equal(read(ms[0].Root), read(ms[1].Root)) || ms[0].SBOMHash == ms[1].SBOMHash && ms[0].BuildTimestamp == ms[1].BuildTimestamp {
		t.Error("the two builds are not told apart")
	}
	files, _, err := bootpart.ReadFiles(bytes.NewReader(read(ms[0].Boot)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/cmdline.txt", "/loader/entries/gokrazy.conf"} {
		var cmdline string
		for name, b := range files {
			if strings.EqualFold(name, p) {
				cmdline = string(b)
			}
		}
		for _, w := range watchdog.Params {
			if !strings.Contains(cmdline, " "+w+" ") && !strings.Contains(cmdline, " "+w+"\n") {
				t.Errorf("%s lacks %s: %q", p, w, cmdline)
			}
		}
	}
	g := read(ms[0].GAF)
	a, err := gaf.Open(bytes.NewReader(g), int64(len(g)))
	if err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{gaf.Boot: ms[0].Boot, gaf.Root: ms[0].Root, gaf.MBR: ms[0].MBR} {
		got, err := a.ReadAll(name)
		if err != nil || !bytes.Equal(got, read(file)) {
			t.Errorf(".gaf %s differs from %s: %v", name, file, err)
		}
	}
	sbom, _ := a.ReadAll(gaf.SBOM)
	if !strings.Contains(string(sbom), `"sbom_hash": "`+ms[0].SBOMHash+`"`) || !strings.Contains(string(sbom), "/user/appliance") {
		t.Errorf("sbom.json does not carry hash %s and the appliance:\n%.300s", ms[0].SBOMHash, sbom)
	}
}

func TestInitSource(t *testing.T) {
	cfg := testConfig(t)
	cfg.Packages = []string{"e1kbox/appliance", "example.com/x/cmd/idle"}
	cfg.PackageConfig = map[string]instance.PackageConfig{
		"e1kbox/appliance":       {CommandLineFlags: []string{"-listen=:8080", `-q="x"`}, Environment: []string{"A=b"}},
		"example.com/x/cmd/idle": {DontStart: true},
	}
	b := &builder{cfg: cfg, opts: Options{BuildTimestamp: "2026-01-02T03:04:05Z"}}
	src, err := b.initSource(b.programPaths())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`var buildTimestamp = "2026-01-02T03:04:05Z"`,
		`exec.Command("/user/appliance", "-listen=:8080", "-q=\"x\"")`,
		`cmd.Env = append(os.Environ(), "A=b")`,
		`exec.Command("/user/idle")`,
		`gokrazy.NewStoppedService(cmd)`,
		`exec.Command("/gokrazy/dhcp")`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("init source lacks %s:\n%s", want, src)
		}
	}
}

// TestSign: -sign writes a detached signature the box's check accepts for
// this archive and no other.
func TestSign(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte(gaf.EncodeSeed(priv)), 0o600)
	m, err := Run(Options{ConfigPath: repo, SourceDir: repo, OutDir: filepath.Join(t.TempDir(), "out"), NoDiskImage: true, SignKey: key})
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := os.ReadFile(m.GAF)
	sig, err := os.ReadFile(m.Signature)
	if err != nil || m.Signature != m.GAF+".sig" {
		t.Fatalf("signature %q: %v", m.Signature, err)
	}
	if err := gaf.Verify(pub, archive, sig); err != nil {
		t.Errorf("the build's own signature: %v", err)
	}
	archive[len(archive)/2] ^= 1
	if err := gaf.Verify(pub, archive, sig); err == nil {
		t.Error("the signature verifies a changed archive")
	}
	if _, err := Run(Options{ConfigPath: repo, SourceDir: repo, OutDir: filepath.Join(t.TempDir(), "out"), NoDiskImage: true, SignKey: "/nonexistent"}); err == nil {
		t.Error("a missing signing key was accepted")
	}
}
