package squashfs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mountImage loop-mounts img read-only with the kernel's squashfs driver and
// returns the mount point; it is unmounted when the test ends.
func mountImage(t *testing.T, img []byte) string {
	t.Helper()
	if os.Geteuid() != 0 {
		ciRequired(t, "loop-mounting needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		ciRequired(t, "no loop devices: %v", err)
	}
	if fsList, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(fsList, []byte("\tsquashfs\n")) {
		ciRequired(t, "kernel without squashfs support (%v)", err)
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-o", "loop,ro", "-t", "squashfs", writeTemp(t, img), mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	})
	return mnt
}

func TestLoopMount(t *testing.T) {
	f, want := build(t, testTime, rootfsItems())
	mnt := mountImage(t, writeImage(t, f))
	if diff := cmp.Diff(want, walkHost(t, mnt)); diff != "" {
		t.Errorf("mounted tree mismatch (-want +got):\n%s", diff)
	}
	// Look names up directly (not via readdir), which uses the directory
	// index of the large directory.
	for p, e := range want {
		fi, err := os.Lstat(filepath.Join(mnt, p))
		if err != nil {
			t.Errorf("lstat %s: %v", p, err)
			continue
		}
		if fi.Mode() != e.Mode {
			t.Errorf("lstat %s: mode %v, want %v", p, fi.Mode(), e.Mode)
		}
	}
	for _, missing := range []string{"/huge/aaa", "/huge/zzz", "/huge/long-name-0000", "/many/f300", "/etc/nope"} {
		if _, err := os.Lstat(filepath.Join(mnt, missing)); !os.IsNotExist(err) {
			t.Errorf("lstat %s: %v, want not-exist", missing, err)
		}
	}
}

// TestLoopMountManyInodes checks inode numbers far apart in one directory and
// a directory with more entries than one getdents call returns.
func TestLoopMountManyInodes(t *testing.T) {
	items := []item{
		{kind: "file", path: "/a/first", mode: 0o644, data: []byte("1")},
		{kind: "file", path: "/a/zlast", mode: 0o644, data: []byte("2")},
	}
	for i := range 40000 {
		items = append(items, item{kind: "file", path: fmt.Sprintf("/a/middle/%05d", i), mode: 0o644})
	}
	f, want := build(t, testTime, items)
	mnt := mountImage(t, writeImage(t, f))
	if diff := cmp.Diff(want, walkHost(t, mnt)); diff != "" {
		t.Errorf("mounted tree mismatch (-want +got):\n%s", diff)
	}
}
