// Package bootpart changes the boot partition so that a write torn at any point leaves it bootable.
//
// The partition holds two file system bodies: low (FAT from sector 4, ending
// at sector 65532) and high (FAT from sector 65532 to the partition's end).
// Sector 0, the boot sector, says which one the partition is; the MBR boot
// code's two LBAs say which kernel and command line BIOS boots. A new boot
// file system is written into the body the active one does not use, and
// only then do the two single-sector pointers move: first the MBR (BIOS),
// then the boot sector (UEFI). A boot file system whose files are those of
// the active one (the kernel did not change) is not written at all: only
// root= in its command line is edited in place, a single sector per file.
package bootpart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"e1kbox/firmware/fat"
	"e1kbox/firmware/image"
)

// The two bodies, in sectors of the boot partition.
const (
	LowStart  = 4
	LowEnd    = fat.MaxReserved
	HighStart = fat.MaxReserved
	HighEnd   = image.BootSectors
)

// Body names one of the two file system bodies.
type Body int

const (
	Low Body = iota
	High
)

func (b Body) String() string { return [...]string{"low", "high"}[b] }

func (b Body) other() Body { return 1 - b }

// Files is the content of a boot file system by absolute path.
type Files map[string][]byte

// Paths lists the paths, sorted.
func (f Files) Paths() []string {
	var ps []string
	for p := range f {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// ModTime is the time stamp of every file e1kbox writes: fixed, so that an
// unchanged kernel gives a byte-identical file system.
var ModTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Built is a boot file system laid out for one body.
type Built struct {
	Body       Body
	BootSector []byte // for sector 0 of the partition
	BodyOffset int64  // byte offset of Bytes in the partition
	Bytes      []byte // the FAT, the directories and the files
	End        int64  // where the file system ends (its size)
	// VmlinuzLBA and CmdlineLBA are the absolute disk sectors the MBR
	// boot code loads.
	VmlinuzLBA, CmdlineLBA uint32
}

// Build lays files out in body b.
func Build(b Body, files Files) (*Built, error) {
	start, end := uint32(LowStart), uint32(LowEnd)
	if b == High {
		start, end = HighStart, HighEnd
	}
	fs, err := fat.NewAt(start, end, "gokrazy", ModTime)
	if err != nil {
		return nil, err
	}
	for _, p := range files.Paths() {
		if err := fs.AddFile(p, files[p]); err != nil {
			return nil, fmt.Errorf("boot file system (%s body): %w", b, err)
		}
	}
	var body bytes.Buffer
	if _, err := fs.WriteBodyTo(&body); err != nil {
		return nil, err
	}
	out := &Built{Body: b, BootSector: fs.BootSector(), BodyOffset: fs.BodyOffset(), Bytes: body.Bytes(), End: fs.Size()}
	for _, f := range []struct {
		path string
		lba  *uint32
	}{{"/vmlinuz", &out.VmlinuzLBA}, {"/cmdline.txt", &out.CmdlineLBA}} {
		off, _, err := fs.Extent(f.path)
		if err != nil {
			return nil, fmt.Errorf("boot file system needs %s: %w", f.path, err)
		}
		*f.lba = uint32(image.BootStart + off/image.SectorSize)
	}
	return out, nil
}

// ReadFiles reads every file of the FAT file system at offset 0 of r.
func ReadFiles(r io.ReaderAt) (Files, *fat.Image, error) {
	im, err := fat.Read(r)
	if err != nil {
		return nil, nil, err
	}
	files := Files{}
	for _, f := range im.Files() {
		if f.Dir {
			continue
		}
		b, err := im.ReadFile(f.Path)
		if err != nil {
			return nil, nil, err
		}
		files[f.Path] = b
	}
	return files, im, nil
}

// Active is the boot file system a partition holds now.
type Active struct {
	Body  Body
	Files Files
	Image *fat.Image
}

// ReadActive reads the partition's active file system and tells its body
// (one that starts its FAT low, as gokrazy's packer writes it, is low).
func ReadActive(part io.ReaderAt) (*Active, error) {
	files, im, err := ReadFiles(part)
	if err != nil {
		return nil, fmt.Errorf("reading the boot partition: %w", err)
	}
	a := &Active{Body: Low, Files: files, Image: im}
	if im.BodyOffset() >= HighStart*image.SectorSize {
		a.Body = High
	}
	return a, nil
}

var rootRe = regexp.MustCompile(`root=[^ \r\n]+`)

// RootArg is root= for root partition n (2 or 3) of the disk whose first
// partition has GUID p1: gokrazy's form.
func RootArg(p1 string, n int) string {
	return fmt.Sprintf("root=PARTUUID=%s/PARTNROFF=%d", strings.ToLower(p1), n-1)
}

// cmdlineFile reports whether a boot file holds the kernel command line.
func cmdlineFile(p string) bool {
	p = strings.ToLower(p)
	return p == "/cmdline.txt" || strings.HasPrefix(p, "/loader/entries/")
}

// SetRoot returns b with its root= argument replaced by root, at the same
// length: the new argument takes room from the trailing spaces or leaves
// spaces there, as gokrazy's in-place edits do.
func SetRoot(b []byte, root string) ([]byte, error) {
	loc := rootRe.FindIndex(b)
	if loc == nil {
		return nil, errors.New("no root= argument")
	}
	out := append(append(append([]byte{}, b[:loc[0]]...), root...), b[loc[1]:]...)
	for len(out) > len(b) && out[len(out)-1] == ' ' {
		out = out[:len(out)-1]
	}
	if len(out) > len(b) {
		return nil, fmt.Errorf("%s does not fit in place (no padding left)", root)
	}
	return append(out, bytes.Repeat([]byte{' '}, len(b)-len(out))...), nil
}

// normalize strips what an update or a test boot edits in place from the
// command-line files, so that two file systems that differ only there
// compare equal.
func normalize(files Files) map[string]string {
	out := map[string]string{}
	for p, b := range files {
		s := string(b)
		if cmdlineFile(p) {
			s = rootRe.ReplaceAllString(s, "root=")
			s = strings.NewReplacer(" gokrazy.try_boot_inactive=1", "", " gokrazy.switch_on_boot=1", "").Replace(s)
			s = strings.TrimRight(s, " ")
		}
		out[strings.ToLower(p)] = s
	}
	return out
}

// SameContent reports whether two boot file systems hold the same files,
// command lines compared without root= and without test-boot flags.
func SameContent(a, b Files) bool {
	na, nb := normalize(a), normalize(b)
	if len(na) != len(nb) {
		return false
	}
	for p, s := range na {
		if t, ok := nb[p]; !ok || s != t {
			return false
		}
	}
	return true
}

// Write is one write of a plan, at an offset of the disk or of the boot
// partition.
type Write struct {
	Disk bool // offset on the whole disk (the MBR); else on the boot partition
	Off  int64
	Data []byte
	What string
}

// Plan is how to install a boot file system: Stage is written before the
// new build is tried (nothing boots from it yet), Commit makes it the one
// the firmware boots (each write a single sector).
type Plan struct {
	// Unchanged says the files are those of the active file system: no
	// file system is written, Commit only edits root= in place.
	Unchanged bool
	Body      Body // the body that holds the new file system
	Stage     []Write
	Commit    []Write
	Kernel    []byte // the new file system's /vmlinuz
	Cmdline   []byte // its /cmdline.txt, root= set
}

// NewPlan plans installing files (a boot.img's contents, root= pointing
// anywhere) so that the box boots root, with MBR boot code (at least 432
// bytes; the LBAs are filled in) and the partition's current state.
func NewPlan(active *Active, files Files, bootCode []byte, root string) (*Plan, error) {
	if len(bootCode) < 432 {
		return nil, fmt.Errorf("MBR boot code is %d bytes, want 432 or more", len(bootCode))
	}
	want := Files{}
	for p, b := range files {
		if cmdlineFile(p) && rootRe.Match(b) {
			nb, err := SetRoot(b, root)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			b = nb
		}
		want[p] = b
	}
	kernel, cmdline := lookup(want, "/vmlinuz"), lookup(want, "/cmdline.txt")
	if kernel == nil || cmdline == nil {
		return nil, errors.New("the boot file system has no /vmlinuz or no /cmdline.txt")
	}
	if SameContent(active.Files, want) {
		return InPlace(active, root)
	}
	p := &Plan{Body: active.Body.other(), Kernel: kernel, Cmdline: cmdline}
	nb, err := Build(p.Body, want)
	if err != nil {
		return nil, err
	}
	if a := active.Image; nb.BodyOffset < a.End() && a.BodyOffset() < nb.BodyOffset+int64(len(nb.Bytes)) {
		return nil, fmt.Errorf("the active boot file system (%d–%d) reaches into the %s body; it cannot be replaced safely", a.BodyOffset(), a.End(), p.Body)
	}
	mbr := make([]byte, 440)
	copy(mbr, bootCode[:432])
	le32(mbr[432:], nb.VmlinuzLBA)
	le32(mbr[436:], nb.CmdlineLBA)
	p.Stage = []Write{{Off: nb.BodyOffset, Data: nb.Bytes, What: "boot file system (" + p.Body.String() + " body)"}}
	p.Commit = []Write{
		{Disk: true, Off: 0, Data: mbr, What: "MBR boot code (BIOS: new kernel)"},
		{Off: 0, Data: nb.BootSector, What: "boot sector (UEFI: new file system)"},
	}
	return p, nil
}

// InPlace plans booting root with the active file system: root= edited in
// place in its command-line files (each a single-sector write).
func InPlace(active *Active, root string) (*Plan, error) {
	p := &Plan{Unchanged: true, Body: active.Body}
	for _, path := range active.Files.Paths() {
		b := active.Files[path]
		if path == "/cmdline.txt" || strings.EqualFold(path, "/cmdline.txt") {
			p.Kernel = lookup(active.Files, "/vmlinuz")
		}
		if !cmdlineFile(path) || !rootRe.Match(b) {
			continue
		}
		nb, err := SetRoot(b, root)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if strings.EqualFold(path, "/cmdline.txt") {
			p.Cmdline = nb
		}
		if bytes.Equal(nb, b) {
			continue
		}
		off, _, err := active.Image.Extent(path)
		if err != nil {
			return nil, err
		}
		p.Commit = append(p.Commit, Write{Off: off, Data: nb, What: path + " (root= in place)"})
	}
	if p.Kernel == nil || p.Cmdline == nil {
		return nil, errors.New("the active boot file system has no /vmlinuz or /cmdline.txt")
	}
	return p, nil
}

func lookup(f Files, p string) []byte {
	for k, v := range f {
		if strings.EqualFold(k, p) {
			return v
		}
	}
	return nil
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }

// Apply performs writes on the disk and the boot partition, syncing after
// each one, in order.
func Apply(disk, boot WriteSyncer, writes []Write) error {
	for _, w := range writes {
		dev := boot
		if w.Disk {
			dev = disk
		}
		if _, err := dev.WriteAt(w.Data, w.Off); err != nil {
			return fmt.Errorf("writing %s: %w", w.What, err)
		}
		if err := dev.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", w.What, err)
		}
	}
	return nil
}

// WriteSyncer is a block device (or an image file).
type WriteSyncer interface {
	io.WriterAt
	Sync() error
}
