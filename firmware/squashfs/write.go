package squashfs

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// On-disk constants (see the kernel's fs/squashfs/squashfs_fs.h).
const (
	magic        = 0x73717368
	blockSize    = 128 << 10
	blockLog     = 17
	metaSize     = 8192 // uncompressed bytes per metadata block
	superSize    = 96
	padTo        = 4096
	compZlib     = 1
	flagNoFrags  = 0x0010
	flagNoXattrs = 0x0200
	dataRaw      = 1 << 24 // data block size bit: stored uncompressed
	metaRaw      = 0x8000  // metadata block header bit: stored uncompressed
	noFragment   = math.MaxUint32
	noXattr      = math.MaxUint32
	noTable      = math.MaxUint64
	typeDir      = 1
	typeFile     = 2
	typeSymlink  = 3
	typeExtDir   = 8
	maxDirCount  = 256
)

var le = binary.LittleEndian

// WriteTo writes the image to w: superblock, data blocks, inode table,
// directory table and id table, zero-padded to a multiple of 4 KiB. It returns
// the number of bytes written (including the padding).
func (f *FS) WriteTo(w io.Writer) (int64, error) {
	mtime := f.modTime.Unix()
	if mtime < 0 || mtime > math.MaxUint32 {
		return 0, fmt.Errorf("squashfs: modification time %v outside the 32-bit range", f.modTime)
	}
	// Inode numbers follow write order (children before their directory), so
	// the root gets the highest number.
	var files []*node
	var count uint32
	number(f.root, &count, &files)

	chunks, err := compressData(files)
	if err != nil {
		return 0, err
	}
	pos := uint64(superSize)
	for _, n := range files {
		n.dataPos = pos
		for _, s := range n.blocks {
			pos += uint64(s &^ dataRaw)
		}
	}
	if pos > math.MaxUint32 {
		return 0, fmt.Errorf("squashfs: %d bytes of file data exceed the 4 GiB limit of basic inodes", pos)
	}

	t := &tables{mtime: uint32(mtime)}
	if t.inodes.c, err = newCompressor(); err != nil {
		return 0, err
	}
	t.dirs.c, t.ids.c = t.inodes.c, t.inodes.c
	if err := t.writeDir(f.root, count+1); err != nil {
		return 0, err
	}
	inodeTable, dirTable := t.inodes.finish(), t.dirs.finish()
	t.ids.write([]byte{0, 0, 0, 0}) // the single id, 0, used as uid and gid
	idBlock := t.ids.finish()
	if err := errors.Join(t.inodes.err, t.dirs.err, t.ids.err); err != nil {
		return 0, fmt.Errorf("squashfs: compress metadata: %w", err)
	}

	inodeStart := pos
	dirStart := inodeStart + uint64(len(inodeTable))
	idBlockStart := dirStart + uint64(len(dirTable))
	idIndexStart := idBlockStart + uint64(len(idBlock))
	bytesUsed := idIndexStart + 8

	sb := make([]byte, 0, superSize)
	sb = le.AppendUint32(sb, magic)
	sb = le.AppendUint32(sb, count)
	sb = le.AppendUint32(sb, uint32(mtime))
	sb = le.AppendUint32(sb, blockSize)
	sb = le.AppendUint32(sb, 0) // fragments
	sb = le.AppendUint16(sb, compZlib)
	sb = le.AppendUint16(sb, blockLog)
	sb = le.AppendUint16(sb, flagNoFrags|flagNoXattrs)
	sb = le.AppendUint16(sb, 1) // ids
	sb = le.AppendUint16(sb, 4) // major
	sb = le.AppendUint16(sb, 0) // minor
	sb = le.AppendUint64(sb, f.root.ref)
	sb = le.AppendUint64(sb, bytesUsed)
	sb = le.AppendUint64(sb, idIndexStart)
	sb = le.AppendUint64(sb, noTable) // xattr id table
	sb = le.AppendUint64(sb, inodeStart)
	sb = le.AppendUint64(sb, dirStart)
	sb = le.AppendUint64(sb, noTable) // fragment table
	sb = le.AppendUint64(sb, noTable) // export table

	cw := &countingWriter{w: w}
	cw.write(sb)
	for _, c := range chunks {
		cw.write(c)
	}
	cw.write(inodeTable)
	cw.write(dirTable)
	cw.write(idBlock)
	cw.write(le.AppendUint64(nil, idBlockStart))
	if rem := bytesUsed % padTo; rem != 0 {
		cw.write(make([]byte, padTo-rem))
	}
	if cw.err != nil {
		return cw.n, fmt.Errorf("squashfs: write image: %w", cw.err)
	}
	return cw.n, nil
}

