// Package build turns a gokrazy instance config into a bootable e1kbox image.
package build

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"e1kbox/firmware/bootpart"
	"e1kbox/firmware/gaf"
	"e1kbox/firmware/image"
	"e1kbox/firmware/instance"
	"e1kbox/firmware/squashfs"
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

func (b *builder) goList(args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = b.srcDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list: %s", strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

type buildGroup struct {
	dir              string
	env, flags, tags []string
	pkgs             []string
}

// goBuild compiles every package for linux/amd64 without cgo, one `go
// build` per build directory and distinct set of per-package build
// settings, and then the generated init.
func (b *builder) goBuild() error {
	groups := map[string]*buildGroup{}
	var order []string
	for _, pkg := range b.cfg.AllPackages() {
		pc := b.cfg.PackageConfig[pkg]
		dir := b.srcDir
		if b.buildDirs != nil {
			if d := b.buildDirs(pkg); d != "" {
				dir = d
			}
		}
		key := dir + "\x01" + strings.Join(pc.GoBuildEnvironment, "\x00") + "\x01" + strings.Join(pc.GoBuildFlags, "\x00") + "\x01" + strings.Join(pc.GoBuildTags, "\x00")
		g, ok := groups[key]
		if !ok {
			g = &buildGroup{dir: dir, env: pc.GoBuildEnvironment, flags: pc.GoBuildFlags, tags: pc.GoBuildTags}
			groups[key] = g
			order = append(order, key)
		}
		g.pkgs = append(g.pkgs, pkg)
	}
	for _, key := range order {
		if err := b.buildGroup(groups[key]); err != nil {
			return err
		}
	}
	return b.buildInit(b.programPaths())
}

// programPaths lists the supervised programs' paths in the image, sorted.
func (b *builder) programPaths() []string {
	var paths []string
	for _, p := range b.cfg.AllPackages() {
		dir := "/user/"
		if b.cfg.IsGokrazyPkg(p) {
			dir = "/gokrazy/"
		}
		paths = append(paths, dir+b.cfg.Basename(p))
	}
	sort.Strings(paths)
	return paths
}

func (b *builder) buildGroup(g *buildGroup) error {
	outDir, err := os.MkdirTemp(b.opts.OutDir, "gobuild-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(outDir)
	abs, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	if err := b.goBuildTo(g.dir, g.env, g.flags, g.tags, abs+"/", g.pkgs...); err != nil {
		return err
	}
	for _, p := range g.pkgs {
		// go build -o dir/ names each binary after the last element of the
		// import path (without a /vN suffix).
		name := goBinaryName(p)
		dst := filepath.Join(b.binDir, b.cfg.Basename(p))
		if err := os.Rename(filepath.Join(outDir, name), dst); err != nil {
			return fmt.Errorf("package %s did not produce a program (is it package main?): %w", p, err)
		}
	}
	return nil
}

// goBuildTo runs go build in dir as gok does (tags gokrazy, netgo,
// osusergo; no -ldflags: programs learn their build from gokrazy), with
// -trimpath so that builds do not depend on where the sources are.
func (b *builder) goBuildTo(dir string, env, flags, tags []string, out string, pkgs ...string) error {
	tags = append([]string{"gokrazy", "netgo", "osusergo"}, tags...)
	args := []string{"build", "-trimpath", "-o", out, "-tags", strings.Join(tags, ",")}
	args = append(args, flags...)
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	for _, e := range b.cfg.Environment {
		if !strings.HasPrefix(e, "GOOS=") && !strings.HasPrefix(e, "GOARCH=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var failed []string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if p, ok := strings.CutPrefix(line, "# "); ok {
				failed = append(failed, p)
			}
		}
		if len(failed) == 0 {
			failed = pkgs
		}
		return fmt.Errorf("package %s does not build:\n%s", strings.Join(failed, ", "), strings.TrimSpace(stderr.String()))
	}
	return nil
}

func goBinaryName(pkg string) string {
	return (&instance.Config{}).Basename(pkg)
}

// Cmdline returns the kernel command line for root partition rootPart as it
// is stored in cmdline.txt: the arguments, a newline (so gokrazy's
// /update/testboot can append its flag), then 64 spaces of room for in-place
// rewrites.
func Cmdline(cfg *instance.Config, kernelCmdline string, rootPart int) (string, error) {
	var args []string
	args = append(args, "console=tty1")
	if c := cfg.SerialConsoleArg(); c != "" {
		args = append(args, "console="+c)
	}
	for _, a := range strings.Fields(kernelCmdline) {
		switch {
		case strings.HasPrefix(a, "root="):
			a = "root=" + image.RootCmdline(image.HostID(cfg.Hostname), rootPart)
		case strings.HasPrefix(a, "rootdelay="):
			a = "rootwait"
		}
		args = append(args, a)
	}
	args = append(args, cfg.KernelExtraArgs...)
	s := strings.Join(args, " ") + "\n" + strings.Repeat(" ", 64)
	// The MBR boot loader reads one sector; gokrazy's testboot grows the
	// line by 28 bytes and needs a NUL after it.
	if len(s)+28 >= image.SectorSize {
		return "", fmt.Errorf("kernel command line is %d bytes; with padding it must stay under %d (shorten KernelExtraArgs)", len(s), image.SectorSize-28)
	}
	return s, nil
}

func (b *builder) bootFS(kernelDir, loaderPath string) (bootImg, mbr []byte, err error) {
	kcmd, err := os.ReadFile(filepath.Join(kernelDir, "cmdline.txt"))
	if err != nil {
		kcmd = []byte("root=/dev/sda2 ro init=/gokrazy/init panic=10 oops=panic rootwait pci=nommconf")
	}
	cmdline, err := Cmdline(b.cfg, string(kcmd), 2)
	if err != nil {
		return nil, nil, err
	}
	vmlinuz, err := os.ReadFile(filepath.Join(kernelDir, "vmlinuz"))
	if err != nil {
		return nil, nil, err
	}
	efi, err := os.ReadFile(SystemdBootEFI)
	if err != nil {
		return nil, nil, err
	}
	loader, err := os.ReadFile(loaderPath)
	if err != nil {
		return nil, nil, err
	}
	// systemd-boot splits lines at \r as well as \n; the entry uses \r so
	// that the only \n is the one after the options, where gokrazy's
	// testboot appends its flag.
	entry := "title e1kbox\rlinux /vmlinuz\roptions " + cmdline
	// The low body of the boot partition, with fixed time stamps: the same
	// kernel and command line give the same bytes (bootpart).
	fs, err := bootpart.Build(bootpart.Low, bootpart.Files{
		"/vmlinuz":                     vmlinuz,
		"/cmdline.txt":                 []byte(cmdline),
		"/EFI/BOOT/BOOTX64.EFI":        efi,
		"/loader/entries/gokrazy.conf": []byte(entry),
	})
	if err != nil {
		return nil, nil, err
	}
	bootImg = make([]byte, fs.BodyOffset, fs.BodyOffset+int64(len(fs.Bytes)))
	copy(bootImg, fs.BootSector)
	bootImg = append(bootImg, fs.Bytes...)
	mbr, err = image.BootCode(loader, fs.VmlinuzLBA, fs.CmdlineLBA, image.HostID(b.cfg.Hostname))
	if err != nil {
		return nil, nil, err
	}
	return bootImg, mbr, nil
}

func buildTime(ts string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Now().UTC()
	}
	return t
}

