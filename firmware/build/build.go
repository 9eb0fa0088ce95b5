// Package build turns a gokrazy instance config into a bootable e1kbox image.
package build

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"e1kbox/firmware/gaf"
	"e1kbox/firmware/image"
	"e1kbox/firmware/instance"
)

// SystemdBootEFI is Debian's systemd-boot (package systemd-boot-efi).
const SystemdBootEFI = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

// Options control a build.
type Options struct {
	ConfigPath string // gokrazy instance config (config.json)
	// SourceDir is the Go module the packages are built in (default: the
	// directory of ConfigPath).
	SourceDir string
	OutDir    string // where the image and update pieces go
	DiskBytes int64  // size of the full disk image (default 2 GiB)
	// BuildTimestamp identifies the build (default: now, RFC 3339).
	BuildTimestamp string
	// SignKey, if set, is an ed25519 signing key file: the .gaf gets a
	// detached signature (.gaf.sig) that boxes with the public key check.
	SignKey string
	// NoDiskImage skips the full disk image (an OTA needs only the pieces).
	NoDiskImage bool
	Log         *slog.Logger
}

// Manifest describes a finished build; it is written next to the image.
type Manifest struct {
	BuildTimestamp string `json:"build_timestamp"`
	Hostname       string `json:"hostname"`
	HTTPPort       string `json:"http_port"`
	DashboardPort  string `json:"dashboard_port"`
	Password       string `json:"password"`
	Image          string `json:"image,omitempty"`
	Boot           string `json:"boot"`
	Root           string `json:"root"`
	MBR            string `json:"mbr"`
	// GAF is the update archive (boot, root, MBR and SBOM in one zip), and
	// Signature its detached signature when the build was signed.
	GAF       string `json:"gaf"`
	Signature string `json:"signature,omitempty"`
	// SBOMHash is gokrazy's SBOMHash of the build (/etc/gokrazy/sbom.json).
	SBOMHash string            `json:"sbom_hash"`
	Steps    map[string]string `json:"steps"`
}

// Run builds the image described by opts.
func Run(opts Options) (*Manifest, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.DiskBytes == 0 {
		opts.DiskBytes = 2 << 30
	}
	if opts.BuildTimestamp == "" {
		opts.BuildTimestamp = time.Now().UTC().Format(time.RFC3339Nano)
	}
	b := &builder{opts: opts, log: opts.Log, steps: map[string]string{}}
	return b.run()
}

type builder struct {
	opts    Options
	log     *slog.Logger
	cfg     *instance.Config
	cfgPath string
	// buildDirs finds a package's gok build directory in an instance
	// directory (nil: build everything in srcDir).
	buildDirs func(pkg string) string
	srcDir    string // module root the packages are built in
	binDir    string
	steps     map[string]string
}

func (b *builder) step(name string, f func() error) error {
	start := time.Now()
	b.log.Info("build: " + name + " …")
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	d := time.Since(start).Round(time.Millisecond)
	b.steps[name] = d.String()
	b.log.Info("build: "+name+" done", "took", d)
	return nil
}

func (b *builder) run() (*Manifest, error) {
	start := time.Now()
	cfgPath, err := instance.ConfigFile(b.opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	cfg, err := instance.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	b.cfg, b.cfgPath = cfg, cfgPath
	b.buildDirs = instance.BuildDirs(filepath.Dir(cfgPath))
	src := b.opts.SourceDir
	if src == "" {
		src = filepath.Dir(cfgPath)
	}
	b.srcDir, err = filepath.Abs(src)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	b.binDir = filepath.Join(b.opts.OutDir, "bin")
	if err := os.MkdirAll(b.binDir, 0o755); err != nil {
		return nil, err
	}
	password, err := b.password()
	if err != nil {
		return nil, err
	}
	m := &Manifest{
		BuildTimestamp: b.opts.BuildTimestamp,
		Hostname:       cfg.Hostname,
		HTTPPort:       cfg.HTTPPort(),
		DashboardPort:  dashboardPort(cfg),
		Password:       password,
		Boot:           filepath.Join(b.opts.OutDir, "boot.img"),
		Root:           filepath.Join(b.opts.OutDir, "root.img"),
		MBR:            filepath.Join(b.opts.OutDir, "mbr.img"),
		GAF:            filepath.Join(b.opts.OutDir, "e1kbox.gaf"),
		Steps:          b.steps,
	}
	if err := b.pieces(m, password); err != nil {
		return nil, err
	}
	b.steps["total"] = time.Since(start).Round(time.Millisecond).String()
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(b.opts.OutDir, "manifest.json"), append(mb, '\n'), secretMode); err != nil {
		return nil, err
	}
	b.log.Info("build: finished", "build_timestamp", m.BuildTimestamp, "took", b.steps["total"], "image", m.Image)
	return m, nil
}

