// Package fat writes FAT16 boot-partition images that gokrazy's narrow FAT reader can read.
package fat

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Layout constants. The device reader (gokrazy/internal/fat) takes the root
// directory to start at (reserved + sectorsPerFAT) * sectorSize, so the image
// has exactly one FAT.
const (
	sectorSize        = 512
	sectorsPerCluster = 4
	clusterSize       = sectorSize * sectorsPerCluster
	reservedSectors   = sectorsPerCluster // the boot sector, padded to a cluster as gokrazy does
	// MaxReserved is the most reserved sectors NewAt takes: the BPB field
	// has 16 bits, and the FAT stays cluster-aligned.
	MaxReserved    = 65532
	dirEntrySize   = 32
	rootEntries    = 512
	rootDirSectors = rootEntries * dirEntrySize / sectorSize
	maxDirEntries  = 65536 // a FAT directory is at most 2 MiB
	minClusters    = 4085  // fewer clusters would make it FAT12
	maxClusters    = 65524 // more clusters would make it FAT32
	endOfChain     = 0xFFFF

	attrVolumeID  = 0x08
	attrDirectory = 0x10
	attrArchive   = 0x20
	attrLongName  = 0x0F
)

// Errors returned (wrapped) by New, AddFile, Mkdir and Extent. A duplicate path
// wraps fs.ErrExist and a missing one fs.ErrNotExist.
var (
	ErrInvalid = errors.New("invalid or unsupported name")
	ErrNoSpace = errors.New("file system full")
	ErrDirFull = errors.New("directory full")
)

// shortChars are the non-alphanumeric characters valid in an 8.3 short name.
// Names are limited to these (plus '.') so every name has a short form.
const shortChars = "!#$%&'()-@^_`{}~"

type node struct {
	name     string
	parent   *node
	isDir    bool
	children []*node
	slots    int    // directory entries this directory uses, including "." and ".." or the label
	data     []byte // file contents
	cluster  uint16 // first cluster; 0 for the root directory and empty files
}

// FS is a FAT16 image under construction. Files are placed in AddFile order,
// each in consecutive clusters, followed by the subdirectories in creation
// order, so every file and directory is contiguous.
type FS struct {
	totalSectors uint32
	reserved     uint32 // sectors before the FAT: the boot sector, then unused
	fatSectors   uint32
	clusters     int // data clusters
	label        [11]byte
	modTime      time.Time
	root         *node
	files        []*node
	dirs         []*node // subdirectories in creation order
	fileClusters int
}

// New returns an empty file system of totalSectors 512-byte sectors (the
// partition size) with the given volume label (at most 11 characters valid in
// a short name; case is kept). modTime is used for every timestamp and for the
// volume ID. With 4 sectors per cluster, totalSectors must be between about
// 8 MiB and 128 MiB worth of sectors.
func New(totalSectors uint32, label string, modTime time.Time) (*FS, error) {
	return NewAt(reservedSectors, totalSectors, label, modTime)
}

// NewAt is New for a file system whose FAT starts at sector reserved instead
// of right after the boot sector: sectors 1 to reserved-1 belong to no file
// and are never written by WriteBodyTo. Two such file systems in one
// partition, one ending where the other's FAT starts, share sector 0: which
// one the partition holds is decided by the one sector BootSector returns.
// reserved must be a multiple of 4 between 4 and 65532 (a 16-bit field).
func NewAt(reserved, totalSectors uint32, label string, modTime time.Time) (*FS, error) {
	if label == "" || len(label) > 11 || !validChars(label, "") {
		return nil, fmt.Errorf("fat: label %q: %w", label, ErrInvalid)
	}
	if reserved < reservedSectors || reserved > MaxReserved || reserved%sectorsPerCluster != 0 {
		return nil, fmt.Errorf("fat: %d reserved sectors: want a multiple of %d from %d to %d: %w", reserved, sectorsPerCluster, reservedSectors, MaxReserved, ErrInvalid)
	}
	f := &FS{totalSectors: totalSectors, reserved: reserved, modTime: modTime, root: &node{isDir: true, slots: 1}}
	copy(f.label[:], "           ")
	copy(f.label[:], label)
	avail := int64(totalSectors) - int64(reserved) - rootDirSectors
	// Size the FAT for the clusters there would be without it; this can only
	// overestimate. Rounding it to whole clusters keeps the data area aligned.
	fat := ((avail/sectorsPerCluster+2)*2 + sectorSize - 1) / sectorSize
	fat = (fat + sectorsPerCluster - 1) / sectorsPerCluster * sectorsPerCluster
	clusters := (avail - fat) / sectorsPerCluster
	if clusters < minClusters || clusters > maxClusters {
		return nil, fmt.Errorf("fat: %d sectors give %d clusters, FAT16 needs %d to %d", totalSectors, clusters, minClusters, maxClusters)
	}
	f.fatSectors, f.clusters = uint32(fat), int(clusters)
	return f, nil
}

