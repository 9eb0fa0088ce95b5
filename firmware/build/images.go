package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"e1kbox/firmware/bootpart"
	"e1kbox/firmware/image"
	"e1kbox/firmware/instance"
	"e1kbox/firmware/squashfs"
	"e1kbox/firmware/watchdog"
)

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
	// Whichever kernel package: the watchdog runs through test boots.
	cmdline, err := Cmdline(b.cfg, watchdog.Append(string(kcmd)), 2)
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
	for _, p := range slices.Sorted(maps.Keys(b.cfg.PackageConfig)) {
		pc := b.cfg.PackageConfig[p]
		for _, dst := range slices.Sorted(maps.Keys(pc.ExtraFileContents)) {
			check(root.AddFile(dst, 0o444, []byte(pc.ExtraFileContents[dst])))
		}
		for _, dst := range slices.Sorted(maps.Keys(pc.ExtraFilePaths)) {
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
	for _, src := range slices.Sorted(maps.Keys(bins)) {
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
