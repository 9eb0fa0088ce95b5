package fat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Image is a FAT16 file system read from a partition or an image file: the
// ones this package writes and the ones gokrazy's packer writes.
type Image struct {
	r        io.ReaderAt
	spc      int64 // sectors per cluster
	reserved int64 // sectors
	total    int64 // sectors
	fatOff   int64 // bytes
	dataOff  int64 // bytes
	clusters int64
	files    map[string]*File // by lower-case path
}

// File is one file or directory of an Image.
type File struct {
	Path  string // absolute, long name where there is one
	Dir   bool
	Size  int64
	first int64 // first cluster, 0 for empty files
}

// maxFiles bounds what Read accepts, so a damaged image cannot make it
// allocate without limit.
const (
	maxFiles    = 4096
	maxDirBytes = maxDirEntries * dirEntrySize
)

// Read parses the file system whose boot sector is at offset 0 of r. It
// checks the boot sector and reads every directory; file contents are read
// on demand.
func Read(r io.ReaderAt) (*Image, error) {
	b := make([]byte, sectorSize)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("fat: reading the boot sector: %w", err)
	}
	le := binary.LittleEndian
	if b[510] != 0x55 || b[511] != 0xAA || le.Uint16(b[11:]) != sectorSize {
		return nil, errors.New("fat: no FAT boot sector (signature or sector size)")
	}
	im := &Image{r: r, spc: int64(b[13]), reserved: int64(le.Uint16(b[14:])), files: map[string]*File{}}
	nfats, rootEnt, fatSectors := int64(b[16]), int64(le.Uint16(b[17:])), int64(le.Uint16(b[22:]))
	im.total = int64(le.Uint16(b[19:]))
	if im.total == 0 {
		im.total = int64(le.Uint32(b[32:]))
	}
	if nfats == 0 {
		nfats = 1 // gokrazy's reader ignores the count
	}
	if im.spc == 0 || im.reserved == 0 || rootEnt == 0 || fatSectors == 0 {
		return nil, errors.New("fat: boot sector describes no FAT16 file system")
	}
	im.fatOff = im.reserved * sectorSize
	rootOff := im.fatOff + nfats*fatSectors*sectorSize
	im.dataOff = rootOff + (rootEnt*dirEntrySize+sectorSize-1)/sectorSize*sectorSize
	im.clusters = (im.total*sectorSize - im.dataOff) / (im.spc * sectorSize)
	if im.clusters < 1 || im.clusters+2 > fatSectors*sectorSize/2 {
		return nil, fmt.Errorf("fat: %d clusters do not fit a %d-sector FAT", im.clusters, fatSectors)
	}
	root := make([]byte, rootEnt*dirEntrySize)
	if _, err := r.ReadAt(root, rootOff); err != nil {
		return nil, fmt.Errorf("fat: reading the root directory: %w", err)
	}
	if err := im.readDir("", root, 0); err != nil {
		return nil, err
	}
	return im, nil
}

// End is the byte offset where the file system ends (its total sectors).
func (im *Image) End() int64 { return im.total * sectorSize }

// BodyOffset is the byte offset of the FAT: the sectors before it (but the
// first) belong to no file.
func (im *Image) BodyOffset() int64 { return im.fatOff }

