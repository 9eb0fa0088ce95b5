package squashfs

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// entry is what the tests compare: one file system object as seen by a reader.
type entry struct {
	Kind   string // "dir", "file", "symlink"
	Mode   fs.FileMode
	Size   int
	SHA256 string // files
	Target string // symlinks
}

func fileEntry(mode fs.FileMode, data []byte) entry {
	sum := sha256.Sum256(data)
	return entry{Kind: "file", Mode: mode, Size: len(data), SHA256: hex.EncodeToString(sum[:])}
}

// readImage is a small, strict squashfs reader for the subset the writer
// produces. Besides decoding the tree it checks the format invariants that
// the kernel relies on, and returns an error for anything it does not expect.
func readImage(img []byte, wantMtime uint32) (map[string]entry, error) {
	r, err := readImageStats(img, wantMtime)
	if err != nil {
		return nil, err
	}
	return r.tree, nil
}

// readImageStats is readImage returning the reader, whose counters tell which
// format features the image uses.
func readImageStats(img []byte, wantMtime uint32) (*reader, error) {
	r := &reader{img: img, mtime: wantMtime, seen: map[uint32]bool{}, tree: map[string]entry{}, dirs: map[string]dirInfo{}}
	if err := r.run(); err != nil {
		return nil, err
	}
	return r, nil
}

type dirInfo struct {
	Extended bool
	Headers  int
	Index    int
}

type reader struct {
	img            []byte
	mtime          uint32
	inodeT, dirT   table
	count          uint32
	seen           map[uint32]bool
	tree           map[string]entry
	dirs           map[string]dirInfo
	raw, zipped    int // data blocks stored uncompressed / compressed
	rawMeta, zMeta int // metadata blocks
}

// table is a decompressed metadata table.
type table struct {
	data    []byte
	blockAt map[uint32]int // table-relative block offset -> offset in data
}

func (r *reader) u16(off uint64) uint16 { return binary.LittleEndian.Uint16(r.img[off:]) }
func (r *reader) u32(off uint64) uint32 { return binary.LittleEndian.Uint32(r.img[off:]) }
func (r *reader) u64(off uint64) uint64 { return binary.LittleEndian.Uint64(r.img[off:]) }

func (r *reader) run() error {
	if len(r.img) < 96 || len(r.img)%4096 != 0 {
		return fmt.Errorf("image size %d: not a multiple of 4096 holding a superblock", len(r.img))
	}
	if m := r.u32(0); m != 0x73717368 {
		return fmt.Errorf("magic %#x", m)
	}
	r.count = r.u32(4)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"mkfs time", uint64(r.u32(8)), uint64(r.mtime)},
		{"block size", uint64(r.u32(12)), 131072},
		{"fragments", uint64(r.u32(16)), 0},
		{"compression", uint64(r.u16(20)), 1},
		{"block log", uint64(r.u16(22)), 17},
		{"flags", uint64(r.u16(24)), 0x0210},
		{"ids", uint64(r.u16(26)), 1},
		{"major", uint64(r.u16(28)), 4},
		{"minor", uint64(r.u16(30)), 0},
		{"xattr table", r.u64(56), ^uint64(0)},
		{"fragment table", r.u64(80), ^uint64(0)},
		{"export table", r.u64(88), ^uint64(0)},
	}
	for _, c := range checks {
		if c.got != c.want {
			return fmt.Errorf("superblock %s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	rootRef, bytesUsed, idIndex := r.u64(32), r.u64(40), r.u64(48)
	inodeStart, dirStart := r.u64(64), r.u64(72)
	if bytesUsed > uint64(len(r.img)) || uint64(len(r.img))-bytesUsed >= 4096 || idIndex+8 != bytesUsed {
		return fmt.Errorf("bytes used %d, id index at %d, image %d bytes", bytesUsed, idIndex, len(r.img))
	}
	idBlock := r.u64(idIndex)
	if !(96 <= inodeStart && inodeStart < dirStart && dirStart <= idBlock && idBlock < idIndex) {
		return fmt.Errorf("table order: inodes %d, dirs %d, ids %d, id index %d", inodeStart, dirStart, idBlock, idIndex)
	}
	ids, err := r.readTable(idBlock, idIndex)
	if err != nil {
		return fmt.Errorf("id table: %w", err)
	}
	if !bytes.Equal(ids.data, []byte{0, 0, 0, 0}) {
		return fmt.Errorf("id table %x, want one id 0", ids.data)
	}
	if r.inodeT, err = r.readTable(inodeStart, dirStart); err != nil {
		return fmt.Errorf("inode table: %w", err)
	}
	if r.dirT, err = r.readTable(dirStart, idBlock); err != nil {
		return fmt.Errorf("directory table: %w", err)
	}
	ino, err := r.walk("/", rootRef, r.count+1, inodeStart)
	if err != nil {
		return err
	}
	if ino != r.count || len(r.seen) != int(r.count) {
		return fmt.Errorf("root inode %d, %d inodes seen, superblock says %d", ino, len(r.seen), r.count)
	}
	return nil
}

func (r *reader) readTable(start, end uint64) (table, error) {
	t := table{blockAt: map[uint32]int{}}
	for off := start; off < end; {
		if off+2 > end {
			return t, fmt.Errorf("truncated block header at %d", off)
		}
		if len(t.data)%8192 != 0 {
			return t, fmt.Errorf("block before %d holds %d bytes, only the last may be short", off, len(t.data)%8192)
		}
		h := r.u16(off)
		n := uint64(h & 0x7fff)
		if n == 0 || off+2+n > end {
			return t, fmt.Errorf("bad block length %d at %d", n, off)
		}
		t.blockAt[uint32(off-start)] = len(t.data)
		raw := r.img[off+2 : off+2+n]
		if h&0x8000 != 0 {
			r.rawMeta++
		} else {
			r.zMeta++
			var err error
			if raw, err = inflate(raw, 8192); err != nil {
				return t, fmt.Errorf("block at %d: %w", off, err)
			}
		}
		if len(raw) > 8192 {
			return t, fmt.Errorf("block at %d holds %d bytes", off, len(raw))
		}
		t.data = append(t.data, raw...)
		off += 2 + n
	}
	return t, nil
}

func inflate(p []byte, limit int) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(p))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	return out, zr.Close()
}

