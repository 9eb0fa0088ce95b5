// Package fat writes FAT16 boot-partition images that gokrazy's narrow FAT reader can read.
package fat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path"
	"strconv"
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

// stickyWriter counts bytes and keeps the first error.
type stickyWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (s *stickyWriter) write(b []byte) {
	if s.err == nil {
		var n int
		n, s.err = s.w.Write(b)
		s.n += int64(n)
	}
}

var zeroCluster [clusterSize]byte

// WriteTo writes the image truncated after the last used cluster (Len bytes):
// the boot sector, zeros up to BodyOffset, then the body. Writing it at the
// start of a zeroed partition of Size bytes gives the full file system.
func (f *FS) WriteTo(w io.Writer) (int64, error) {
	boot := make([]byte, f.BodyOffset())
	copy(boot, f.BootSector())
	n, err := w.Write(boot)
	if err != nil {
		return int64(n), fmt.Errorf("fat: writing image: %w", err)
	}
	m, err := f.WriteBodyTo(w)
	return int64(n) + m, err
}

// WriteBodyTo writes the FAT, the root directory and the data up to the last
// used cluster (Len - BodyOffset bytes), to be placed at BodyOffset.
func (f *FS) WriteBodyTo(w io.Writer) (int64, error) {
	next := uint16(2 + f.fileClusters)
	for _, d := range f.dirs {
		d.cluster = next
		next += uint16(d.dirClusters())
	}
	fat := make([]byte, f.fatSectors*sectorSize)
	binary.LittleEndian.PutUint16(fat[0:], 0xFFF8) // media descriptor
	binary.LittleEndian.PutUint16(fat[2:], 0xFFFF) // clean, no errors
	chain := func(first uint16, n int) {
		for i := 0; i < n; i++ {
			v := uint16(endOfChain)
			if i < n-1 {
				v = first + uint16(i) + 1
			}
			binary.LittleEndian.PutUint16(fat[2*(int(first)+i):], v)
		}
	}
	for _, n := range f.files {
		chain(n.cluster, clustersFor(int64(len(n.data))))
	}
	for _, d := range f.dirs {
		chain(d.cluster, d.dirClusters())
	}
	sw := &stickyWriter{w: w}
	sw.write(fat)
	sw.write(f.dirBytes(f.root, rootDirSectors*sectorSize))
	for _, n := range f.files {
		sw.write(n.data)
		sw.write(zeroCluster[:(clusterSize-len(n.data)%clusterSize)%clusterSize])
	}
	for _, d := range f.dirs {
		sw.write(f.dirBytes(d, d.dirClusters()*clusterSize))
	}
	if sw.err != nil {
		return sw.n, fmt.Errorf("fat: writing image: %w", sw.err)
	}
	return sw.n, nil
}

// BootSector returns sector 0 of the file system (the BPB). Its volume ID is
// derived from the file system's contents, so equal contents give equal
// bytes.
func (f *FS) BootSector() []byte {
	b := make([]byte, sectorSize)
	copy(b[0:], []byte{0xEB, 0x3C, 0x90}) // jmp 0x3E; nop
	copy(b[3:], "gokrazy!")
	le := binary.LittleEndian
	le.PutUint16(b[11:], sectorSize)
	b[13] = sectorsPerCluster
	le.PutUint16(b[14:], uint16(f.reserved))
	b[16] = 1 // one FAT: the device reader ignores this field
	le.PutUint16(b[17:], rootEntries)
	if f.totalSectors < 0x10000 {
		le.PutUint16(b[19:], uint16(f.totalSectors))
	} else {
		le.PutUint32(b[32:], f.totalSectors)
	}
	b[21] = 0xF8 // fixed disk
	le.PutUint16(b[22:], uint16(f.fatSectors))
	// Nothing uses the CHS geometry, but mtools wants the total to be a
	// multiple of the sectors per track.
	spt := uint32(63)
	for f.totalSectors%spt != 0 {
		spt--
	}
	le.PutUint16(b[24:], uint16(spt))
	le.PutUint16(b[26:], 255)
	b[36] = 0x80 // drive number
	b[38] = 0x29 // extended boot signature: volume ID, label and type follow
	le.PutUint32(b[39:], f.volumeID())
	copy(b[43:], f.label[:])
	copy(b[54:], "FAT16   ")
	copy(b[62:], []byte{0xFA, 0xF4, 0xEB, 0xFD}) // cli; hlt; jmp hlt
	b[510], b[511] = 0x55, 0xAA
	return b
}

// volumeID hashes the names, sizes and contents of the files and the
// modification time (CRC-32): a reproducible build gives the same ID.
func (f *FS) volumeID() uint32 {
	h := crc32.NewIEEE()
	t, d := dosTime(f.modTime)
	binary.Write(h, binary.LittleEndian, [2]uint16{t, d})
	for _, n := range f.files {
		io.WriteString(h, n.path())
		binary.Write(h, binary.LittleEndian, uint64(len(n.data)))
		h.Write(n.data)
	}
	for _, n := range f.dirs {
		io.WriteString(h, n.path()+"/")
	}
	return h.Sum32()
}

