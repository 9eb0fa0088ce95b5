package fat

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// This file holds two test-side readers written from the FAT specification
// and from the behaviour of gokrazy's device-side reader; neither shares code
// with the writer.

var le = binary.LittleEndian

// deviceExtent looks a path up the way gokrazy's boot-partition reader on the
// device does: the root directory is at (reserved + sectorsPerFAT) * 512 (the
// FAT count is ignored), every directory is scanned for rootEntries entries
// from its first cluster on, without following the FAT, and a raw short name
// matches if it equals gokrazy's short form of the component
// case-insensitively or the component itself byte for byte. A component that
// matches nothing is skipped, as on the device.
func deviceExtent(img []byte, p string) (offset, length int64, err error) {
	spc := int64(img[13])
	rootEnt := int64(le.Uint16(img[17:]))
	dirOff := (int64(le.Uint16(img[14:])) + int64(le.Uint16(img[22:]))) * 512
	dataOff := dirOff + (rootEnt*32+511)/512*512
	for _, comp := range strings.Split(p[1:], "/") {
		want := strings.ToLower(deviceShortForm(comp))
		for i := int64(0); i < rootEnt; i++ {
			off := dirOff + i*32
			if off+32 > int64(len(img)) {
				return 0, 0, fmt.Errorf("%s: read past the end of the image", p)
			}
			e := img[off : off+32]
			if e[0] == 0 {
				continue
			}
			name, _, _ := strings.Cut(string(e[:8]), " ")
			if e[8] != ' ' {
				name += "." + string(e[8:11])
			}
			if strings.ToLower(name) != want && name != comp {
				continue
			}
			at := dataOff + int64(le.Uint16(e[26:])-2)*spc*512 // uint16 arithmetic as on the device
			if e[11] == 0x10 {
				dirOff = at
				break
			}
			return at, int64(le.Uint32(e[28:])), nil
		}
	}
	return 0, 0, fmt.Errorf("%q not found", p)
}

// deviceShortForm is the name the device derives from a path component:
// upper case, spaces and leading dots dropped, base cut to 8 and extension to
// 3 characters; if anything was cut, the base gets the tail "~1". The device
// always appends "." and the (possibly empty) extension.
func deviceShortForm(comp string) string {
	s := strings.TrimLeft(strings.ReplaceAll(strings.ToUpper(comp), " ", ""), ".")
	base, ext := s, ""
	if i := strings.LastIndex(s, "."); i >= 0 {
		base, ext = s[:i], s[i+1:]
	}
	cut := len(base) > 8 || len(ext) > 3
	base, ext = base[:min(len(base), 8)], ext[:min(len(ext), 3)]
	if cut {
		base = base[:min(len(base), 6)] + "~1"
	}
	return base + "." + ext
}

// node as seen by the strict reader.
type seen struct {
	isDir  bool
	short  [11]byte
	offset int64 // of the first cluster; 0 for empty files
	data   []byte
}

type fatImage struct {
	b                          []byte
	spc, reserved, nfats, fats int
	rootEnt, total             int
	rootOff, dataOff           int
	label                      string
	clusters                   int
	owner                      map[int]string // cluster -> path using it
	files                      map[string]seen
}

// readImage parses a padded image strictly: LFN sequences and checksums,
// "." and "..", cluster chains that are contiguous, end where the size says
// and share no cluster, and the volume label. It returns every file and
// directory by its long name.
func readImage(b []byte) (*fatImage, error) {
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xAA || le.Uint16(b[11:]) != 512 {
		return nil, fmt.Errorf("bad boot sector")
	}
	im := &fatImage{b: b, spc: int(b[13]), reserved: int(le.Uint16(b[14:])), nfats: int(b[16]),
		rootEnt: int(le.Uint16(b[17:])), fats: int(le.Uint16(b[22:])), total: int(le.Uint16(b[19:])),
		owner: map[int]string{}, files: map[string]seen{}}
	if im.total == 0 {
		im.total = int(le.Uint32(b[32:]))
	}
	if im.spc == 0 || im.nfats == 0 || im.total*512 > len(b) {
		return nil, fmt.Errorf("bad BPB or image shorter than %d sectors", im.total)
	}
	im.rootOff = (im.reserved + im.nfats*im.fats) * 512
	im.dataOff = im.rootOff + im.rootEnt*32
	im.clusters = (im.total*512 - im.dataOff) / (im.spc * 512)
	if im.clusters < 4085 || im.clusters > 65524 || im.fats*256 < im.clusters+2 {
		return nil, fmt.Errorf("%d clusters with a %d-sector FAT is not FAT16", im.clusters, im.fats)
	}
	return im, im.readDir("", im.b[im.rootOff:im.dataOff], 0, 0)
}

