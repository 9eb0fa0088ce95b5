package flash

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/image"
	"e1kbox/internal/testenv"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, "root") // loop devices
}

// loopDevice attaches a sparse file of size bytes to a loop device that
// the kernel scans for partitions (like a USB stick).
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command("losetup", "--find", "--show", "--partscan", p).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

func TestCheckTargetRefusesRegularFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file.img")
	os.WriteFile(p, make([]byte, 1024), 0o644)
	if err := CheckTarget(p, "/proc/self/mountinfo"); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("CheckTarget(regular file) = %v, want 'not a block device'", err)
	}
}

func testManifest(t *testing.T) *build.Manifest {
	t.Helper()
	dir := t.TempDir()
	m := &build.Manifest{Hostname: "e1kbox", BuildTimestamp: "test",
		Boot: filepath.Join(dir, "boot.img"), Root: filepath.Join(dir, "root.img"), MBR: filepath.Join(dir, "mbr.img")}
	boot := make([]byte, 1<<20)
	copy(boot, "FAKEBOOT")
	root := make([]byte, 1<<20)
	copy(root, "hsqs")
	for p, b := range map[string][]byte{m.Boot: boot, m.Root: root, m.MBR: make([]byte, 446)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestFlash(t *testing.T) {
	requireRoot(t)
	m := testManifest(t)

	small := loopDevice(t, 512<<20)
	if err := Flash(small, m, true); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("Flash to a 512 MiB device: %v, want 'too small'", err)
	}

	const size = 3 << 30
	dev := loopDevice(t, size)
	if err := Flash(dev, m, false); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("Flash without --yes: %v, want a refusal naming --yes", err)
	}
	if err := Flash(dev, m, true); err != nil {
		t.Fatalf("Flash: %v", err)
	}
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := image.ReadGPTPartitions(f)
	if err != nil {
		t.Fatal(err)
	}
	// partitioned for the device's real size: perm runs to the end
	if len(parts) != 4 || parts[3].Last != size/image.SectorSize-1-34 {
		t.Errorf("partitions %+v: perm should end at %d", parts, size/image.SectorSize-1-34)
	}
	buf := make([]byte, 8)
	f.ReadAt(buf, image.BootStart*image.SectorSize)
	f.Close()
	if string(buf) != "FAKEBOOT" {
		t.Errorf("boot partition starts with %q", buf)
	}

	// The kernel sees the partitions; perm (p4) holds an ext4 file system.
	if out, err := exec.Command("partx", "--update", dev).CombinedOutput(); err != nil {
		t.Logf("partx --update: %v: %s", err, out)
	}
	perm := dev + "p4"
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(perm); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := exec.Command("dumpe2fs", "-h", perm).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Filesystem volume name:   perm") {
		t.Fatalf("dumpe2fs %s: %v\n%s", perm, err, out)
	}

	// With perm mounted, the whole device is refused.
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "ro", perm, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", perm, err, out)
	}
	defer exec.Command("umount", mnt).Run()
	if err := CheckTarget(dev, "/proc/self/mountinfo"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("CheckTarget(%s with p4 mounted) = %v, want 'in use'", dev, err)
	}
	if err := Flash(dev, m, true); err == nil {
		t.Error("Flash onto a device with a mounted partition succeeded")
	}
}
