package boxupdate

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"e1kbox/internal/testenv"
)

func TestMountSource(t *testing.T) {
	const mounts = `/dev/root / squashfs ro,relatime 0 0
devtmpfs /dev devtmpfs rw,relatime 0 0
/dev/sda4 /perm ext4 rw,relatime 0 0
tmpfs /perm/tmp tmpfs rw 0 0
/dev/mmcblk0p4 /perm ext4 ro,relatime 0 0
`
	for _, tc := range []struct{ dir, want string }{
		{"/perm", "/dev/mmcblk0p4"}, // the last mount on a path is the one in use
		{"/", "/dev/root"},
		{"/perm/tmp", "tmpfs"},
		{"/nothing", ""},
	} {
		if got := mountSource(strings.NewReader(mounts), tc.dir); got != tc.want {
			t.Errorf("mountSource(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// TestSetDeviceReadOnly mounts an ext4 file system read-only from a loop
// device, as /perm is before a kexec, and makes the device read-only: a
// write to the device then fails, so ext4's error handling cannot write
// the superblock either.
func TestSetDeviceReadOnly(t *testing.T) {
	testenv.Require(t, "root", "losetup", "mkfs.ext4", "mount", "umount")
	dir := t.TempDir()
	img := filepath.Join(dir, "perm.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("mkfs.ext4", "-q", "-F", img)
	dev := run("losetup", "--find", "--show", img)
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	mnt := filepath.Join(dir, "perm")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	run("mount", "-o", "ro", dev, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })

	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	got := mountSource(f, mnt)
	f.Close()
	if got != dev {
		t.Fatalf("mountSource(%s) = %q, want %s", mnt, got, dev)
	}
	if err := setDeviceReadOnly(dev); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := unix.IoctlGetInt(int(r.Fd()), unix.BLKROGET)
	r.Close()
	if err != nil || ro != 1 {
		t.Errorf("BLKROGET after setDeviceReadOnly: %d, %v; want 1", ro, err)
	}
	if w, err := os.OpenFile(dev, os.O_WRONLY, 0); err == nil {
		_, werr := w.WriteAt(make([]byte, 4096), 0)
		if werr == nil {
			werr = w.Sync()
		}
		w.Close()
		if werr == nil {
			t.Error("a write of block 0 to the read-only device succeeded")
		}
	} else if !errors.Is(err, unix.EROFS) && !errors.Is(err, unix.EACCES) {
		t.Errorf("opening the read-only device for writing: %v", err)
	}
	if b, err := os.ReadFile(img); err != nil || b[1024+56] != 0x53 || b[1024+57] != 0xef {
		t.Errorf("the superblock's magic is gone (%v)", err)
	}
}
