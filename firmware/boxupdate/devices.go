// Package boxupdate installs updates on the box itself and decides at boot whether the running build is kept.
//
// An update (a .gaf) is written while the old build runs: the root to the
// inactive root partition, a changed boot file system into the boot
// partition's free body (bootpart). Nothing the firmware boots changes.
// The box then kexecs the new kernel with the new root for one test boot.
// The guard (a supervised program of every build) confirms it once the
// appliance is healthy: only then do the one-sector boot pointers move. A
// new build that does not come up (a kernel panic reboots through the
// firmware), is not healthy in time (the guard reboots), or loses power
// boots the previous build, which records why.
package boxupdate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"e1kbox/firmware/image"
)

// Devices are the box's disk, its boot partition and its two roots.
type Devices struct {
	Disk, Boot string    // block devices (or image files in tests)
	Roots      [2]string // partitions 2 and 3
	P1GUID     string    // the boot partition's GPT GUID (root= names it)
	// Active is the root partition (2 or 3) the kernel booted.
	Active int
}

// Root returns the device of root partition n (2 or 3).
func (d *Devices) Root(n int) string { return d.Roots[n-2] }

// Inactive is the root partition the next update goes to.
func (d *Devices) Inactive() int { return 5 - d.Active }

var gptRootRe = regexp.MustCompile(`root=PARTUUID=([0-9a-fA-F-]{36})/PARTNROFF=([12])`)

// ParseRoot reads gokrazy's root= from a kernel command line: partition 1's
// GUID and the root partition (2 or 3).
func ParseRoot(cmdline string) (p1 string, part int, err error) {
	m := gptRootRe.FindStringSubmatch(cmdline)
	if m == nil {
		return "", 0, fmt.Errorf("kernel command line has no GPT root=PARTUUID=…/PARTNROFF=1|2 (e1kbox needs gokrazy's GPT layout): %.200q", cmdline)
	}
	off, _ := strconv.Atoi(m[2])
	return strings.ToLower(m[1]), off + 1, nil
}

// FindDevices finds the disk the kernel booted from: the block device whose
// first GPT partition has the GUID in /proc/cmdline's root=.
func FindDevices() (*Devices, error) {
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, err
	}
	p1, active, err := ParseRoot(string(cmdline))
	if err != nil {
		return nil, err
	}
	blocks, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		dev := "/dev/" + b.Name()
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		parts, err := image.ReadGPTPartitions(f)
		f.Close()
		if err != nil || len(parts) < 4 || parts[0].GUID.String() != p1 {
			continue
		}
		sep := ""
		if n := b.Name(); n[len(n)-1] >= '0' && n[len(n)-1] <= '9' {
			sep = "p" // nvme0n1p1, mmcblk0p1, loop0p1
		}
		d := &Devices{Disk: dev, Boot: dev + sep + "1", Roots: [2]string{dev + sep + "2", dev + sep + "3"}, P1GUID: p1, Active: active}
		for _, p := range []string{d.Boot, d.Roots[0], d.Roots[1]} {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("partition %s of %s: %w", filepath.Base(p), dev, err)
			}
		}
		return d, nil
	}
	return nil, errors.New("no disk has the boot partition named by root= in the kernel command line")
}