// number assigns inode numbers in post-order over sorted names and collects
// the regular files in the same order.
func number(n *node, next *uint32, files *[]*node) {
	switch n.kind {
	case kindDir:
		n.subdirs = 0
		for _, name := range n.names() {
			c := n.children[name]
			number(c, next, files)
			if c.kind == kindDir {
				n.subdirs++
			}
		}
	case kindFile:
		*files = append(*files, n)
	}
	*next++
	n.ino = *next
}

// compressData compresses every data block of files on all CPUs. It returns
// the stored blocks in image order and sets each file's block size list.
func compressData(files []*node) ([][]byte, error) {
	type job struct {
		n *node
		i int
	}
	var jobs []job
	for _, n := range files {
		nb := (len(n.data) + blockSize - 1) / blockSize
		n.blocks = make([]uint32, nb)
		for i := range nb {
			jobs = append(jobs, job{n, i})
		}
	}
	chunks := make([][]byte, len(jobs))
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		err     error
	)
	for range min(runtime.GOMAXPROCS(0), max(len(jobs), 1)) {
		wg.Go(func() {
			c, cerr := newCompressor()
			if cerr != nil {
				errOnce.Do(func() { err = cerr })
				return
			}
			for k := int(next.Add(1) - 1); k < len(jobs); k = int(next.Add(1) - 1) {
				j := jobs[k]
				raw := j.n.data[j.i*blockSize : min((j.i+1)*blockSize, len(j.n.data))]
				z, cerr := c.compress(raw)
				if cerr != nil {
					errOnce.Do(func() { err = cerr })
					return
				}
				if len(z) < len(raw) {
					chunks[k] = bytes.Clone(z)
					j.n.blocks[j.i] = uint32(len(z))
				} else {
					chunks[k] = raw
					j.n.blocks[j.i] = uint32(len(raw)) | dataRaw
				}
			}
		})
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("squashfs: compress data: %w", err)
	}
	return chunks, nil
}

type compressor struct {
	buf bytes.Buffer
	zw  *zlib.Writer
}

func newCompressor() (*compressor, error) {
	c := &compressor{}
	zw, err := zlib.NewWriterLevel(&c.buf, zlib.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("zlib writer: %w", err)
	}
	c.zw = zw
	return c, nil
}

