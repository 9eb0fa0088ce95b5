package build

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"e1kbox/firmware/image"
)

// WriteDisk writes a full disk image of size bytes to path: partition
// tables, boot code, the boot and root A file systems and, if formatPerm,
// an ext4 /perm (made by e2fsprogs' mkfs.ext4).
func WriteDisk(path string, size int64, hostID uint32, boot, root, mbr []byte, formatPerm bool) error {
	layout, err := image.NewLayout(size, hostID)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := WriteParts(f, layout, boot, root, mbr); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if formatPerm {
		if err := FormatPerm(tmp, layout); err != nil {
			return err
		}
	}
	return os.Rename(tmp, path)
}

// WriteParts writes tables, boot code and file systems onto w (an image file
// or a block device of the layout's size).
func WriteParts(w io.WriterAt, layout image.Layout, boot, root, mbr []byte) error {
	if err := layout.WriteTables(w); err != nil {
		return err
	}
	if _, err := w.WriteAt(mbr, 0); err != nil {
		return fmt.Errorf("writing boot code: %w", err)
	}
	if _, err := w.WriteAt(boot, image.BootStart*image.SectorSize); err != nil {
		return fmt.Errorf("writing boot partition: %w", err)
	}
	if _, err := w.WriteAt(root, image.RootAStart*image.SectorSize); err != nil {
		return fmt.Errorf("writing root partition: %w", err)
	}
	// A zeroed superblock area on root B so that nothing stale is mounted.
	if _, err := w.WriteAt(make([]byte, 64<<10), image.RootBStart*image.SectorSize); err != nil {
		return fmt.Errorf("clearing root B: %w", err)
	}
	return nil
}

// FormatPerm creates an ext4 file system on the perm partition of the image
// or device at path.
func FormatPerm(path string, layout image.Layout) error {
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return fmt.Errorf("formatting /perm: mkfs.ext4 not found (apt-get install e2fsprogs): %w", err)
	}
	args := []string{"-q", "-F", "-L", "perm", "-E", fmt.Sprintf("offset=%d", layout.PermOffset()), path,
		fmt.Sprintf("%dk", layout.PermSectors*image.SectorSize/1024)}
	out, err := exec.Command(mkfs, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("formatting /perm: mkfs.ext4 %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// secretMode is the mode of the build outputs that hold the gokrazy
// password (manifest.json, root.img, the disk image): the build host's
// other users must not read it.
const secretMode = 0o600

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // the umask may have narrowed it; never wider
		return err
	}
	return os.Rename(tmp, path)
}