// Files lists every file and directory, sorted by path.
func (im *Image) Files() []File {
	out := make([]File, 0, len(im.files))
	for _, f := range im.files {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// ReadFile returns the contents of the file at path (case-insensitive).
func (im *Image) ReadFile(path string) ([]byte, error) {
	f, ok := im.files[strings.ToLower(path)]
	if !ok || f.Dir {
		return nil, fmt.Errorf("fat: %s: no such file", path)
	}
	return im.readChain(f.first, f.Size)
}

// Extent returns the byte offset and length of a file whose clusters are
// contiguous (as every writer of boot partitions lays them out).
func (im *Image) Extent(path string) (offset, length int64, err error) {
	f, ok := im.files[strings.ToLower(path)]
	if !ok || f.Dir || f.Size == 0 {
		return 0, 0, fmt.Errorf("fat: %s: no such non-empty file", path)
	}
	n := (f.Size + im.spc*sectorSize - 1) / (im.spc * sectorSize)
	c := f.first
	for i := int64(1); i < n; i++ {
		next, err := im.next(c)
		if err != nil {
			return 0, 0, err
		}
		if next != c+1 {
			return 0, 0, fmt.Errorf("fat: %s is not contiguous", path)
		}
		c = next
	}
	return im.clusterOffset(f.first), f.Size, nil
}

func (im *Image) clusterOffset(c int64) int64 { return im.dataOff + (c-2)*im.spc*sectorSize }

func (im *Image) next(c int64) (int64, error) {
	var b [2]byte
	if _, err := im.r.ReadAt(b[:], im.fatOff+2*c); err != nil {
		return 0, fmt.Errorf("fat: reading the FAT: %w", err)
	}
	return int64(binary.LittleEndian.Uint16(b[:])), nil
}

// readChain reads size bytes (or, with size < 0, the whole chain of a
// directory) from the cluster chain starting at first.
func (im *Image) readChain(first, size int64) ([]byte, error) {
	csize := im.spc * sectorSize
	if size == 0 {
		return []byte{}, nil
	}
	if size > im.clusters*csize {
		return nil, fmt.Errorf("fat: %d bytes do not fit the file system", size)
	}
	var out []byte
	seen := map[int64]bool{}
	for c := first; ; {
		if c < 2 || c >= im.clusters+2 || seen[c] {
			return nil, fmt.Errorf("fat: broken cluster chain at %d", c)
		}
		seen[c] = true
		if size < 0 && int64(len(out)) >= maxDirBytes {
			return nil, errors.New("fat: directory too large")
		}
		n := csize
		if size >= 0 {
			n = min(csize, size-int64(len(out)))
		}
		buf := make([]byte, n)
		if _, err := im.r.ReadAt(buf, im.clusterOffset(c)); err != nil {
			return nil, fmt.Errorf("fat: reading cluster %d: %w", c, err)
		}
		out = append(out, buf...)
		if size >= 0 && int64(len(out)) == size {
			return out, nil
		}
		next, err := im.next(c)
		if err != nil {
			return nil, err
		}
		if next >= 0xFFF8 {
			if size >= 0 {
				return nil, fmt.Errorf("fat: cluster chain ends before %d bytes", size)
			}
			return out, nil
		}
		c = next
	}
}

func (im *Image) readDir(dir string, raw []byte, depth int) error {
	if depth > 16 {
		return fmt.Errorf("fat: %s: directories nested too deep", dir)
	}
	var lfn []uint16
	le := binary.LittleEndian
	for i := 0; i+dirEntrySize <= len(raw); i += dirEntrySize {
		e := raw[i : i+dirEntrySize]
		switch {
		case e[0] == 0:
			return nil
		case e[0] == 0xE5:
			lfn = nil
			continue
		case e[11]&0x3F == attrLongName:
			seq := int(e[0] & 0x1F)
			if e[0]&0x40 != 0 {
				lfn = make([]uint16, seq*13)
			}
			if seq == 0 || seq*13 > len(lfn) {
				lfn = nil
				continue
			}
			for j, pos := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
				lfn[(seq-1)*13+j] = le.Uint16(e[pos:])
			}
			continue
		case e[11]&attrVolumeID != 0:
			lfn = nil
			continue
		}
		name := shortToName(e[:11])
		if lfn != nil {
			name = decodeLFN(lfn)
			lfn = nil
		}
		if name == "." || name == ".." {
			continue
		}
		if len(im.files) >= maxFiles {
			return errors.New("fat: too many files")
		}
		f := &File{Path: dir + "/" + name, Dir: e[11]&attrDirectory != 0, Size: int64(le.Uint32(e[28:])), first: int64(le.Uint16(e[26:]))}
		key := strings.ToLower(f.Path)
		if _, dup := im.files[key]; dup {
			return fmt.Errorf("fat: %s: duplicate name", f.Path)
		}
		im.files[key] = f
		if f.Dir {
			f.Size = 0
			sub, err := im.readChain(f.first, -1)
			if err != nil {
				return fmt.Errorf("fat: %s: %w", f.Path, err)
			}
			if err := im.readDir(f.Path, sub, depth+1); err != nil {
				return err
			}
		} else if f.Size > 0 && f.first < 2 {
			return fmt.Errorf("fat: %s: %d bytes without a cluster", f.Path, f.Size)
		}
	}
	return nil
}

func shortToName(b []byte) string {
	base, ext := strings.TrimRight(string(b[:8]), " "), strings.TrimRight(string(b[8:11]), " ")
	if ext != "" {
		return base + "." + ext
	}
	return base
}

func decodeLFN(lfn []uint16) string {
	var b strings.Builder
	for _, c := range lfn {
		if c == 0 || c == 0xFFFF {
			break
		}
		if c < 0x80 {
			b.WriteByte(byte(c))
		} else {
			b.WriteRune(rune(c))
		}
	}
	return b.String()
}
