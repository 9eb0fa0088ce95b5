// Package instance reads and checks gokrazy instance configs (config.json).
package instance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Update holds the Update section of a gokrazy instance config.
type Update struct {
	Hostname     string `json:",omitempty"`
	UseTLS       string `json:",omitempty"`
	NoPassword   bool   `json:",omitempty"`
	HTTPPort     string `json:",omitempty"`
	HTTPSPort    string `json:",omitempty"`
	HTTPPassword string `json:",omitempty"`
	CertPEM      string `json:",omitempty"`
	KeyPEM       string `json:",omitempty"`
}

// PackageConfig holds per-package settings, keyed by import path.
type PackageConfig struct {
	GoBuildEnvironment []string          `json:",omitempty"`
	GoBuildFlags       []string          `json:",omitempty"`
	GoBuildTags        []string          `json:",omitempty"`
	ExtraFilePaths     map[string]string `json:",omitempty"`
	ExtraFileContents  map[string]string `json:",omitempty"`
	Basename           string            `json:",omitempty"`
	Environment        []string          `json:",omitempty"`
	CommandLineFlags   []string          `json:",omitempty"`
	DontStart          bool              `json:",omitempty"`
	WaitForClock       bool              `json:",omitempty"`
	WaitFor            []string          `json:",omitempty"`
}

// MountDevice is one entry of MountDevices.
type MountDevice struct {
	Source  string
	Type    string
	Target  string
	Options string
}

// Config is gokrazy's instance config (the same JSON that gok reads).
type Config struct {
	Hostname                   string
	DeviceType                 string                   `json:",omitempty"`
	Update                     *Update                  `json:",omitempty"`
	Environment                []string                 `json:",omitempty"`
	Packages                   []string                 `json:",omitempty"`
	PackageConfig              map[string]PackageConfig `json:",omitempty"`
	SerialConsole              string                   `json:",omitempty"`
	GokrazyPackages            *[]string                `json:",omitempty"`
	KernelPackage              *string                  `json:",omitempty"`
	FirmwarePackage            *string                  `json:",omitempty"`
	EEPROMPackage              *string                  `json:",omitempty"`
	KernelExtraArgs            []string                 `json:",omitempty"`
	BootloaderExtraLines       []string                 `json:",omitempty"`
	BootloaderExtraEEPROM      []string                 `json:",omitempty"`
	MountDevices               []MountDevice            `json:",omitempty"`
	InternalCompatibilityFlags json.RawMessage          `json:",omitempty"`
}