func (b *builder) rootFS(kernelDir, password string) (img, sbom []byte, sbomHash string, _ error) {
	root := squashfs.New(buildTime(b.opts.BuildTimestamp))
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range []string{"/bin", "/dev", "/etc", "/proc", "/sys", "/tmp", "/perm", "/lib", "/run", "/mnt", "/gokrazy", "/user"} {
		check(root.Mkdir(d, 0o755))
	}
	check(root.AddSymlink("/var", "/perm/var"))
	check(root.AddSymlink("/etc/resolv.conf", "/tmp/resolv.conf"))
	check(root.AddFile("/etc/hostname", 0o644, []byte(b.cfg.Hostname)))
	check(root.AddFile("/etc/hosts", 0o644, []byte("127.0.0.1 localhost\n::1 localhost\n")))
	if password != "" {
		check(root.AddFile("/etc/gokr-pw.txt", 0o400, []byte(password)))
	}
	check(root.AddFile("/etc/http-port.txt", 0o644, []byte(b.cfg.HTTPPort())))
	httpsPort := b.cfg.HTTPPort()
	if b.cfg.Update != nil && b.cfg.Update.HTTPSPort != "" {
		httpsPort = b.cfg.Update.HTTPSPort
	}
	check(root.AddFile("/etc/https-port.txt", 0o644, []byte(httpsPort)))
	if tz, err := os.ReadFile("/etc/localtime"); err == nil {
		check(root.AddFile("/etc/localtime", 0o644, tz))
	}
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		check(root.AddFile("/etc/ssl/ca-bundle.pem", 0o644, ca))
	}
	md, _ := json.Marshal(b.cfg.MountDevices)
	if b.cfg.MountDevices == nil {
		md = []byte("null")
	}
	check(root.AddFile("/etc/gokrazy/mountdevices.json", 0o644, md))
	for _, m := range b.cfg.MountDevices {
		if strings.HasPrefix(m.Target, "/mnt/") && strings.Count(m.Target, "/") == 2 {
			check(root.Mkdir(m.Target, 0o755))
		}
	}

	sbom, sbomHash, err := b.addPrograms(root, check)
	if err != nil {
		return nil, nil, "", err
	}

	// Extra files from the package configs.
	for _, p := range sortedKeys(b.cfg.PackageConfig) {
		pc := b.cfg.PackageConfig[p]
		for _, dst := range sortedKeys(pc.ExtraFileContents) {
			check(root.AddFile(dst, 0o444, []byte(pc.ExtraFileContents[dst])))
		}
		for _, dst := range sortedKeys(pc.ExtraFilePaths) {
			src := pc.ExtraFilePaths[dst]
			if !filepath.IsAbs(src) {
				src = filepath.Join(b.srcDir, src)
			}
			check(addHostPath(root, dst, src))
		}
	}
	// Kernel modules.
	modDir := filepath.Join(kernelDir, "lib", "modules")
	if _, err := os.Stat(modDir); err == nil {
		check(addHostPath(root, "/lib/modules", modDir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, "", err
	}
	var buf bytes.Buffer
	if _, err := root.WriteTo(&buf); err != nil {
		return nil, nil, "", err
	}
	return buf.Bytes(), sbom, sbomHash, nil
}

// addPrograms adds the programs and the generated init, and gokrazy's SBOM
// of them.
func (b *builder) addPrograms(root *squashfs.FS, check func(error)) (sbom []byte, sbomHash string, _ error) {
	// Programs, the generated init and gokrazy's SBOM of them.
	bins := map[string]string{filepath.Join(b.binDir, "init"): "/gokrazy/init"}
	for _, p := range b.cfg.AllPackages() {
		base := b.cfg.Basename(p)
		dir := "/user/"
		if b.cfg.IsGokrazyPkg(p) {
			dir = "/gokrazy/"
		}
		bins[filepath.Join(b.binDir, base)] = dir + base
	}
	for _, src := range sortedKeys(bins) {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, "", err
		}
		check(root.AddFile(bins[src], 0o755, data))
	}
	sbom, sbomHash, err := b.sbom(bins)
	if err != nil {
		return nil, "", err
	}
	check(root.AddFile("/etc/gokrazy/sbom.json", 0o644, sbom))
	return sbom, sbomHash, nil

}