// compress returns the zlib stream of p, valid until the next call.
func (c *compressor) compress(p []byte) ([]byte, error) {
	c.buf.Reset()
	c.zw.Reset(&c.buf)
	if _, err := c.zw.Write(p); err != nil {
		return nil, err
	}
	if err := c.zw.Close(); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

// metaWriter builds a metadata table: 8 KiB blocks, each zlib-compressed
// when that makes it smaller, each behind a 2-byte length header.
type metaWriter struct {
	c      *compressor
	out    []byte // finished blocks with headers
	cur    []byte // pending uncompressed bytes, always < metaSize
	blocks int64  // finished blocks
	err    error
}

// pos returns the offset of the current block in the table and the offset
// within its uncompressed contents: the parts of an inode reference.
func (m *metaWriter) pos() (uint32, uint16) { return uint32(len(m.out)), uint16(len(m.cur)) }

// upos returns the position in the uncompressed stream of the table.
func (m *metaWriter) upos() int64 { return m.blocks*metaSize + int64(len(m.cur)) }

func (m *metaWriter) write(p []byte) {
	for len(p) > 0 {
		n := min(metaSize-len(m.cur), len(p))
		m.cur = append(m.cur, p[:n]...)
		p = p[n:]
		if len(m.cur) == metaSize {
			m.flush()
		}
	}
}

func (m *metaWriter) flush() {
	z, err := m.c.compress(m.cur)
	switch {
	case err != nil:
		m.err = err
	case len(z) < len(m.cur):
		m.out = le.AppendUint16(m.out, uint16(len(z)))
		m.out = append(m.out, z...)
	default:
		m.out = le.AppendUint16(m.out, uint16(len(m.cur))|metaRaw)
		m.out = append(m.out, m.cur...)
	}
	m.cur = m.cur[:0]
	m.blocks++
}

func (m *metaWriter) finish() []byte {
	if len(m.cur) > 0 {
		m.flush()
	}
	return m.out
}

type tables struct {
	inodes, dirs, ids metaWriter
	mtime             uint32
}

// inode starts an inode with the common header.
func (t *tables) inode(typ uint16, n *node) []byte {
	b := make([]byte, 0, 64)
	b = le.AppendUint16(b, typ)
	b = le.AppendUint16(b, n.perm)
	b = le.AppendUint16(b, 0) // uid index
	b = le.AppendUint16(b, 0) // gid index
	b = le.AppendUint32(b, t.mtime)
	return le.AppendUint32(b, n.ino)
}

func (t *tables) putInode(n *node, b []byte) {
	blk, off := t.inodes.pos()
	n.ref = uint64(blk)<<16 | uint64(off)
	t.inodes.write(b)
}

// writeDir writes the inodes below d, then d's listing, then d's inode.
func (t *tables) writeDir(d *node, parent uint32) error {
	for _, name := range d.names() {
		c := d.children[name]
		switch c.kind {
		case kindDir:
			if err := t.writeDir(c, d.ino); err != nil {
				return err
			}
		case kindFile:
			b := t.inode(typeFile, c)
			b = le.AppendUint32(b, uint32(c.dataPos))
			b = le.AppendUint32(b, noFragment)
			b = le.AppendUint32(b, 0) // offset in fragment
			b = le.AppendUint32(b, uint32(len(c.data)))
			for _, s := range c.blocks {
				b = le.AppendUint32(b, s)
			}
			t.putInode(c, b)
		case kindSymlink:
			b := t.inode(typeSymlink, c)
			b = le.AppendUint32(b, 1) // nlink
			b = le.AppendUint32(b, uint32(len(c.target)))
			t.putInode(c, append(b, c.target...))
		}
	}

	startBlk, startOff := t.dirs.pos()
	size, nIndex, index := t.writeListing(d)
	if nIndex > math.MaxUint16 || size > math.MaxUint32 {
		return fmt.Errorf("squashfs: directory with %d entries is too large", len(d.children))
	}
	if nIndex == 0 && size <= math.MaxUint16 {
		b := t.inode(typeDir, d)
		b = le.AppendUint32(b, startBlk)
		b = le.AppendUint32(b, 2+d.subdirs) // nlink
		b = le.AppendUint16(b, uint16(size))
		b = le.AppendUint16(b, startOff)
		b = le.AppendUint32(b, parent)
		t.putInode(d, b)
		return nil
	}
	b := t.inode(typeExtDir, d)
	b = le.AppendUint32(b, 2+d.subdirs) // nlink
	b = le.AppendUint32(b, uint32(size))
	b = le.AppendUint32(b, startBlk)
	b = le.AppendUint32(b, parent)
	b = le.AppendUint16(b, uint16(nIndex))
	b = le.AppendUint16(b, startOff)
	b = le.AppendUint32(b, noXattr)
	t.putInode(d, append(b, index...))
	return nil
}

// writeListing appends d's entries to the directory table. It returns the
// listing size as the inode records it and the directory index: one entry
// for the first header in each directory-table block after the first.
//
// A header covers at most 256 entries whose inodes start in the same inode
// block, with inode numbers within ±32767 of its base. A new header also
// starts in every new directory-table block, so the index can point at it.
func (t *tables) writeListing(d *node) (size int64, nIndex int, index []byte) {
	names := d.names()
	u0 := t.dirs.upos()
	var hdr []byte
	var first *node
	var hdrStart int64 // uncompressed table position of the open header
	lastBlk := u0 / metaSize
	count := 0
	flushHeader := func() {
		if first != nil {
			le.PutUint32(hdr, uint32(count-1))
			t.dirs.write(hdr)
		}
	}
	for _, name := range names {
		c := d.children[name]
		u := t.dirs.upos() + int64(len(hdr))
		if first == nil || count == maxDirCount || !sameHeader(first, c) || u/metaSize != hdrStart/metaSize {
			flushHeader()
			hdrStart, first, count = t.dirs.upos(), c, 0
			if hdrStart/metaSize != lastBlk {
				blk, _ := t.dirs.pos()
				index = le.AppendUint32(index, uint32(hdrStart-u0))
				index = le.AppendUint32(index, blk)
				index = le.AppendUint32(index, uint32(len(name)-1))
				index = append(index, name...)
				nIndex++
				lastBlk = hdrStart / metaSize
			}
			hdr = le.AppendUint32(hdr[:0], 0) // count, set by flushHeader
			hdr = le.AppendUint32(hdr, uint32(c.ref>>16))
			hdr = le.AppendUint32(hdr, c.ino)
		}
		hdr = le.AppendUint16(hdr, uint16(c.ref))
		hdr = le.AppendUint16(hdr, uint16(int16(int64(c.ino)-int64(first.ino))))
		hdr = le.AppendUint16(hdr, c.basicType())
		hdr = le.AppendUint16(hdr, uint16(len(name)-1))
		hdr = append(hdr, name...)
		count++
	}
	flushHeader()
	return t.dirs.upos() - u0 + 3, nIndex, index // the kernel counts "." and ".." as 3 bytes
}

// sameHeader reports whether c's entry can share a directory header whose
// first entry is first.
func sameHeader(first, c *node) bool {
	d := int64(c.ino) - int64(first.ino)
	return first.ref>>16 == c.ref>>16 && d >= math.MinInt16 && d <= math.MaxInt16
}

// basicType is the type recorded in directory entries.
func (n *node) basicType() uint16 {
	switch n.kind {
	case kindDir:
		return typeDir
	case kindFile:
		return typeFile
	default:
		return typeSymlink
	}
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}