// Load reads and validates the instance config at path.
func Load(file string) (*Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading instance config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// Parse decodes b strictly (unknown fields are errors) and validates it.
func Parse(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, describeJSONError(b, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func describeJSONError(b []byte, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		line, _ := position(b, int64(len(b)))
		return fmt.Errorf("line %d: the JSON ends early (missing } or \"?)", line)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(b, se.Offset)
		return fmt.Errorf("line %d, column %d: %v", line, col, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		line, col := position(b, te.Offset)
		return fmt.Errorf("line %d, column %d: field %q: cannot use a JSON %s as %v", line, col, te.Field, te.Value, te.Type)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return fmt.Errorf("unknown field %s (gokrazy's config.json has no such setting)", strings.TrimPrefix(msg, "json: unknown field "))
	}
	return err
}

func position(b []byte, off int64) (line, col int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line = 1 + bytes.Count(b[:off], []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

var hostnameRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

// Validate reports every problem of the config at once.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Hostname == "" {
		add("Hostname: missing (the box's name; it also seeds the partition GUIDs)")
	} else if !hostnameRe.MatchString(c.Hostname) {
		add("Hostname: %q is not a valid host name", c.Hostname)
	}
	if c.KernelPackage == nil || *c.KernelPackage == "" {
		add("KernelPackage: missing (e1kbox's own is \"e1kbox/firmware/kernel\"; gokrazy's \"github.com/gokrazy/kernel.amd64\" boots too, without BPF JIT)")
	}
	if c.FirmwarePackage == nil || *c.FirmwarePackage != "" {
		add("FirmwarePackage: must be \"\" on amd64 (the default is Raspberry Pi firmware)")
	}
	if c.EEPROMPackage == nil || *c.EEPROMPackage != "" {
		add("EEPROMPackage: must be \"\" on amd64 (the default is the Raspberry Pi EEPROM)")
	}
	if c.DeviceType != "" {
		add("DeviceType: %q is not supported (e1kbox builds PC images only)", c.DeviceType)
	}
	for i, e := range c.Environment {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			add("Environment[%d]: %q is not KEY=value", i, e)
			continue
		}
		if (k == "GOOS" && v != "linux") || (k == "GOARCH" && v != "amd64") {
			add("Environment[%d]: %s=%s: e1kbox images are linux/amd64", i, k, v)
		}
	}
	seen := map[string]string{}
	for i, p := range c.AllPackages() {
		if p == "" || strings.ContainsAny(p, " \t") {
			add("Packages[%d]: %q is not a Go package path", i, p)
			continue
		}
		base := c.Basename(p)
		if prev, ok := seen[base]; ok {
			add("Packages: %q and %q both install as %q (set PackageConfig.Basename)", prev, p, base)
		}
		seen[base] = p
	}
	if len(c.Packages) == 0 {
		add("Packages: empty (the image needs at least e1kbox/appliance)")
	}
	pkgs := map[string]bool{}
	for _, p := range c.AllPackages() {
		pkgs[p] = true
	}
	extra := map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(c.PackageConfig)) {
		pc := c.PackageConfig[p]
		if !pkgs[p] {
			add("PackageConfig[%q]: package is not in Packages or GokrazyPackages", p)
		}
		for _, e := range pc.GoBuildEnvironment {
			if !strings.Contains(e, "=") {
				add("PackageConfig[%q].GoBuildEnvironment: %q is not KEY=value", p, e)
			}
		}
		for _, e := range pc.Environment {
			if !strings.Contains(e, "=") {
				add("PackageConfig[%q].Environment: %q is not KEY=value", p, e)
			}
		}
		check := func(field, dst string) {
			if !strings.HasPrefix(dst, "/") || path.Clean(dst) != dst {
				add("PackageConfig[%q].%s: %q must be a clean absolute path", p, field, dst)
				return
			}
			if dst == "/perm" || strings.HasPrefix(dst, "/perm/") {
				add("PackageConfig[%q].%s: %q is on /perm, which is not part of the image", p, field, dst)
				return
			}
			if prev, ok := extra[dst]; ok {
				add("PackageConfig[%q].%s: %q is also written by %s", p, field, dst, prev)
			}
			extra[dst] = p
		}
		for _, dst := range slices.Sorted(maps.Keys(pc.ExtraFileContents)) {
			check("ExtraFileContents", dst)
		}
		for _, dst := range slices.Sorted(maps.Keys(pc.ExtraFilePaths)) {
			check("ExtraFilePaths", dst)
		}
		if pc.Basename != "" && strings.Contains(pc.Basename, "/") {
			add("PackageConfig[%q].Basename: %q must not contain '/'", p, pc.Basename)
		}
	}
	if u := c.Update; u != nil {
		for _, f := range []struct{ name, v string }{{"HTTPPort", u.HTTPPort}, {"HTTPSPort", u.HTTPSPort}} {
			if f.v == "" {
				continue
			}
			if n, err := strconv.Atoi(f.v); err != nil || n < 1 || n > 65535 {
				add("Update.%s: %q is not a TCP port", f.name, f.v)
			}
		}
		switch u.UseTLS {
		case "", "off":
		default:
			add("Update.UseTLS: %q is not supported by e1kbox's builder (use \"\" or \"off\")", u.UseTLS)
		}
	}
	for i, m := range c.MountDevices {
		if !strings.HasPrefix(m.Target, "/") {
			add("MountDevices[%d].Target: %q must be absolute", i, m.Target)
		}
	}
	for i, a := range c.KernelExtraArgs {
		if strings.ContainsAny(a, "\n\r") {
			add("KernelExtraArgs[%d]: must not contain a newline", i)
		}
	}
	return errors.Join(errs...)
}

// GokrazyPkgs returns the gokrazy system packages; unset means gok's
// defaults (dhcp, ntp, randomd, heartbeat).
func (c *Config) GokrazyPkgs() []string {
	if c.GokrazyPackages != nil {
		return *c.GokrazyPackages
	}
	return []string{
		"github.com/gokrazy/gokrazy/cmd/dhcp",
		"github.com/gokrazy/gokrazy/cmd/ntp",
		"github.com/gokrazy/gokrazy/cmd/randomd",
		"github.com/gokrazy/gokrazy/cmd/heartbeat",
	}
}

// AllPackages returns the gokrazy packages followed by the user packages.
func (c *Config) AllPackages() []string {
	return append(append([]string{}, c.GokrazyPkgs()...), c.Packages...)
}

// IsGokrazyPkg reports whether p installs under /gokrazy rather than /user.
func (c *Config) IsGokrazyPkg(p string) bool {
	for _, g := range c.GokrazyPkgs() {
		if g == p {
			return true
		}
	}
	return false
}

var versionSuffix = regexp.MustCompile(`^v[0-9]+$`)

// Basename is the file name a package is installed as.
func (c *Config) Basename(pkg string) string {
	if pc, ok := c.PackageConfig[pkg]; ok && pc.Basename != "" {
		return pc.Basename
	}
	base := path.Base(pkg)
	if versionSuffix.MatchString(base) {
		base = path.Base(path.Dir(pkg))
	}
	return base
}

// ByBasename returns the package config that applies to the program
// installed as base (gokrazy matches flags and environment by basename).
func (c *Config) ByBasename(base string) PackageConfig {
	for _, p := range c.AllPackages() {
		if c.Basename(p) == base {
			return c.PackageConfig[p]
		}
	}
	return PackageConfig{}
}

// HTTPPort is the gokrazy UI port (default 80).
func (c *Config) HTTPPort() string {
	if c.Update != nil && c.Update.HTTPPort != "" {
		return c.Update.HTTPPort
	}
	return "80"
}

// SerialConsoleArg returns the console= argument for SerialConsole ("" if off).
func (c *Config) SerialConsoleArg() string {
	switch c.SerialConsole {
	case "off", "disabled":
		return ""
	case "":
		return "serial0,115200"
	}
	return c.SerialConsole
}

// ConfigFile returns the config.json that path names: path itself, or
// path/config.json when path is a gok instance directory.
func ConfigFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("instance config: %w", err)
	}
	if !fi.IsDir() {
		return path, nil
	}
	p := filepath.Join(path, "config.json")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is a directory without config.json (not a gok instance directory): %w", path, err)
	}
	return p, nil
}

// BuildDirs returns where gok builds each package of the instance in
// instanceDir: builddir/<package> or the closest parent of it that has a
// go.mod (what `gok add` and gok's first build create), "" if none.
func BuildDirs(instanceDir string) func(pkg string) string {
	root := filepath.Join(instanceDir, "builddir")
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	return func(pkg string) string {
		pkg, _, _ = strings.Cut(pkg, "@")
		for p := pkg; p != "." && p != "/" && p != ""; p = path.Dir(p) {
			d := filepath.Join(root, filepath.FromSlash(p))
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d
			}
		}
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root
		}
		return ""
	}
}
