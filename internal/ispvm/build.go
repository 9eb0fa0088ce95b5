package ispvm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Image is a built ISP VM: Debian's kernel and the base initramfs (the
// packages' programs, libraries and modules; a run appends its
// configuration).
type Image struct {
	Dir string // the cache entry holding the files below
	// Kernel is the uncompressed vmlinux out of Debian's vmlinuz: QEMU
	// boots its ELF through the PVH entry, skipping the firmware and the
	// bzImage's xz decompression (~8 s under TCG).
	Kernel string
	Initrd string // the base initramfs (newc cpio, uncompressed: TCG unpacks it fast)
	// BigSHA256 is the hex SHA-256 of the upstream web server's /big file
	// (BigSize bytes of pseudo-random data).
	BigSHA256 string
	Packages  []string // the .deb files the image is built from
}

// BigSize is the size of the file the upstream web server serves as /big.
const BigSize = 10 << 20

// layout versions the base initramfs's layout: bump it when the build
// changes, so a cache entry of an older build is not reused.
const layout = "9"

// vmPackages are the Debian packages of the VM besides the kernel.
// dibbler-server delegates prefixes from a pool (pd-pool) on any
// interface, ppp0 included, and needs only libstdc++: isc-dhcp-server's
// dhcpd -6 refuses ppp0 ("Unsupported device type 512"),
// wide-dhcpv6-server delegates only per client DUID, kea needs boost and
// log4cplus, dnsmasq cannot delegate. dnsmasq-base is the upstream DNS
// server IPCP names (Debian's busybox-static has no dnsd applet).
var vmPackages = []string{"busybox-static", "ppp", "pppoe", "dibbler-server", "dibbler-client", "dnsmasq-base",
	"iperf3", "libiperf0", "libsctp1"}

// vmPrograms are the programs the initramfs holds besides busybox.
var vmPrograms = []string{"usr/sbin/pppd", "usr/sbin/pppoe", "usr/sbin/pppoe-server", "usr/sbin/dibbler-server", "usr/sbin/dibbler-client",
	"usr/lib/pppd/2.4.9/rp-pppoe.so", "usr/sbin/dnsmasq", "usr/bin/iperf3"}

// vmModules are the kernel modules the VM loads (with their dependencies).
var vmModules = []string{"e1000", "8021q", "ppp_async", "pppoe"}

var (
	buildMu sync.Mutex
	built   = map[string]*Image{}
)

// Build builds the image under cacheDir, or returns the one already there
// for the same package versions (the entry's name hashes apt's download
// URIs and checksums). Within a process, Build runs once per cacheDir.
// It needs root and apt-get with current package lists; when apt or the
// build fails, an image of this layout already in cacheDir serves, with a
// warning.
func Build(cacheDir string) (*Image, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if img, ok := built[cacheDir]; ok {
		return img, nil
	}
	img, err := build(cacheDir)
	if err != nil {
		cached, cerr := cachedImage(cacheDir)
		if cerr != nil {
			return nil, err
		}
		slog.Warn("ispvm: using the cached image: cannot check the packages' versions", "image", cached.Dir, "err", err)
		img = cached
	}
	built[cacheDir] = img
	return img, nil
}

// cachedImage returns the image in cacheDir of this layout (apt failed:
// no package lists, say).
func cachedImage(cacheDir string) (*Image, error) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "ispvm-*"))
	for _, dir := range dirs {
		l, err := os.ReadFile(filepath.Join(dir, "layout"))
		if err != nil || strings.TrimSpace(string(l)) != layout {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "big.sha256"))
		if err != nil {
			continue
		}
		return &Image{Dir: dir, Kernel: filepath.Join(dir, "vmlinux"), Initrd: filepath.Join(dir, "base.cpio"),
			BigSHA256: strings.TrimSpace(string(b))}, nil
	}
	return nil, fmt.Errorf("ispvm: no image of layout %s in %s", layout, cacheDir)
}

// DefaultCacheDir is where tests keep the image across runs: the user's
// cache directory, else the temporary directory.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "e1kbox-ispvm")
	}
	return filepath.Join(os.TempDir(), "e1kbox-ispvm")
}

var kernelDep = regexp.MustCompile(`Depends: (linux-image-6\.1\.0-[0-9]+-amd64)\b`)

