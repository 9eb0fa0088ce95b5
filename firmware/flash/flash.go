// Package flash writes an e1kbox image onto a block device.
package flash

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"e1kbox/firmware/build"
	"e1kbox/firmware/image"
)

// Flash partitions device for its real size and writes the build onto it.
// It refuses targets that are not block devices, are mounted, or are too
// small, and does nothing without yes.
func Flash(device string, m *build.Manifest, yes bool) error {
	if err := CheckTarget(device, "/proc/self/mountinfo"); err != nil {
		return err
	}
	f, err := os.OpenFile(device, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", device, err)
	}
	defer f.Close()
	size, err := image.DeviceSize(f)
	if err != nil {
		return err
	}
	layout, err := image.NewLayout(size, image.HostID(m.Hostname))
	if err != nil {
		return fmt.Errorf("%s: %w", device, err)
	}
	if !yes {
		return fmt.Errorf("this would erase all of %s (%d MiB); run again with --yes", device, size>>20)
	}
	boot, err := os.ReadFile(m.Boot)
	if err != nil {
		return err
	}
	root, err := os.ReadFile(m.Root)
	if err != nil {
		return err
	}
	mbr, err := os.ReadFile(m.MBR)
	if err != nil {
		return err
	}
	if err := build.WriteParts(f, layout, boot, root, mbr); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", device, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := build.FormatPerm(device, layout); err != nil {
		return err
	}
	fmt.Printf("flashed build %s to %s (%d MiB, perm %d MiB)\n", m.BuildTimestamp, device, size>>20, layout.PermSectors*image.SectorSize>>20)
	return nil
}

// CheckTarget refuses anything but an unmounted, unused block device: the
// device and its partitions (found in sysfs) must not be mounted, and
// nothing (device mapper, loop, md) may hold them.
func CheckTarget(device, mountinfo string) error {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil {
		return fmt.Errorf("target %s: %w", device, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return fmt.Errorf("target %s is not a block device", device)
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	devs := map[uint64]string{uint64(st.Rdev): device}
	entries, _ := os.ReadDir(sys)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(sys, e.Name(), "dev"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(sys, e.Name(), "partition")); err != nil {
			continue
		}
		var maj, min uint32
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &min); err == nil {
			devs[unix.Mkdev(maj, min)] = "/dev/" + e.Name()
			if holders, _ := os.ReadDir(filepath.Join(sys, e.Name(), "holders")); len(holders) > 0 {
				return fmt.Errorf("target %s is in use: /dev/%s is held by %s", device, e.Name(), holders[0].Name())
			}
		}
	}
	if holders, _ := os.ReadDir(filepath.Join(sys, "holders")); len(holders) > 0 {
		return fmt.Errorf("target %s is in use: held by %s", device, holders[0].Name())
	}
	mounted, err := mountedDevices(mountinfo)
	if err != nil {
		return err
	}
	for _, m := range mounted {
		if name, ok := devs[m.dev]; ok {
			return fmt.Errorf("target %s is in use: %s is mounted on %s", device, name, m.target)
		}
	}
	return nil
}

type mount struct {
	dev            uint64
	source, target string
}

func mountedDevices(mountinfo string) ([]mount, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var out []mount
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint opts ... - fstype source superopts
		fields := strings.Fields(s.Text())
		if len(fields) < 10 {
			continue
		}
		var maj, min uint32
		if _, err := fmt.Sscanf(fields[2], "%d:%d", &maj, &min); err != nil {
			continue
		}
		src := ""
		for i, fld := range fields {
			if fld == "-" && i+2 < len(fields) {
				src = fields[i+2]
			}
		}
		out = append(out, mount{dev: unix.Mkdev(maj, min), source: src, target: fields[4]})
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no mounts found: cannot check that the target is unused")
	}
	return out, nil
}