// pieces builds the programs, the root and boot file systems, the MBR, the
// .gaf and (unless NoDiskImage) the disk image, and fills m's paths.
func (b *builder) pieces(m *Manifest, password string) error {
	var err error
	var kernelDir, loaderPath string
	if err := b.step("resolve kernel and boot loaders", func() error {
		kernelDir, loaderPath, err = b.resolveInputs()
		return err
	}); err != nil {
		return err
	}
	if err := b.step("go build", b.goBuild); err != nil {
		return err
	}
	var rootImg, sbom []byte
	if err := b.step("root file system (squashfs)", func() error {
		rootImg, sbom, m.SBOMHash, err = b.rootFS(kernelDir, password)
		if err == nil && len(rootImg) > image.RootSectors*image.SectorSize {
			err = fmt.Errorf("root file system is %d MiB, more than the 500 MiB root partition", len(rootImg)>>20)
		}
		if err == nil {
			err = writeFileAtomic(m.Root, rootImg, secretMode) // it holds /etc/gokr-pw.txt
		}
		return err
	}); err != nil {
		return err
	}
	var bootImg, mbr []byte
	if err := b.step("boot file system (FAT16) and MBR", func() error {
		bootImg, mbr, err = b.bootFS(kernelDir, loaderPath)
		if err == nil {
			err = writeFileAtomic(m.Boot, bootImg, 0o644)
		}
		if err == nil {
			err = writeFileAtomic(m.MBR, mbr, 0o644)
		}
		return err
	}); err != nil {
		return err
	}
	if err := b.step("update archive (.gaf)", func() error {
		return b.writeGAF(m, map[string][]byte{gaf.Boot: bootImg, gaf.Root: rootImg, gaf.MBR: mbr, gaf.SBOM: sbom})
	}); err != nil {
		return err
	}
	if !b.opts.NoDiskImage {
		m.Image = filepath.Join(b.opts.OutDir, "e1kbox.img")
		if err := b.step("disk image", func() error {
			if err := WriteDisk(m.Image, b.opts.DiskBytes, image.HostID(b.cfg.Hostname), bootImg, rootImg, mbr, true); err != nil {
				return err
			}
			return os.Chmod(m.Image, secretMode) // its root holds the password
		}); err != nil {
			return err
		}
	}
	return nil
}

func dashboardPort(cfg *instance.Config) string {
	pc := cfg.ByBasename("appliance")
	for i, f := range pc.CommandLineFlags {
		for _, name := range []string{"-listen=", "--listen="} {
			if v, ok := strings.CutPrefix(f, name); ok {
				return v[strings.LastIndexByte(v, ':')+1:]
			}
		}
		if (f == "-listen" || f == "--listen") && i+1 < len(pc.CommandLineFlags) {
			v := pc.CommandLineFlags[i+1]
			return v[strings.LastIndexByte(v, ':')+1:]
		}
	}
	return "8080"
}

// password returns the gokrazy UI password: from config.json, else the one
// gok keeps for this host under ~/.config/gokrazy, else a new random one
// saved there (so every build for the host uses the same password).
func (b *builder) password() (string, error) {
	if u := b.cfg.Update; u != nil {
		if u.NoPassword {
			return "", nil
		}
		if u.HTTPPassword != "" {
			return u.HTTPPassword, nil
		}
	}
	cfgDir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the password file: %w", err)
	}
	hostFile := filepath.Join(cfgDir, "gokrazy", "hosts", b.cfg.Hostname, "http-password.txt")
	for _, p := range []string{hostFile, filepath.Join(cfgDir, "gokrazy", "http-password.txt")} {
		if pw, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(pw)) > 0 {
			return string(bytes.TrimSpace(pw)), nil
		}
	}
	pw := rand.Text()[:20]
	if err := os.MkdirAll(filepath.Dir(hostFile), 0o700); err != nil {
		return "", fmt.Errorf("saving the generated password: %w", err)
	}
	if err := os.WriteFile(hostFile, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("saving the generated password: %w", err)
	}
	b.log.Info("build: generated a gokrazy password", "saved_in", hostFile)
	return pw, nil
}

func (b *builder) resolveInputs() (kernelDir, loaderPath string, err error) {
	kpkg := *b.cfg.KernelPackage
	kernelDir, err = b.goList("-f", "{{.Dir}}", kpkg)
	if err != nil {
		return "", "", fmt.Errorf("KernelPackage %q: %w (is it in go.mod? `go get %s` and keep it in tools.go)", kpkg, err, kpkg)
	}
	if _, err := os.Stat(filepath.Join(kernelDir, "vmlinuz")); err != nil {
		return "", "", fmt.Errorf("KernelPackage %q has no vmlinuz: %w", kpkg, err)
	}
	internalDir, err := b.goList("-m", "-f", "{{.Dir}}", "github.com/gokrazy/internal")
	if err != nil || internalDir == "" {
		return "", "", fmt.Errorf("locating github.com/gokrazy/internal (for mbr/bootloader.img): %v", err)
	}
	loaderPath = filepath.Join(internalDir, "mbr", "bootloader.img")
	if _, err := os.Stat(loaderPath); err != nil {
		return "", "", fmt.Errorf("MBR boot loader: %w (run `go mod download github.com/gokrazy/internal`)", err)
	}
	if _, err := os.Stat(SystemdBootEFI); err != nil {
		return "", "", fmt.Errorf("UEFI boot loader: %w (install Debian's systemd-boot-efi: apt-get install systemd-boot-efi)", err)
	}
	return kernelDir, loaderPath, nil
}
