package ispvm

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
)

// cpioWriter writes a cpio archive in the "newc" format the kernel
// unpacks as an initramfs: a 110-byte ASCII header per entry, the name
// and the data each padded to 4 bytes, and a TRAILER!!! entry at the end.
// Concatenated archives unpack as one, so a run's configuration is an
// archive appended to the cached base.
type cpioWriter struct {
	w   *bufio.Writer
	ino uint32
	off int64
	err error
}

func newCPIO(w io.Writer) *cpioWriter { return &cpioWriter{w: bufio.NewWriter(w), ino: 1} }

// cpio mode bits for the entry types the initramfs holds.
const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioCharDev = 0o020000
)

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.off += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if n := c.off % 4; n != 0 {
		c.write(make([]byte, 4-n))
	}
}

// entry writes one header, its name and data.
func (c *cpioWriter) entry(name string, mode uint32, data []byte) { c.node(name, mode, 0, 0, data) }

// node writes one header (with a device's major and minor numbers), its
// name and data.
func (c *cpioWriter) node(name string, mode, major, minor uint32, data []byte) {
	c.ino++
	nlink := 1
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, major, minor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

// Dir adds a directory (name without a leading slash).
func (c *cpioWriter) Dir(name string, perm fs.FileMode) {
	c.entry(name, cpioDir|uint32(perm.Perm()), nil)
}

// File adds a regular file.
func (c *cpioWriter) File(name string, perm fs.FileMode, data []byte) {
	c.entry(name, cpioFile|uint32(perm.Perm()), data)
}

// Symlink adds a symbolic link to target.
func (c *cpioWriter) Symlink(name, target string) { c.entry(name, cpioSymlink|0o777, []byte(target)) }

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm fs.FileMode, major, minor uint32) {
	c.node(name, cpioCharDev|uint32(perm.Perm()), major, minor, nil)
}

// Close writes the trailer and flushes; it does not close the underlying writer.
func (c *cpioWriter) Close() error {
	c.entry("TRAILER!!!", 0, nil)
	if c.err != nil {
		return fmt.Errorf("ispvm: writing cpio: %w", c.err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("ispvm: writing cpio: %w", err)
	}
	return nil
}