func (n *node) path() string {
	if n.parent == nil {
		return ""
	}
	return n.parent.path() + "/" + n.name
}

// dosTime converts t (in UTC) to a FAT time and date, clamped to 1980–2107.
func dosTime(t time.Time) (tm, date uint16) {
	t = t.UTC()
	switch {
	case t.Year() < 1980:
		return 0, 1<<5 | 1
	case t.Year() > 2107:
		return 23<<11 | 59<<5 | 29, 127<<9 | 12<<5 | 31
	}
	return uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2), uint16((t.Year()-1980)<<9 | int(t.Month())<<5 | t.Day())
}

// dirBytes encodes directory d into size bytes.
func (f *FS) dirBytes(d *node, size int) []byte {
	b := make([]byte, size)
	tm, date := dosTime(f.modTime)
	off := 0
	put := func(name [11]byte, attr byte, cluster uint16, length uint32) {
		e := b[off : off+dirEntrySize]
		copy(e, name[:])
		e[11] = attr
		binary.LittleEndian.PutUint16(e[14:], tm) // creation
		binary.LittleEndian.PutUint16(e[16:], date)
		binary.LittleEndian.PutUint16(e[18:], date) // last access
		binary.LittleEndian.PutUint16(e[22:], tm)   // modification
		binary.LittleEndian.PutUint16(e[24:], date)
		binary.LittleEndian.PutUint16(e[26:], cluster)
		binary.LittleEndian.PutUint32(e[28:], length)
		off += dirEntrySize
	}
	if d == f.root {
		put(f.label, attrVolumeID, 0, 0)
	} else {
		parent := d.parent.cluster // 0 for the root, as FAT requires
		put(shortName(".", ""), attrDirectory, d.cluster, 0)
		put(shortName("..", ""), attrDirectory, parent, 0)
	}
	for i, sn := range shortNames(d.children) {
		c := d.children[i]
		off += putLFN(b[off:], c.name, sn)
		if c.isDir {
			put(sn, attrDirectory, c.cluster, 0)
		} else {
			put(sn, attrArchive, c.cluster, uint32(len(c.data)))
		}
	}
	return b
}

func shortName(base, ext string) [11]byte {
	var n [11]byte
	copy(n[:], "           ")
	copy(n[:8], base)
	copy(n[8:], ext)
	return n
}

// shortNames assigns the 8.3 names of a directory's entries the way gokrazy's
// writer and reader expect: a name that fits 8.3 is stored as given,
// lower-case included (the device finds extension-less names only by exact
// byte comparison), and any other name gets an upper-case numeric-tail name,
// "gokrazy.conf" -> "GOKRAZ~1.CON", with the lowest free number.
func shortNames(children []*node) [][11]byte {
	names := make([][11]byte, len(children))
	used := make(map[[11]byte]bool)
	var pending []int
	for i, c := range children {
		base, ext, hasDot := strings.Cut(c.name, ".")
		if len(base) <= 8 && (!hasDot || len(ext) <= 3 && !strings.Contains(ext, ".")) {
			names[i] = shortName(base, ext)
			used[shortName(strings.ToUpper(base), strings.ToUpper(ext))] = true
		} else {
			pending = append(pending, i)
		}
	}
	for _, i := range pending {
		up := strings.ToUpper(children[i].name)
		base, ext := up, ""
		if dot := strings.LastIndexByte(up, '.'); dot >= 0 {
			base, ext = strings.ReplaceAll(up[:dot], ".", ""), up[dot+1:]
		}
		base, ext = base[:min(len(base), 8)], ext[:min(len(ext), 3)]
		for n := 1; ; n++ {
			tail := "~" + strconv.Itoa(n)
			sn := shortName(base[:min(len(base), 8-len(tail))]+tail, ext)
			if !used[sn] {
				used[sn], names[i] = true, sn
				break
			}
		}
	}
	return names
}

// putLFN writes the VFAT long-name entries for name into b and returns the
// bytes used.
func putLFN(b []byte, name string, sn [11]byte) int {
	var sum byte
	for _, c := range sn {
		sum = (sum>>1 | sum<<7) + c
	}
	n := lfnSlots(name)
	chars := make([]uint16, n*13)
	for i := range chars {
		switch {
		case i < len(name):
			chars[i] = uint16(name[i])
		case i == len(name):
			chars[i] = 0
		default:
			chars[i] = 0xFFFF
		}
	}
	// positions of the 13 characters inside an entry
	pos := [13]int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30}
	for k := n; k >= 1; k-- {
		e := b[(n-k)*dirEntrySize:][:dirEntrySize]
		e[0] = byte(k)
		if k == n {
			e[0] |= 0x40 // last entry of the sequence comes first
		}
		e[11], e[13] = attrLongName, sum
		for j, p := range pos {
			binary.LittleEndian.PutUint16(e[p:], chars[(k-1)*13+j])
		}
	}
	return n * dirEntrySize
}
