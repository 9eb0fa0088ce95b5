package boxupdate

import (
	"fmt"
	"log"
	"os"

	"golang.org/x/sys/unix"
)

// KexecTestBoot starts kernel with cmdline at once: it loads it with
// kexec_file_load, syncs, makes /perm read-only (so its journal is clean)
// and its device too (freezePerm), and reboots into it. The firmware's boot pointers are untouched, so any
// reset that follows (the new kernel panics: panic=10) boots the previous
// build.
func KexecTestBoot(kernel []byte, cmdline string) error {
	f, err := os.CreateTemp("", "e1kbox-vmlinuz-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(kernel)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// kexec_file_load refuses a file open for writing (ETXTBSY).
	k, err := os.Open(f.Name())
	if err != nil {
		return err
	}
	defer k.Close()
	kmsg("loading the new kernel (%d bytes) for the test boot", len(kernel))
	if err := unix.KexecFileLoad(int(k.Fd()), 0, cmdline, unix.KEXEC_FILE_NO_INITRAMFS); err != nil {
		return fmt.Errorf("kexec_file_load: %w", err)
	}
	kmsg("syncing and remounting /perm read-only")
	unix.Sync()
	if err := unix.Mount("", "/perm", "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		log.Printf("boxupdate: remounting /perm read-only before the test boot: %v (synced instead)", err)
	}
	unix.Sync()
	freezePerm()
	kmsg("kexec into the test boot")
	return unix.Reboot(unix.LINUX_REBOOT_CMD_KEXEC)
}
