package fat

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"
)

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