// addHostPath copies a host file or directory tree into the root file system.
func addHostPath(root *squashfs.FS, dst, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("extra file %s: %w", dst, err)
	}
	if !fi.IsDir() {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return root.AddFile(dst, fi.Mode().Perm(), data)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.ToSlash(filepath.Join(dst, rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return root.Mkdir(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return root.AddSymlink(target, t)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			// files in the module cache are read-only; keep the exec bit only
			return root.AddFile(target, 0o444|info.Mode().Perm()&0o111, data)
		}
		return nil
	})
}

// WriteDisk writes a full disk image of size bytes to path: partition
// tables, boot code, the boot and root A file systems and, if formatPerm,
// an ext4 /perm (made by e2fsprogs' mkfs.ext4).
func WriteDisk(path string, size int64, hostID uint32, boot, root, mbr []byte, formatPerm bool) error {
	layout, err := image.NewLayout(size, hostID)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := WriteParts(f, layout, boot, root, mbr); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if formatPerm {
		if err := FormatPerm(tmp, layout); err != nil {
			return err
		}
	}
	return os.Rename(tmp, path)
}

// WriteParts writes tables, boot code and file systems onto w (an image file
// or a block device of the layout's size).
func WriteParts(w io.WriterAt, layout image.Layout, boot, root, mbr []byte) error {
	if err := layout.WriteTables(w); err != nil {
		return err
	}
	if _, err := w.WriteAt(mbr, 0); err != nil {
		return fmt.Errorf("writing boot code: %w", err)
	}
	if _, err := w.WriteAt(boot, image.BootStart*image.SectorSize); err != nil {
		return fmt.Errorf("writing boot partition: %w", err)
	}
	if _, err := w.WriteAt(root, image.RootAStart*image.SectorSize); err != nil {
		return fmt.Errorf("writing root partition: %w", err)
	}
	// A zeroed superblock area on root B so that nothing stale is mounted.
	if _, err := w.WriteAt(make([]byte, 64<<10), image.RootBStart*image.SectorSize); err != nil {
		return fmt.Errorf("clearing root B: %w", err)
	}
	return nil
}

// FormatPerm creates an ext4 file system on the perm partition of the image
// or device at path.
func FormatPerm(path string, layout image.Layout) error {
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return fmt.Errorf("formatting /perm: mkfs.ext4 not found (apt-get install e2fsprogs): %w", err)
	}
	args := []string{"-q", "-F", "-L", "perm", "-E", fmt.Sprintf("offset=%d", layout.PermOffset()), path,
		fmt.Sprintf("%dk", layout.PermSectors*image.SectorSize/1024)}
	out, err := exec.Command(mkfs, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("formatting /perm: mkfs.ext4 %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// secretMode is the mode of the build outputs that hold the gokrazy
// password (manifest.json, root.img, the disk image): the build host's
// other users must not read it.
const secretMode = 0o600

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // the umask may have narrowed it; never wider
		return err
	}
	return os.Rename(tmp, path)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
