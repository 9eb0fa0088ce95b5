package boxupdate

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// mountSource returns the device mounted at dir according to a
// /proc/self/mounts listing ("" when nothing is). The last entry wins, as
// the kernel's last mount on a path hides the earlier ones.
func mountSource(mounts io.Reader, dir string) string {
	src := ""
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[1] == dir {
			src = f[0]
		}
	}
	return src
}

// setDeviceReadOnly makes the block device dev read-only (BLKROSET): no
// write reaches it until the next boot, whoever asks.
func setDeviceReadOnly(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.BLKROSET, 1); err != nil {
		return fmt.Errorf("BLKROSET %s: %w", dev, err)
	}
	return nil
}

// freezePerm makes /perm's block device read-only before a kexec. The
// kernel shuts the disk down for the kexec while the appliance's other
// goroutines still run: a read of /perm then (the dashboard's update
// status reads the records directory) came back wrong, ext4 reported a
// directory block that failed its checksum, and its error handling wrote
// the superblock, which the mount being read-only does not prevent (only
// a read-only device does), to a disk going down: the next boot found
// the first 4 KiB of /perm zeroed and no file system (seen twice in CI's
// TestFailedUpdates/UEFI, console in the closing note of 2026-12-02).
func freezePerm() {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	dev := mountSource(f, "/perm")
	f.Close()
	if !strings.HasPrefix(dev, "/dev/") {
		return
	}
	if err := setDeviceReadOnly(dev); err != nil {
		kmsg("making %s read-only before the test boot: %v", dev, err)
		return
	}
	kmsg("%s (/perm) is read-only until the test boot", dev)
}
