// Package squashfs writes zlib-compressed squashfs 4.0 images from an in-memory tree.
package squashfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strings"
	"time"
)

// Limits of the on-disk format that the writer enforces up front.
const (
	maxNameLen   = 256  // SQUASHFS_NAME_LEN
	maxTargetLen = 4095 // a symlink target must fit one page with its NUL
)

// ErrNotDir reports that a path component exists but is not a directory.
var ErrNotDir = errors.New("not a directory")

type kind uint8

const (
	kindDir kind = iota + 1
	kindFile
	kindSymlink
)

// node is one entry of the tree. Write-time fields are reset by every WriteTo.
type node struct {
	kind     kind
	perm     uint16 // permission bits incl. setuid/setgid/sticky (07777)
	explicit bool   // directories: created by Mkdir rather than as a parent
	children map[string]*node
	data     []byte
	target   string

	ino      uint32 // inode number, 1-based
	ref      uint64 // inode reference: block offset << 16 | offset in block
	blocks   []uint32
	dataPos  uint64
	subdirs  uint32
	sorted   []string
	sortedOK bool
}

// FS is an in-memory directory tree that WriteTo serializes as a squashfs
// image. Entries may be added in any order; all of them are owned by uid and
// gid 0 and carry the modification time given to New. An FS is not safe for
// concurrent use.
type FS struct {
	root    *node
	modTime time.Time
}

// New returns an empty tree whose root directory has mode 0755. Every inode and
// the superblock get modTime (second resolution), so equal trees give equal
// images.
func New(modTime time.Time) *FS {
	return &FS{
		root:    &node{kind: kindDir, perm: 0o755, children: map[string]*node{}},
		modTime: modTime,
	}
}

// Mkdir creates the directory path with mode. Missing parents are created with
// mode 0755. A directory that so far only exists as an implicit parent gets
// mode and counts as created; creating it a second time is an error.
func (f *FS) Mkdir(path string, mode fs.FileMode) error {
	perm, err := unixPerm(mode, fs.ModeDir)
	if err != nil {
		return fmt.Errorf("squashfs: mkdir %q: %w", path, err)
	}
	parent, name, err := f.parentOf(path)
	if err != nil {
		return fmt.Errorf("squashfs: mkdir %q: %w", path, err)
	}
	if n, ok := parent.children[name]; ok {
		if n.kind != kindDir || n.explicit {
			return fmt.Errorf("squashfs: mkdir %q: %w", path, fs.ErrExist)
		}
		n.perm, n.explicit = perm, true
		return nil
	}
	parent.children[name] = &node{kind: kindDir, perm: perm, explicit: true, children: map[string]*node{}}
	parent.sortedOK = false
	return nil
}

// AddFile adds a regular file with mode and contents data. The tree keeps data
// without copying it; the caller must not modify it until WriteTo returns.
func (f *FS) AddFile(path string, mode fs.FileMode, data []byte) error {
	perm, err := unixPerm(mode, 0)
	if err != nil {
		return fmt.Errorf("squashfs: add file %q: %w", path, err)
	}
	if uint64(len(data)) > math.MaxUint32 {
		return fmt.Errorf("squashfs: add file %q: %d bytes exceed the 4 GiB limit", path, len(data))
	}
	return f.add(path, "add file", &node{kind: kindFile, perm: perm, data: data})
}

// AddSymlink adds a symbolic link to target. The target is stored verbatim and
// need not exist.
func (f *FS) AddSymlink(path, target string) error {
	if target == "" || len(target) > maxTargetLen || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("squashfs: add symlink %q: target %q: %w", path, target, fs.ErrInvalid)
	}
	return f.add(path, "add symlink", &node{kind: kindSymlink, perm: 0o777, target: target})
}

func (f *FS) add(path, what string, n *node) error {
	parent, name, err := f.parentOf(path)
	if err != nil {
		return fmt.Errorf("squashfs: %s %q: %w", what, path, err)
	}
	if _, ok := parent.children[name]; ok {
		return fmt.Errorf("squashfs: %s %q: %w", what, path, fs.ErrExist)
	}
	parent.children[name] = n
	parent.sortedOK = false
	return nil
}

// parentOf validates path and returns its parent directory (created as needed)
// and its last element. Paths are slash-separated, with or without a leading
// slash; ".", "..", empty elements, NUL bytes and the root itself are invalid.
func (f *FS) parentOf(path string) (*node, string, error) {
	p := strings.TrimPrefix(path, "/")
	if p == "." || !fs.ValidPath(p) || strings.IndexByte(p, 0) >= 0 {
		return nil, "", fs.ErrInvalid
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if len(e) > maxNameLen {
			return nil, "", fmt.Errorf("name longer than %d bytes: %w", maxNameLen, fs.ErrInvalid)
		}
	}
	// Check the whole chain before creating anything, so a failed call leaves
	// the tree untouched.
	d := f.root
	for i, e := range elems[:len(elems)-1] {
		c, ok := d.children[e]
		if !ok {
			break
		}
		if c.kind != kindDir {
			return nil, "", fmt.Errorf("%s: %w", strings.Join(elems[:i+1], "/"), ErrNotDir)
		}
		d = c
	}
	d = f.root
	for _, e := range elems[:len(elems)-1] {
		c, ok := d.children[e]
		if !ok {
			c = &node{kind: kindDir, perm: 0o755, children: map[string]*node{}}
			d.children[e] = c
			d.sortedOK = false
		}
		d = c
	}
	return d, elems[len(elems)-1], nil
}

// unixPerm converts mode to squashfs permission bits. allowedType is the only
// file type bit mode may carry besides none.
func unixPerm(mode fs.FileMode, allowedType fs.FileMode) (uint16, error) {
	if extra := mode &^ (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | allowedType); extra != 0 {
		return 0, fmt.Errorf("unsupported mode bits %#o: %w", uint32(extra), fs.ErrInvalid)
	}
	perm := uint16(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	return perm, nil
}

// names returns the children of directory n sorted by name (byte order, as
// squashfs requires).
func (n *node) names() []string {
	if !n.sortedOK {
		n.sorted = n.sorted[:0]
		for name := range n.children {
			n.sorted = append(n.sorted, name)
		}
		sort.Strings(n.sorted)
		n.sortedOK = true
	}
	return n.sorted
}
