package fat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLinuxVFAT checks that Linux's vfat driver reads every file under its
// long name. It loop-mounts the image when the host kernel has vfat and the
// test runs as root; otherwise it boots gokrazy's amd64 kernel (the one that
// will read the partition on the box) in QEMU with a tiny init that mounts
// the image and prints the same listing.
func TestLinuxVFAT(t *testing.T) {
	files := append(bootFiles(), bigDir()...)
	_, img := build(t, bootSectors, files)
	p := writeImage(t, img)
	var got map[string]string
	if fsTypes, _ := os.ReadFile("/proc/filesystems"); os.Geteuid() == 0 && bytes.Contains(fsTypes, []byte("\tvfat\n")) {
		got = loopListing(t, p)
	} else {
		got = qemuListing(t, p)
	}
	if diff := cmp.Diff(tree(files), got); diff != "" {
		t.Errorf("files read by Linux vfat (-want +got):\n%s", diff)
	}
}

func loopListing(t *testing.T, img string) map[string]string {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop,ro", "-t", "vfat", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	}()
	got := map[string]string{}
	err := filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == mnt {
			return err
		}
		rel := strings.TrimPrefix(p, mnt)
		if d.IsDir() {
			got[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		got[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// vfatInit is PID 1 in the QEMU guest: it mounts the virtio disk as vfat,
// prints one VFAT-ENTRY line per file and directory, and powers off.
const vfatInit = `package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("VFAT-ERROR", err)
	}
	syscall.Sync()
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	os.Mkdir("/dev", 0o755)
	os.Mkdir("/mnt", 0o755)
	if err := syscall.Mount("devtmpfs", "/dev", "devtmpfs", 0, ""); err != nil {
		return err
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = syscall.Mount("/dev/vda", "/mnt", "vfat", syscall.MS_RDONLY, ""); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("mount /dev/vda: %w", err)
	}
	return filepath.WalkDir("/mnt", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "/mnt" {
			return err
		}
		rel := strings.TrimPrefix(p, "/mnt")
		if d.IsDir() {
			fmt.Println("VFAT-ENTRY", rel, "dir")
			return nil
		}
		b, err := os.ReadFile(p)
		fmt.Printf("VFAT-ENTRY %s %x\n", rel, sha256.Sum256(b))
		return err
	})
}
`

func qemuListing(t *testing.T, img string) map[string]string {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		missing(t, "no vfat loop mount (needs root and vfat in the host kernel) and no QEMU: %v", err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gokrazy/kernel.amd64").Output()
	kernel := filepath.Join(strings.TrimSpace(string(out)), "vmlinuz")
	if _, statErr := os.Stat(kernel); err != nil || statErr != nil {
		missing(t, "gokrazy kernel for the QEMU vfat check: %v %v", err, statErr)
	}

	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"go.mod": "module vfatinit\n\ngo 1.22\n", "main.go": vfatInit} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "init"), ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guest init: %v\n%s", err, out)
	}
	initBin, err := os.ReadFile(filepath.Join(dir, "init"))
	if err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, newcArchive(map[string][]byte{"init": initBin}), 0o644); err != nil {
		t.Fatal(err)
	}

	// The boot takes about 40 s under TCG on a busy 2-core machine; the
	// limit leaves room for a CI run with other packages beside it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// TCG, not KVM: nested KVM (as on the CI host) fails with "emulation
	// failure" in the kernel's decompressor. no_timer_check: on a loaded
	// host TCG's timer can miss the kernel's IO-APIC check, which then
	// panics ("IO-APIC + timer doesn't work!").
	accel := []string{"-accel", "tcg", "-cpu", "max"}
	cmd := exec.CommandContext(ctx, qemu, append(accel, "-m", "256", "-nodefaults", "-display", "none", "-no-reboot",
		"-serial", "stdio", "-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=1 panic=-1 no_timer_check",
		"-drive", "file="+img+",format=raw,if=virtio,readonly=on")...)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("qemu: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "VFAT-ERROR"); i >= 0 {
			t.Fatalf("guest: %s", l[i:])
		}
		if i := strings.Index(l, "VFAT-ENTRY "); i >= 0 {
			f := strings.Fields(l[i:])
			if len(f) != 3 {
				t.Fatalf("bad guest line %q", l)
			}
			got[f[1]] = f[2]
		}
	}
	if len(got) == 0 {
		t.Fatalf("guest printed no listing:\n%s", out)
	}
	return got
}

// newcArchive returns a cpio archive in the "newc" format the kernel unpacks
// as initramfs, holding executable files.
func newcArchive(files map[string][]byte) []byte {
	var b bytes.Buffer
	pad := func() {
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	add := func(ino int, name string, mode int, data []byte) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		b.WriteString(name + "\x00")
		pad()
		b.Write(data)
		pad()
	}
	ino := 1
	for name, data := range files {
		add(ino, name, 0o100755, data)
		ino++
	}
	add(0, "TRAILER!!!", 0, nil)
	return b.Bytes()
}