// kernelPackage names bookworm's current linux-image-6.1.0-*-amd64.
func kernelPackage() (string, error) {
	out, err := exec.Command("apt-cache", "depends", "linux-image-amd64").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ispvm: apt-cache depends linux-image-amd64: %v: %s", err, out)
	}
	m := kernelDep.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("ispvm: linux-image-amd64 depends on no linux-image-6.1.0-*-amd64 (a bookworm apt source?): %s", out)
	}
	return string(m[1]), nil
}

func run(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ispvm: %s %s: %v: %s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func build(cacheDir string) (*Image, error) {
	kernel, err := kernelPackage()
	if err != nil {
		return nil, err
	}
	pkgs := append([]string{kernel}, vmPackages...)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("ispvm: cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return nil, fmt.Errorf("ispvm: cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755) // apt-get download as _apt, where it can
	// In an empty directory --print-uris lists every package: the key.
	uris, err := run(tmp, "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(uris, "\n") {
		if strings.HasPrefix(l, "'") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(pkgs) {
		return nil, fmt.Errorf("ispvm: apt-get download --print-uris listed %d of %d packages: %s", len(lines), len(pkgs), uris)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(layout + "\n" + strings.Join(lines, "\n")))
	dir := filepath.Join(cacheDir, "ispvm-"+hex.EncodeToString(sum[:8]))
	img := &Image{Dir: dir, Kernel: filepath.Join(dir, "vmlinux"), Initrd: filepath.Join(dir, "base.cpio")}
	if b, err := os.ReadFile(filepath.Join(dir, "big.sha256")); err == nil {
		now := time.Now()
		os.Chtimes(dir, now, now) // in use: not pruned for a day
		pruneCache(cacheDir, dir)
		img.BigSHA256 = strings.TrimSpace(string(b))
		img.Packages = debNames(lines)
		return img, nil
	}
	if _, err := run(tmp, "apt-get", append([]string{"download", "-q"}, pkgs...)...); err != nil {
		return nil, err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != len(pkgs) {
		return nil, fmt.Errorf("ispvm: apt-get download gave %d .deb files for %d packages", len(debs), len(pkgs))
	}
	root := filepath.Join(tmp, "root")
	for _, d := range debs {
		if _, err := run(tmp, "dpkg-deb", "-x", d, root); err != nil {
			return nil, err
		}
		img.Packages = append(img.Packages, filepath.Base(d))
	}
	out := filepath.Join(tmp, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return nil, fmt.Errorf("ispvm: %w", err)
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(vmlinuz) != 1 {
		return nil, fmt.Errorf("ispvm: %s holds %d vmlinuz", kernel, len(vmlinuz))
	}
	if err := extractVmlinux(vmlinuz[0], filepath.Join(out, "vmlinux")); err != nil {
		return nil, err
	}
	bigSum, err := writeBase(filepath.Join(out, "base.cpio"), root)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "layout"), []byte(layout+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("ispvm: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "big.sha256"), []byte(bigSum+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("ispvm: %w", err)
	}
	if err := os.Rename(out, dir); err != nil && !os.IsExist(err) {
		// Another process may have built the same entry first: use it.
		if _, serr := os.Stat(filepath.Join(dir, "big.sha256")); serr != nil {
			return nil, fmt.Errorf("ispvm: storing the image: %w", err)
		}
	}
	img.BigSHA256 = bigSum
	pruneCache(cacheDir, dir)
	return img, nil
}

// pruneCache removes the cache's other images (other package versions
// or layouts) and builds left behind, once unused for a day: another
// process, of another checkout say, may be using them now.
func pruneCache(cacheDir, keep string) {
	entries, _ := os.ReadDir(cacheDir)
	for _, e := range entries {
		p := filepath.Join(cacheDir, e.Name())
		info, err := e.Info()
		if err != nil || p == keep || time.Since(info.ModTime()) < 24*time.Hour {
			continue
		}
		if strings.HasPrefix(e.Name(), "ispvm-") || strings.HasPrefix(e.Name(), "build-") {
			os.RemoveAll(p)
		}
	}
}

// debNames are the .deb file names in apt-get's --print-uris lines.
func debNames(lines []string) []string {
	var names []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 2 {
			names = append(names, f[1])
		}
	}
	return names
}

// extractVmlinux writes the ELF kernel inside a bzImage: its payload
// (located by the setup header's payload_offset) is an xz stream, which
// the kernel follows with its size, hence xz --single-stream.
func extractVmlinux(bzImage, to string) error {
	b, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("ispvm: %w", err)
	}
	payload, err := bzPayload(b)
	if err != nil {
		return fmt.Errorf("ispvm: %s: %w", bzImage, err)
	}
	f, err := os.Create(to)
	if err != nil {
		return fmt.Errorf("ispvm: %w", err)
	}
	defer f.Close()
	cmd := exec.Command("xz", "-dc", "--single-stream")
	cmd.Stdin, cmd.Stdout = bytes.NewReader(payload), f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ispvm: decompressing %s: %v: %s", bzImage, err, stderr.String())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ispvm: %w", err)
	}
	return nil
}

