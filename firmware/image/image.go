// Package image lays out gokrazy disk images: GPT, hybrid MBR and partitions.
package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"unicode/utf16"
)

// Sector size and the fixed gokrazy partition layout (in 512-byte sectors).
const (
	SectorSize    = 512
	BootStart     = 8192
	BootSectors   = 204800  // 100 MiB FAT16
	RootSectors   = 1024000 // 500 MiB squashfs, A and B
	RootAStart    = BootStart + BootSectors
	RootBStart    = RootAStart + RootSectors
	PermStart     = RootBStart + RootSectors
	gptEntries    = 128
	gptEntrySize  = 128
	gptArrayBytes = gptEntries * gptEntrySize // 16 KiB = 32 sectors
	// MinPermSectors is the smallest perm partition we create (64 MiB).
	MinPermSectors = 64 << 20 / SectorSize
)

// MinDiskBytes is the smallest disk an image can be written to.
const MinDiskBytes = (PermStart + MinPermSectors + 33) * SectorSize

// Partition type GUIDs.
var (
	typeESP       = mustGUID("C12A7328-F81F-11D2-BA4B-00A0C93EC93B")
	typeRootAMD64 = mustGUID("4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709")
	typeLinuxData = mustGUID("0FC63DAF-8483-4772-8E79-3D69D8477DE4")
)

// HostID is gokrazy's host ID: FNV-1a-32 of the hostname. It is the MBR
// disk signature and part of every partition GUID.
func HostID(hostname string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(hostname))
	return h.Sum32()
}

// PartitionGUID returns gokrazy's GUID for partition n (0 = the disk).
func PartitionGUID(hostID uint32, n int) string {
	return fmt.Sprintf("60c24cc1-f3f9-427a-8199-%08x00%02x", hostID, n)
}

// RootCmdline is the root= value for the root partition (2 or 3) as gokrazy
// writes it: partition 1's GUID plus an offset.
func RootCmdline(hostID uint32, rootPart int) string {
	return fmt.Sprintf("PARTUUID=%s/PARTNROFF=%d", PartitionGUID(hostID, 1), rootPart-1)
}

// Layout describes the partitions of a disk of a given size.
type Layout struct {
	DiskSectors int64
	PermSectors int64
	HostID      uint32
}

// NewLayout returns the layout for a disk of diskBytes bytes.
func NewLayout(diskBytes int64, hostID uint32) (Layout, error) {
	if diskBytes < MinDiskBytes {
		return Layout{}, fmt.Errorf("disk of %d bytes is too small: need at least %d bytes (%d MiB)", diskBytes, int64(MinDiskBytes), int64(MinDiskBytes)>>20)
	}
	n := diskBytes / SectorSize
	last := n - 1
	// perm ends at LastUsableLBA-1 (gok ends it at last-34).
	permEnd := last - 34
	return Layout{DiskSectors: n, PermSectors: permEnd - PermStart + 1, HostID: hostID}, nil
}

// PermOffset is perm's byte offset on the disk.
func (l Layout) PermOffset() int64 { return PermStart * SectorSize }

// WriteTables writes the protective/hybrid MBR (without boot code), the
// primary GPT and the backup GPT to w.
func (l Layout) WriteTables(w io.WriterAt) error {
	last := l.DiskSectors - 1
	type part struct {
		typ         [16]byte
		start, size int64
		name        string
	}
	parts := []part{
		{typeESP, BootStart, BootSectors, "boot"},
		{typeRootAMD64, RootAStart, RootSectors, "root A"},
		{typeLinuxData, RootBStart, RootSectors, "root B"},
		{typeLinuxData, PermStart, l.PermSectors, "perm"},
	}
	var array [gptArrayBytes]byte
	for i, p := range parts {
		e := array[i*gptEntrySize:]
		copy(e[0:16], p.typ[:])
		g := mustGUID(PartitionGUID(l.HostID, i+1))
		copy(e[16:32], g[:])
		binary.LittleEndian.PutUint64(e[32:], uint64(p.start))
		binary.LittleEndian.PutUint64(e[40:], uint64(p.start+p.size-1))
		for j, r := range utf16.Encode([]rune(p.name)) {
			binary.LittleEndian.PutUint16(e[56+2*j:], r)
		}
	}
	arrayCRC := crc32.ChecksumIEEE(array[:])
	header := func(my, alt, entries int64) []byte {
		h := make([]byte, SectorSize)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], uint64(my))
		binary.LittleEndian.PutUint64(h[32:], uint64(alt))
		binary.LittleEndian.PutUint64(h[40:], 34)
		binary.LittleEndian.PutUint64(h[48:], uint64(last-33))
		g := mustGUID(PartitionGUID(l.HostID, 0))
		copy(h[56:72], g[:])
		binary.LittleEndian.PutUint64(h[72:], uint64(entries))
		binary.LittleEndian.PutUint32(h[80:], gptEntries)
		binary.LittleEndian.PutUint32(h[84:], gptEntrySize)
		binary.LittleEndian.PutUint32(h[88:], arrayCRC)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	writes := []struct {
		off int64
		b   []byte
	}{
		{0, l.mbr()},
		{1 * SectorSize, header(1, last, 2)},
		{2 * SectorSize, array[:]},
		{(last - 32) * SectorSize, array[:]},
		{last * SectorSize, header(last, 1, last-32)},
	}
	for _, wr := range writes {
		if _, err := w.WriteAt(wr.b, wr.off); err != nil {
			return fmt.Errorf("writing partition tables: %w", err)
		}
	}
	return nil
}

