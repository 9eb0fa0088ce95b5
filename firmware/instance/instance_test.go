package instance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const good = `{
  "Hostname": "e1kbox",
  "Packages": ["e1kbox/appliance"],
  "GokrazyPackages": ["github.com/gokrazy/gokrazy/cmd/dhcp"],
  "PackageConfig": {"e1kbox/appliance": {"ExtraFileContents": {"/etc/e1kbox/factory.json": "{}"}}},
  "SerialConsole": "ttyS0,115200",
  "KernelPackage": "github.com/gokrazy/kernel.amd64",
  "FirmwarePackage": "",
  "EEPROMPackage": "",
  "Update": {"HTTPPort": "80"}
}`

func TestParseGood(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Basename("e1kbox/appliance"); got != "appliance" {
		t.Errorf("Basename = %q", got)
	}
	if got := c.Basename("example.com/foo/v2"); got != "foo" {
		t.Errorf("Basename of /v2 package = %q, want foo", got)
	}
	if !c.IsGokrazyPkg("github.com/gokrazy/gokrazy/cmd/dhcp") || c.IsGokrazyPkg("e1kbox/appliance") {
		t.Error("IsGokrazyPkg wrong")
	}
	if got := c.SerialConsoleArg(); got != "ttyS0,115200" {
		t.Errorf("SerialConsoleArg = %q", got)
	}
	if got := c.HTTPPort(); got != "80" {
		t.Errorf("HTTPPort = %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       []string // substrings of the error
	}{
		{"unknown field", strings.Replace(good, `"SerialConsole"`, `"SerialConsol"`, 1), []string{`unknown field "SerialConsol"`}},
		{"missing kernel", strings.Replace(good, `"KernelPackage": "github.com/gokrazy/kernel.amd64",`, ``, 1), []string{"KernelPackage: missing"}},
		{"pi firmware", strings.Replace(good, `"FirmwarePackage": "",`, ``, 1), []string{"FirmwarePackage"}},
		{"syntax", good[:40], []string{"line"}},
		{"type", strings.Replace(good, `"Hostname": "e1kbox"`, `"Hostname": 7`, 1), []string{"line 2", `"Hostname"`}},
		{"perm extra file", strings.Replace(good, `/etc/e1kbox/factory.json`, `/perm/x`, 1), []string{`PackageConfig["e1kbox/appliance"].ExtraFileContents: "/perm/x" is on /perm`}},
		{"config for unknown package", strings.Replace(good, `"PackageConfig": {"e1kbox/appliance"`, `"PackageConfig": {"e1kbox/nope"`, 1), []string{`PackageConfig["e1kbox/nope"]: package is not in Packages`}},
		{"bad port", strings.Replace(good, `"HTTPPort": "80"`, `"HTTPPort": "eighty"`, 1), []string{"Update.HTTPPort"}},
		{"two problems at once", strings.Replace(strings.Replace(good, `"Hostname": "e1kbox"`, `"Hostname": ""`, 1), `"EEPROMPackage": "",`, ``, 1), []string{"Hostname: missing", "EEPROMPackage"}},
		{"wrong arch", strings.Replace(good, `"Hostname": "e1kbox",`, `"Hostname": "e1kbox", "Environment": ["GOARCH=arm64"],`, 1), []string{"GOARCH=arm64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"Hostname":"x","PackageConfig":{"a":{"ExtraFilePaths":{"../x":"y"}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if c.KernelPackage == nil || c.Hostname == "" {
			t.Fatalf("accepted a config without kernel or hostname: %s", b)
		}
	})
}

// TestInstanceDir: a gok instance directory names its config.json, and
// packages build in the builddir gok made for them (or a parent of it).
func TestInstanceDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := ConfigFile(dir); err == nil {
		t.Error("a directory without config.json was taken as an instance")
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	if p, err := ConfigFile(dir); err != nil || p != filepath.Join(dir, "config.json") {
		t.Errorf("ConfigFile(dir) = %q, %v", p, err)
	}
	if BuildDirs(dir) != nil {
		t.Error("BuildDirs without builddir/ is not nil")
	}
	app := filepath.Join(dir, "builddir", "e1kbox", "appliance")
	os.MkdirAll(app, 0o755)
	os.WriteFile(filepath.Join(app, "go.mod"), []byte("module gokrazy/build/e1kbox\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "builddir", "github.com", "gokrazy"), 0o755)
	dirs := BuildDirs(dir)
	for pkg, want := range map[string]string{
		"e1kbox/appliance":                    app,
		"e1kbox/appliance/sub@v1":             app,
		"e1kbox/firmware/guard":               "",
		"github.com/gokrazy/gokrazy/cmd/dhcp": "",
	} {
		if got := dirs(pkg); got != want {
			t.Errorf("BuildDirs(%s) = %q, want %q", pkg, got, want)
		}
	}
}