// AddFile adds a file at the absolute path p (such as "/a/b.txt"), creating
// missing parent directories. It keeps data, which must not be modified
// afterwards. Names must be at most 255 characters from A-Z, a-z, 0-9, '.'
// and !#$%&'()-@^_`{}~, and must not start or end with '.'. Names are unique
// case-insensitively.
func (f *FS) AddFile(p string, data []byte) error {
	return f.add(p, data, false)
}

// Mkdir creates the directory p and any missing parents. It fails if p exists.
func (f *FS) Mkdir(p string) error {
	return f.add(p, nil, true)
}

func (f *FS) add(p string, data []byte, dir bool) error {
	comps, err := splitPath(p)
	if err != nil {
		return err
	}
	cur, i := f.root, 0
	for ; i < len(comps); i++ {
		c := cur.lookup(comps[i])
		if c == nil {
			break
		}
		if i == len(comps)-1 {
			return fmt.Errorf("fat: add %s: %w", p, fs.ErrExist)
		}
		if !c.isDir {
			return fmt.Errorf("fat: add %s: %q is a file: %w", p, c.name, ErrInvalid)
		}
		cur = c
	}
	anchor, anchorSlots := cur, cur.slots
	nDirs, nFiles, fileClusters := len(f.dirs), len(f.files), f.fileClusters
	for ; i < len(comps); i++ {
		n := &node{name: comps[i], parent: cur, isDir: dir || i < len(comps)-1}
		if n.isDir {
			n.slots = 2
			f.dirs = append(f.dirs, n)
		} else {
			n.data = data
			if len(data) > 0 {
				n.cluster = uint16(2 + f.fileClusters)
			}
			f.fileClusters += clustersFor(int64(len(data)))
			f.files = append(f.files, n)
		}
		cur.children = append(cur.children, n)
		cur.slots += 1 + lfnSlots(n.name)
		cur = n
	}
	limit := maxDirEntries
	if anchor == f.root {
		limit = rootEntries
	}
	var full error
	if anchor.slots > limit {
		full = ErrDirFull
	} else if f.usedClusters() > f.clusters {
		full = ErrNoSpace
	}
	if full != nil {
		anchor.children = anchor.children[:len(anchor.children)-1]
		anchor.slots = anchorSlots
		f.dirs, f.files, f.fileClusters = f.dirs[:nDirs], f.files[:nFiles], fileClusters
		return fmt.Errorf("fat: add %s: %w", p, full)
	}
	return nil
}

func splitPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return nil, fmt.Errorf("fat: path %q: not a clean absolute path: %w", p, ErrInvalid)
	}
	comps := strings.Split(p[1:], "/")
	for _, c := range comps {
		if len(c) > 255 || c[0] == '.' || c[len(c)-1] == '.' || !validChars(c, ".") {
			return nil, fmt.Errorf("fat: path %q: name %q: %w", p, c, ErrInvalid)
		}
	}
	return comps, nil
}

func validChars(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		ok := b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' ||
			strings.IndexByte(shortChars, b) >= 0 || strings.IndexByte(extra, b) >= 0
		if !ok {
			return false
		}
	}
	return true
}

func (n *node) lookup(name string) *node {
	for _, c := range n.children {
		if strings.EqualFold(c.name, name) {
			return c
		}
	}
	return nil
}

func (f *FS) find(p string) (*node, error) {
	comps, err := splitPath(p)
	if err != nil {
		return nil, err
	}
	n := f.root
	for _, c := range comps {
		if n = n.lookup(c); n == nil {
			return nil, fmt.Errorf("fat: %s: %w", p, fs.ErrNotExist)
		}
	}
	return n, nil
}

func clustersFor(bytes int64) int { return int((bytes + clusterSize - 1) / clusterSize) }

func lfnSlots(name string) int { return (len(name) + 12) / 13 }

func (d *node) dirClusters() int { return clustersFor(int64(d.slots) * dirEntrySize) }

func (f *FS) usedClusters() int {
	n := f.fileClusters
	for _, d := range f.dirs {
		n += d.dirClusters()
	}
	return n
}

func (f *FS) dataStart() int64 {
	return int64(f.reserved+f.fatSectors+rootDirSectors) * sectorSize
}

// BodyOffset is the byte offset of the FAT, where WriteBodyTo's bytes go.
func (f *FS) BodyOffset() int64 { return int64(f.reserved) * sectorSize }

// Extent returns the byte offset of the file p inside the image and its
// length. The file's data is contiguous. Empty files and directories have no
// extent.
func (f *FS) Extent(p string) (offset, length int64, err error) {
	n, err := f.find(p)
	if err != nil {
		return 0, 0, err
	}
	if n.isDir || len(n.data) == 0 {
		return 0, 0, fmt.Errorf("fat: %s: directory or empty file has no extent: %w", p, ErrInvalid)
	}
	return f.dataStart() + int64(n.cluster-2)*clusterSize, int64(len(n.data)), nil
}

// Len returns the number of bytes WriteTo writes: the image up to the end of
// the last used cluster.
func (f *FS) Len() int64 { return f.dataStart() + int64(f.usedClusters())*clusterSize }

// Size returns the full size of the file system in bytes (totalSectors * 512).
// Bytes from Len to Size are zero.
func (f *FS) Size() int64 { return int64(f.totalSectors) * sectorSize }