func (im *fatImage) fat(c int) int { return int(le.Uint16(im.b[im.reserved*512+2*c:])) }

// chain follows the FAT from first, requiring consecutive clusters.
func (im *fatImage) chain(p string, first int) (n int, err error) {
	for c := first; ; c++ {
		if c < 2 || c >= im.clusters+2 {
			return 0, fmt.Errorf("%s: cluster %d out of range", p, c)
		}
		if o, ok := im.owner[c]; ok {
			return 0, fmt.Errorf("%s: cluster %d already used by %s", p, c, o)
		}
		im.owner[c] = p
		n++
		switch next := im.fat(c); {
		case next >= 0xFFF8:
			return n, nil
		case next != c+1:
			return 0, fmt.Errorf("%s: cluster %d is followed by %d: not contiguous", p, c, next)
		}
	}
}

func (im *fatImage) readDir(dir string, raw []byte, self, parent int) error {
	var lfn []uint16
	var want, sum byte
	for i := 0; i+32 <= len(raw); i += 32 {
		e := raw[i : i+32]
		if e[0] == 0 {
			break
		}
		if e[0] == 0xE5 {
			return fmt.Errorf("%s: deleted entry", dir)
		}
		if e[11]&0x3F == 0x0F {
			if e[0]&0x40 != 0 {
				want, sum, lfn = e[0]&0x1F, e[13], make([]uint16, int(e[0]&0x1F)*13)
			} else if e[0] != want || e[13] != sum {
				return fmt.Errorf("%s: broken long-name sequence", dir)
			}
			if want == 0 {
				return fmt.Errorf("%s: long-name entry out of order", dir)
			}
			for j, pos := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
				lfn[int(want-1)*13+j] = le.Uint16(e[pos:])
			}
			want--
			continue
		}
		var short [11]byte
		copy(short[:], e)
		cluster, size := int(le.Uint16(e[26:])), int(le.Uint32(e[28:]))
		if e[11] == 0x08 {
			if dir != "" || im.label != "" {
				return fmt.Errorf("%s: unexpected volume label", dir)
			}
			im.label = strings.TrimRight(string(short[:]), " ")
			continue
		}
		name, err := longName(lfn, want, sum, short)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		lfn = nil
		switch {
		case name == ".":
			if e[11] != 0x10 || cluster != self {
				return fmt.Errorf("%s: bad \".\" entry", dir)
			}
			continue
		case name == "..":
			if e[11] != 0x10 || cluster != parent {
				return fmt.Errorf("%s: bad \"..\" entry", dir)
			}
			continue
		}
		p := dir + "/" + name
		if _, dup := im.files[p]; dup {
			return fmt.Errorf("%s: duplicate", p)
		}
		s := seen{isDir: e[11] == 0x10, short: short}
		if cluster != 0 {
			s.offset = int64(im.dataOff + (cluster-2)*im.spc*512)
		}
		if s.isDir {
			n, err := im.chain(p, cluster)
			if err != nil {
				return err
			}
			im.files[p] = s
			if err := im.readDir(p, im.b[s.offset:s.offset+int64(n*im.spc*512)], cluster, self); err != nil {
				return err
			}
			continue
		}
		if (size == 0) != (cluster == 0) {
			return fmt.Errorf("%s: size %d with first cluster %d", p, size, cluster)
		}
		if size > 0 {
			n, err := im.chain(p, cluster)
			if err != nil {
				return err
			}
			if n != (size+im.spc*512-1)/(im.spc*512) {
				return fmt.Errorf("%s: %d clusters for %d bytes", p, n, size)
			}
			s.data = im.b[s.offset : s.offset+int64(size)]
		}
		im.files[p] = s
	}
	return nil
}

// longName checks a collected long-name sequence against its short entry and
// returns the long name, or the short name if there is no sequence.
func longName(lfn []uint16, left, sum byte, short [11]byte) (string, error) {
	if lfn == nil {
		base, ext := strings.TrimRight(string(short[:8]), " "), strings.TrimRight(string(short[8:]), " ")
		if ext != "" {
			base += "." + ext
		}
		return base, nil
	}
	var s byte
	for _, c := range short {
		s = (s>>1 | s<<7) + c
	}
	if left != 0 || s != sum {
		return "", fmt.Errorf("long name of %q: incomplete sequence or checksum mismatch", short)
	}
	var b strings.Builder
	for i, c := range lfn {
		if c == 0 {
			for _, pad := range lfn[i+1:] {
				if pad != 0xFFFF {
					return "", fmt.Errorf("long name of %q: bad padding", short)
				}
			}
			break
		}
		if c > 0x7F {
			return "", fmt.Errorf("long name of %q: non-ASCII character", short)
		}
		b.WriteByte(byte(c))
	}
	return b.String(), nil
}