// at returns the table bytes from a block reference onwards.
func (t table) at(block uint32, off uint16) ([]byte, error) {
	u, ok := t.blockAt[block]
	if !ok || u+int(off) > len(t.data) {
		return nil, fmt.Errorf("no metadata at block %d offset %d", block, off)
	}
	return t.data[u+int(off):], nil
}

// cursor reads little-endian fields and remembers the first overrun.
type cursor struct {
	b   []byte
	err error
}

func (c *cursor) take(n int) []byte {
	if c.err != nil || n < 0 || n > len(c.b) {
		c.err = errors.New("truncated")
		return make([]byte, max(n, 8))
	}
	p := c.b[:n]
	c.b = c.b[n:]
	return p
}
func (c *cursor) u16() uint16 { return binary.LittleEndian.Uint16(c.take(2)) }
func (c *cursor) u32() uint32 { return binary.LittleEndian.Uint32(c.take(4)) }

// walk decodes the inode at ref (named p) and everything below it and returns
// its inode number.
func (r *reader) walk(p string, ref uint64, parent uint32, inodeStart uint64) (uint32, error) {
	b, err := r.inodeT.at(uint32(ref>>16), uint16(ref))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	c := &cursor{b: b}
	typ, perm, uid, gid, mtime, ino := c.u16(), c.u16(), c.u16(), c.u16(), c.u32(), c.u32()
	if uid != 0 || gid != 0 || mtime != r.mtime || perm > 0o7777 {
		return 0, fmt.Errorf("%s: uid %d gid %d mtime %d perm %o", p, uid, gid, mtime, perm)
	}
	if ino == 0 || ino > r.count || r.seen[ino] {
		return 0, fmt.Errorf("%s: inode number %d reused or out of range 1..%d", p, ino, r.count)
	}
	r.seen[ino] = true
	mode := fs.FileMode(perm & 0o777)
	for bit, m := range map[uint16]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if perm&bit != 0 {
			mode |= m
		}
	}
	switch typ {
	case typeFile:
		start, frag, _, size := c.u32(), c.u32(), c.u32(), c.u32()
		if frag != noFragment {
			return 0, fmt.Errorf("%s: fragment %d", p, frag)
		}
		var data []byte
		pos := uint64(start)
		for len(data) < int(size) {
			s := c.u32()
			want := min(int(size)-len(data), 131072)
			n := uint64(s &^ dataRaw)
			if c.err != nil || s>>25 != 0 || n == 0 || pos+n > inodeStart {
				return 0, fmt.Errorf("%s: bad block size %#x at %d", p, s, pos)
			}
			blk := r.img[pos : pos+n]
			if s&dataRaw != 0 {
				r.raw++
			} else {
				r.zipped++
				if blk, err = inflate(blk, want); err != nil {
					return 0, fmt.Errorf("%s: block at %d: %w", p, pos, err)
				}
			}
			if len(blk) != want {
				return 0, fmt.Errorf("%s: block at %d holds %d bytes, want %d", p, pos, len(blk), want)
			}
			data = append(data, blk...)
			pos += n
		}
		r.tree[p] = fileEntry(mode, data)
	case typeSymlink:
		nlink, n := c.u32(), c.u32()
		target := string(c.take(int(n)))
		if c.err != nil || nlink != 1 {
			return 0, fmt.Errorf("%s: symlink nlink %d: %v", p, nlink, c.err)
		}
		r.tree[p] = entry{Kind: "symlink", Mode: mode | fs.ModeSymlink, Target: target}
	case typeDir, typeExtDir:
		var start, nlink, size, par uint32
		var off, nIndex uint16
		if typ == typeDir {
			start, nlink, size, off, par = c.u32(), c.u32(), uint32(c.u16()), c.u16(), c.u32()
		} else {
			nlink, size, start, par, nIndex, off = c.u32(), c.u32(), c.u32(), c.u32(), c.u16(), c.u16()
			if x := c.u32(); x != noXattr {
				return 0, fmt.Errorf("%s: xattr %#x", p, x)
			}
		}
		if c.err != nil || par != parent || size < 3 {
			return 0, fmt.Errorf("%s: parent %d (want %d), size %d: %v", p, par, parent, size, c.err)
		}
		var listing []byte
		if size > 3 {
			listing, err = r.dirT.at(start, off)
		}
		if err != nil || len(listing) < int(size-3) {
			return 0, fmt.Errorf("%s: listing of %d bytes at %d/%d: %v", p, size-3, start, off, err)
		}
		headers := map[uint32]string{} // listing offset -> first name, for index checks
		info := dirInfo{Extended: typ == typeExtDir, Index: int(nIndex)}
		subdirs := uint32(0)
		lc := &cursor{b: listing[:size-3]}
		prev := ""
		for len(lc.b) > 0 {
			hdrOff := uint32(int(size-3) - len(lc.b))
			info.Headers++
			count, iblock, base := lc.u32()+1, lc.u32(), lc.u32()
			if count > 256 {
				return 0, fmt.Errorf("%s: header with %d entries", p, count)
			}
			for i := uint32(0); i < count; i++ {
				eoff, delta, etype, nlen := lc.u16(), int16(lc.u16()), lc.u16(), lc.u16()
				name := string(lc.take(int(nlen) + 1))
				if lc.err != nil {
					return 0, fmt.Errorf("%s: truncated listing", p)
				}
				if name <= prev && prev != "" || !fs.ValidPath(name) || path.Base(name) != name {
					return 0, fmt.Errorf("%s: name %q after %q", p, name, prev)
				}
				if i == 0 {
					headers[hdrOff] = name
				}
				prev = name
				child := path.Join(p, name)
				cino, err := r.walk(child, uint64(iblock)<<16|uint64(eoff), ino, inodeStart)
				if err != nil {
					return 0, err
				}
				if want := uint32(int64(base) + int64(delta)); cino != want {
					return 0, fmt.Errorf("%s: entry says inode %d, inode says %d", child, want, cino)
				}
				if k := r.tree[child].Kind; etype != map[string]uint16{"dir": typeDir, "file": typeFile, "symlink": typeSymlink}[k] {
					return 0, fmt.Errorf("%s: entry type %d for a %s", child, etype, k)
				}
				if r.tree[child].Kind == "dir" {
					subdirs++
				}
			}
		}
		if nlink != 2+subdirs {
			return 0, fmt.Errorf("%s: nlink %d with %d subdirectories", p, nlink, subdirs)
		}
		for i := 0; i < int(nIndex); i++ {
			index, blk, n := c.u32(), c.u32(), c.u32()
			name := string(c.take(int(n) + 1))
			if c.err != nil || headers[index] != name {
				return 0, fmt.Errorf("%s: index %d (%q) does not point at a header starting with it", p, index, name)
			}
			// The kernel resumes at block blk, offset (dir offset + index) % 8192.
			at, err := r.dirT.at(blk, uint16((int(off)+int(index))%8192))
			if err != nil || len(at) < 12 || !bytes.Equal(at[:12], listing[index:index+12]) {
				return 0, fmt.Errorf("%s: index %d (%q) resolves to the wrong place", p, index, name)
			}
		}
		r.tree[p] = entry{Kind: "dir", Mode: mode | fs.ModeDir}
		r.dirs[p] = info
	default:
		return 0, fmt.Errorf("%s: inode type %d", p, typ)
	}
	return ino, nil
}