// bzPayload returns a bzImage's compressed kernel (from its payload
// offset to the end of the file) if it is xz.
func bzPayload(b []byte) ([]byte, error) {
	if len(b) < 0x250 || string(b[0x202:0x206]) != "HdrS" {
		return nil, fmt.Errorf("not a bzImage")
	}
	setup := int(b[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off := (setup+1)*512 + int(binary.LittleEndian.Uint32(b[0x248:]))
	if off < 0 || off+6 > len(b) || string(b[off:off+6]) != "\xfd7zXZ\x00" {
		return nil, fmt.Errorf("the payload is not xz")
	}
	return b[off:], nil
}

// bigData is the upstream web server's /big: the same bytes every build.
func bigData() []byte {
	b := make([]byte, BigSize)
	r := rand.NewChaCha8([32]byte{'e', '1', 'k', 'b', 'o', 'x'})
	r.Read(b)
	return b
}

// writeBase writes the base initramfs from the extracted packages under
// root (libraries the packages lack come from the host, a Debian
// bookworm like the VM) and returns the hex SHA-256 of /www/big.
func writeBase(path, root string) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("ispvm: %w", err)
	}
	defer f.Close()
	c := newCPIO(f)
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "lib", "lib/x86_64-linux-gnu", "lib64",
		"lib/modules", "etc", "etc/ppp", "etc/dhcp", "etc/ispvm", "dev", "proc", "sys", "run", "tmp", "var",
		"var/lib", "var/lib/dhcp", "www", "root", "usr/lib", "usr/lib/pppd", "usr/lib/pppd/2.4.9", "etc/dibbler", "var/lib/dibbler", "var/log", "var/log/dibbler"} {
		c.Dir(d, 0o755)
	}
	c.Symlink("var/run", "/run")
	c.CharDev("dev/console", 0o600, 5, 1)
	// dnsmasq looks its user (root: it keeps its privileges) up.
	c.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	c.File("etc/group", 0o644, []byte("root:x:0:\n"))
	c.Symlink("init", "/bin/busybox") // busybox init, reading /etc/inittab
	add := func(name, from string, perm os.FileMode) error {
		b, err := os.ReadFile(from)
		if err != nil {
			return fmt.Errorf("ispvm: %w", err)
		}
		c.File(name, perm, b)
		return nil
	}
	if err := add("bin/busybox", filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return "", err
	}
	var bins []string
	for _, p := range vmPrograms {
		bins = append(bins, filepath.Join(root, p))
		if err := add(p, filepath.Join(root, p), 0o755); err != nil {
			return "", err
		}
	}
	libs, interps, err := libClosure(bins, []string{root, "/"})
	if err != nil {
		return "", err
	}
	for _, n := range sortedKeys(libs) {
		if err := add("lib/x86_64-linux-gnu/"+n, libs[n], 0o755); err != nil {
			return "", err
		}
	}
	for in := range interps {
		if err := add(strings.TrimPrefix(in, "/"), in, 0o755); err != nil {
			return "", err
		}
	}
	mods, _ := filepath.Glob(filepath.Join(root, "lib/modules/*"))
	if len(mods) != 1 {
		return "", fmt.Errorf("ispvm: the kernel package holds %d module trees", len(mods))
	}
	idx, err := moduleIndex(mods[0])
	if err != nil {
		return "", err
	}
	order, err := loadOrder(vmModules, func(m string) ([]string, error) {
		p, ok := idx[m]
		if !ok {
			return nil, fmt.Errorf("ispvm: no module %s in %s", m, mods[0])
		}
		return moduleDepends(p)
	})
	if err != nil {
		return "", err
	}
	for _, m := range order {
		if err := add("lib/modules/"+m+".ko", idx[m], 0o644); err != nil {
			return "", err
		}
	}
	c.File("etc/ispvm/modules", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	big := bigData()
	c.File("www/big", 0o644, big)
	if err := c.Close(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("ispvm: %w", err)
	}
	sum := sha256.Sum256(big)
	return hex.EncodeToString(sum[:]), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