// mbr returns sector 0 without boot code: disk signature, hybrid partition
// entries (FAT for BIOS/Pi firmware, 0xEE protective) and the 55AA marker.
func (l Layout) mbr() []byte {
	b := make([]byte, SectorSize)
	binary.LittleEndian.PutUint32(b[440:], l.HostID)
	entry := func(i int, status, typ byte, start, size uint32) {
		e := b[446+16*i:]
		e[0] = status
		copy(e[1:4], []byte{0xFE, 0xFF, 0xFF})
		e[4] = typ
		copy(e[5:8], []byte{0xFE, 0xFF, 0xFF})
		binary.LittleEndian.PutUint32(e[8:], start)
		binary.LittleEndian.PutUint32(e[12:], size)
	}
	entry(0, 0x80, 0x0C, BootStart, BootSectors)
	entry(1, 0x00, 0xEE, 1, BootStart-1)
	b[510], b[511] = 0x55, 0xAA
	return b
}

// BootCode returns the 446 bytes for LBA 0: gokrazy's MBR boot loader
// (bootloader.img, read from the gokrazy/internal module at build time)
// patched with the absolute LBAs of /vmlinuz and /cmdline.txt and the disk
// signature, exactly as gokrazy's /update/mbr expects.
func BootCode(loader []byte, vmlinuzLBA, cmdlineLBA, diskSig uint32) ([]byte, error) {
	if len(loader) < 432 {
		return nil, fmt.Errorf("MBR boot loader is %d bytes, want at least 432", len(loader))
	}
	b := make([]byte, 446)
	copy(b, loader[:432])
	binary.LittleEndian.PutUint32(b[432:], vmlinuzLBA)
	binary.LittleEndian.PutUint32(b[436:], cmdlineLBA)
	binary.LittleEndian.PutUint32(b[440:], diskSig)
	return b, nil
}

// GUID is a GPT GUID in on-disk (mixed-endian) byte order.
type GUID [16]byte

// ParseGUID parses the textual form of a GUID.
func ParseGUID(s string) (GUID, error) {
	var g GUID
	var raw []byte
	for _, c := range []byte(s) {
		if c == '-' {
			continue
		}
		raw = append(raw, c)
	}
	if len(raw) != 32 || len(s) != 36 {
		return g, fmt.Errorf("malformed GUID %q", s)
	}
	var v [16]byte
	for i := range v {
		hi, lo := unhex(raw[2*i]), unhex(raw[2*i+1])
		if hi < 0 || lo < 0 {
			return g, fmt.Errorf("malformed GUID %q", s)
		}
		v[i] = byte(hi<<4 | lo)
	}
	// first three fields little-endian, the rest in order
	g[0], g[1], g[2], g[3] = v[3], v[2], v[1], v[0]
	g[4], g[5] = v[5], v[4]
	g[6], g[7] = v[7], v[6]
	copy(g[8:], v[8:])
	return g, nil
}

// String formats g in the usual textual form (lower case).
func (g GUID) String() string {
	return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func mustGUID(s string) GUID {
	g, err := ParseGUID(s)
	if err != nil {
		panic(err)
	}
	return g
}

// ReadGPTPartitions reads the primary GPT of r and returns the first-LBA,
// last-LBA and unique GUID of each used entry, verifying both CRCs.
func ReadGPTPartitions(r io.ReaderAt) ([]Partition, error) {
	h := make([]byte, SectorSize)
	if _, err := r.ReadAt(h, SectorSize); err != nil {
		return nil, fmt.Errorf("reading GPT header: %w", err)
	}
	if !bytes.Equal(h[:8], []byte("EFI PART")) {
		return nil, errors.New("no GPT header at LBA 1")
	}
	crc := binary.LittleEndian.Uint32(h[16:])
	hc := append([]byte{}, h[:92]...)
	binary.LittleEndian.PutUint32(hc[16:], 0)
	if crc32.ChecksumIEEE(hc) != crc {
		return nil, errors.New("GPT header CRC mismatch")
	}
	n := binary.LittleEndian.Uint32(h[80:])
	size := binary.LittleEndian.Uint32(h[84:])
	if n*size > 1<<20 || size < 128 {
		return nil, fmt.Errorf("implausible GPT entry array: %d × %d", n, size)
	}
	arr := make([]byte, n*size)
	if _, err := r.ReadAt(arr, int64(binary.LittleEndian.Uint64(h[72:]))*SectorSize); err != nil {
		return nil, fmt.Errorf("reading GPT entries: %w", err)
	}
	if crc32.ChecksumIEEE(arr) != binary.LittleEndian.Uint32(h[88:]) {
		return nil, errors.New("GPT entry array CRC mismatch")
	}
	var parts []Partition
	for i := uint32(0); i < n; i++ {
		e := arr[i*size:]
		var typ GUID
		copy(typ[:], e[:16])
		if typ == (GUID{}) {
			continue
		}
		var g GUID
		copy(g[:], e[16:32])
		parts = append(parts, Partition{
			Number: int(i) + 1, Type: typ, GUID: g,
			First: int64(binary.LittleEndian.Uint64(e[32:])),
			Last:  int64(binary.LittleEndian.Uint64(e[40:])),
		})
	}
	return parts, nil
}

// Partition is one used GPT entry.
type Partition struct {
	Number      int
	Type, GUID  GUID
	First, Last int64
}

// DeviceSize returns the size of a block device or regular file.
func DeviceSize(f *os.File) (int64, error) {
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return n, nil
}
