// Command mkkernel builds e1kbox's kernel package (firmware/kernel) from
// Debian's linux-source-6.12, the way gokrazy builds kernel.amd64.
//
// It unpacks /usr/src/linux-source-6.12.tar.xz (apt-get install
// linux-source-6.12=VERSION) into a fixed work directory, runs `make
// defconfig`, `make mod2noconfig`, appends config.addendum.txt, runs `make
// olddefconfig` and `make bzImage` with a fixed build user, host and
// timestamp (the source's changelog date, so a second build gives the same bytes), checks the result
// against the options e1kbox requires, and writes vmlinuz, config and
// SOURCE into the package. `make kernel` runs it.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"e1kbox/firmware/kernel"
)

func main() {
	if err := run(); err != nil {
		slog.Error("mkkernel", "err", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		pkg     = flag.String("pkg", "firmware/kernel", "the kernel package's directory (written)")
		tarball = flag.String("src", "/usr/src/linux-source-6.12.tar.xz", "Debian's kernel source tarball")
		srcPkg  = flag.String("deb", "linux-source-6.12", "the Debian package that installed -src (its version is recorded)")
		work    = flag.String("work", "/var/tmp/e1kbox-kernel", "the build directory (a fixed path: the build is reproducible for one path)")
		jobs    = flag.Int("j", runtime.NumCPU(), "make's parallel jobs")
		reuse   = flag.Bool("reuse", false, "build in the source already unpacked in -work (make rebuilds only what the config changes): for trying addendum changes; a build to commit starts fresh")
	)
	flag.Parse()
	version, err := debVersion(*srcPkg)
	if err != nil {
		return err
	}
	date, err := changelogDate(*srcPkg)
	if err != nil {
		return err
	}
	addendum, err := os.ReadFile(filepath.Join(*pkg, "config.addendum.txt"))
	if err != nil {
		return err
	}
	b := &build{work: *work, jobs: *jobs, version: version, date: date}
	if err := b.unpack(*tarball, *reuse); err != nil {
		return err
	}
	if err := b.configure(addendum); err != nil {
		return err
	}
	config, err := os.ReadFile(filepath.Join(b.src, ".config"))
	if err != nil {
		return err
	}
	if missing := kernel.Missing(config); len(missing) > 0 {
		return fmt.Errorf("after make olddefconfig the config lacks what e1kbox requires (a dependency the addendum does not satisfy?): %s", strings.Join(missing, ", "))
	}
	if err := b.make("bzImage"); err != nil {
		return err
	}
	image, err := os.ReadFile(filepath.Join(b.src, "arch/x86/boot/bzImage"))
	if err != nil {
		return err
	}
	source := fmt.Sprintf("%s %s\n", *srcPkg, version)
	for name, data := range map[string][]byte{"vmlinuz": image, "config": config, "SOURCE": []byte(source)} {
		if err := os.WriteFile(filepath.Join(*pkg, name), data, 0o644); err != nil {
			return err
		}
	}
	slog.Info("mkkernel: done", "source", strings.TrimSpace(source), "vmlinuz_bytes", len(image), "pkg", *pkg)
	return nil
}

// debVersion is the installed version of Debian package name.
func debVersion(name string) (string, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", name).Output()
	if err != nil || len(out) == 0 {
		return "", fmt.Errorf("%s is not installed (apt-get install %s; its suite is trixie-security): %v", name, name, err)
	}
	return string(out), nil
}

// changelogDate is the date of the newest entry of Debian package name's
// changelog (its " -- maintainer  date" line).
func changelogDate(name string) (time.Time, error) {
	p := "/usr/share/doc/" + name + "/changelog.Debian.gz"
	f, err := os.Open(p)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", p, err)
	}
	t, err := parseChangelogDate(z)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", p, err)
	}
	return t, nil
}

// parseChangelogDate is the date of a Debian changelog's first entry.
func parseChangelogDate(r io.Reader) (time.Time, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, " -- ") {
			if _, date, ok := strings.Cut(line, ">  "); ok {
				return time.Parse(time.RFC1123Z, date)
			}
		}
	}
	return time.Time{}, errors.New("no dated entry")
}

// build is one kernel build in work.
type build struct {
	work, src string
	jobs      int
	version   string    // the Debian source package's version
	date      time.Time // its changelog's date: the build's only time
}

// unpack extracts tarball into a fresh b.work and sets b.src; with reuse,
// it takes the source already there.
func (b *build) unpack(tarball string, reuse bool) error {
	if reuse {
		if dirs, _ := filepath.Glob(filepath.Join(b.work, "linux-source-*")); len(dirs) == 1 {
			b.src = dirs[0]
			slog.Info("mkkernel: reusing the unpacked source", "dir", b.src)
			return nil
		}
	}
	if err := os.RemoveAll(b.work); err != nil {
		return err
	}
	if err := os.MkdirAll(b.work, 0o755); err != nil {
		return err
	}
	slog.Info("mkkernel: unpacking", "src", tarball, "into", b.work)
	if err := b.cmd(b.work, "tar", "xf", tarball); err != nil {
		return err
	}
	dirs, err := filepath.Glob(filepath.Join(b.work, "linux-source-*"))
	if err != nil || len(dirs) != 1 {
		return fmt.Errorf("unpacking %s: want one linux-source-* directory, found %v (%v)", tarball, dirs, err)
	}
	b.src = dirs[0]
	return nil
}

// configure makes .config as gokrazy does: defconfig, mod2noconfig, the
// addendum, olddefconfig.
func (b *build) configure(addendum []byte) error {
	if err := errors.Join(b.make("defconfig"), b.make("mod2noconfig")); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(b.src, ".config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(append([]byte("\n"), addendum...))
	if err := errors.Join(err, f.Close()); err != nil {
		return err
	}
	return b.make("olddefconfig")
}

// make runs make target in the source with the reproducible build's
// environment.
func (b *build) make(target string) error {
	return b.cmd(b.src, "make", "-j"+strconv.Itoa(b.jobs), target)
}

func (b *build) cmd(dir, name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Dir = dir
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = os.Stdout, &stderr
	c.Env = append(os.Environ(),
		"KBUILD_BUILD_USER=e1kbox",
		"KBUILD_BUILD_HOST=e1kbox",
		// Every time stamp in the build (the built-in initramfs's files,
		// which take it only if it parses as a date) is the source's
		// changelog date; uname -v names the source as Debian's kernels do
		// (KBUILD_BUILD_VERSION_TIMESTAMP is Debian's).
		"KBUILD_BUILD_TIMESTAMP="+b.date.UTC().Format(time.RFC1123Z),
		"KBUILD_BUILD_VERSION_TIMESTAMP=Debian "+b.version+" ("+b.date.UTC().Format(time.DateOnly)+")",
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(b.date.Unix(), 10),
		"KBUILD_BUILD_VERSION=1",
		"LC_ALL=C",
		"TZ=UTC",
	)
	if err := c.Run(); err != nil {
		tail := stderr.Bytes()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail)
	}
	return nil
}
