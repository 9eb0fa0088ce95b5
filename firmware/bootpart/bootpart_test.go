package bootpart

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"e1kbox/firmware/fat"
	"e1kbox/firmware/image"
)

const p1 = "60c24cc1-f3f9-427a-8199-202db7930001"

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func cmdline(extra string) []byte {
	return []byte("console=tty1 console=ttyS0,115200 " + RootArg(p1, 2) + " ro init=/gokrazy/init panic=10" + extra + "\n" + strings.Repeat(" ", 64))
}

// bootFiles is a boot file system as firmware build writes it.
func bootFiles(kernelSeed uint64, extra string) Files {
	c := cmdline(extra)
	return Files{
		"/vmlinuz":                     randBytes(kernelSeed, 1<<20+333),
		"/cmdline.txt":                 c,
		"/loader/entries/gokrazy.conf": append([]byte("title e1kbox\rlinux /vmlinuz\roptions "), c...),
		"/EFI/BOOT/BOOTX64.EFI":        randBytes(99, 70_000),
	}
}

var bootCode = bytes.Repeat([]byte{0x90}, 432)

// disk is a disk image up to the end of the boot partition.
type disk []byte

func (d disk) part() []byte { return d[image.BootStart*image.SectorSize:] }

type devAt struct {
	b   []byte
	off int64
}

func (d devAt) WriteAt(p []byte, off int64) (int, error) { return copy(d.b[d.off+off:], p), nil }
func (d devAt) Sync() error                              { return nil }

func (d disk) apply(t *testing.T, ws []Write) {
	t.Helper()
	if err := Apply(devAt{d, 0}, devAt{d, image.BootStart * image.SectorSize}, ws); err != nil {
		t.Fatal(err)
	}
}

// newDisk holds files in the low body, booted by BIOS and UEFI.
func newDisk(t *testing.T, files Files) disk {
	t.Helper()
	d := make(disk, (image.BootStart+image.BootSectors)*image.SectorSize)
	b, err := Build(Low, files)
	if err != nil {
		t.Fatal(err)
	}
	copy(d.part(), b.BootSector)
	copy(d.part()[b.BodyOffset:], b.Bytes)
	copy(d, bootCode)
	le32(d[432:], b.VmlinuzLBA)
	le32(d[436:], b.CmdlineLBA)
	return d
}

// bios is what gokrazy's MBR boot code loads: the kernel at one LBA and
// the command line (NUL-terminated) at the other.
func (d disk) bios(kernelLen int) (kernel, cmd []byte) {
	v := int64(le.Uint32(d[432:])) * image.SectorSize
	c := int64(le.Uint32(d[436:])) * image.SectorSize
	if v+int64(kernelLen) > int64(len(d)) || c+512 > int64(len(d)) {
		return nil, nil
	}
	cmd = d[c : c+512]
	if i := bytes.IndexByte(cmd, 0); i >= 0 {
		cmd = cmd[:i]
	}
	return d[v : v+int64(kernelLen)], cmd
}

// biosBoots reports which of the builds BIOS boots ("" if none).
func (d disk) biosBoots(builds map[string]Files) string {
	for name, f := range builds {
		k, c := d.bios(len(f["/vmlinuz"]))
		if bytes.Equal(k, f["/vmlinuz"]) && bytes.Equal(c, f["/cmdline.txt"]) {
			return name
		}
	}
	return ""
}

// uefiBoots reports which build the UEFI view of the partition is: the
// file system at sector 0 with exactly one build's files.
func (d disk) uefiBoots(builds map[string]Files) string {
	files, _, err := ReadFiles(bytes.NewReader(d.part()))
	if err != nil {
		return ""
	}
	for name, f := range builds {
		if equalFiles(files, f) {
			return name
		}
	}
	return ""
}

func equalFiles(a, b Files) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		if !bytes.Equal(x, lookup(b, p)) {
			return false
		}
	}
	return true
}

var le = struct{ Uint32 func([]byte) uint32 }{func(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}}

// rooted returns files with root= set to partition n.
func rooted(t *testing.T, files Files, n int) Files {
	t.Helper()
	out := Files{}
	for p, b := range files {
		if cmdlineFile(p) {
			var err error
			if b, err = SetRoot(b, RootArg(p1, n)); err != nil {
				t.Fatal(err)
			}
		}
		out[p] = b
	}
	return out
}

// TestTornWrites applies a plan with a tear at every write boundary, in the
// middle of every write and at many sectors of the file system body: BIOS
// and UEFI each boot the old or the new build, whole, at every point, and
// the old one until the commit starts.
func TestTornWrites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    Body
		newKern uint64
		extra   string
	}{
		{"new kernel, low to high", Low, 2, ""},
		{"new kernel, high to low", High, 2, ""},
		{"longer command line, same kernel", Low, 1, " e1000e.InterruptThrottleRate=3000,3000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := rooted(t, bootFiles(1, ""), 2)
			d := newDisk(t, old)
			if tc.from == High {
				// Move the old build to the high body first (a completed
				// update), so the new one goes low.
				a, _ := ReadActive(bytes.NewReader(d.part()))
				p, err := NewPlan(a, bootFiles(1, " x"), bootCode, RootArg(p1, 2))
				if err != nil {
					t.Fatal(err)
				}
				d.apply(t, append(p.Stage, p.Commit...))
				old = rooted(t, bootFiles(1, " x"), 2)
			}
			a, err := ReadActive(bytes.NewReader(d.part()))
			if err != nil {
				t.Fatal(err)
			}
			if a.Body != tc.from {
				t.Fatalf("active body %v, want %v", a.Body, tc.from)
			}
			next := bootFiles(tc.newKern, tc.extra)
			p, err := NewPlan(a, next, bootCode, RootArg(p1, 3))
			if err != nil {
				t.Fatal(err)
			}
			if p.Unchanged || len(p.Stage) != 1 || len(p.Commit) != 2 {
				t.Fatalf("plan: unchanged %v, %d stage and %d commit writes; want a new body", p.Unchanged, len(p.Stage), len(p.Commit))
			}
			for _, w := range p.Commit {
				if len(w.Data) > image.SectorSize || w.Off%image.SectorSize != 0 {
					t.Errorf("commit write %s: %d bytes at %d, not within one sector", w.What, len(w.Data), w.Off)
				}
			}
			builds := map[string]Files{"old": old, "new": rooted(t, next, 3)}
			writes := append(append([]Write{}, p.Stage...), p.Commit...)
			cuts := 0
			for i, w := range writes {
				var points []int
				for s := 0; s < len(w.Data); s += max(image.SectorSize, len(w.Data)/40/image.SectorSize*image.SectorSize) {
					points = append(points, s)
				}
				points = append(points, len(w.Data)/2/image.SectorSize*image.SectorSize)
				for _, cut := range points {
					torn := append(disk{}, d...)
					torn.apply(t, writes[:i])
					torn.apply(t, []Write{{Disk: w.Disk, Off: w.Off, Data: w.Data[:cut]}})
					bios, uefi := torn.biosBoots(builds), torn.uefiBoots(builds)
					where := fmt.Sprintf("torn in write %d (%s) after %d of %d bytes", i, w.What, cut, len(w.Data))
					if bios == "" || uefi == "" {
						t.Fatalf("%s: BIOS boots %q, UEFI boots %q: a build must boot in both", where, bios, uefi)
					}
					if i < len(p.Stage) && (bios != "old" || uefi != "old") {
						t.Fatalf("%s: BIOS %s, UEFI %s before the commit; want old", where, bios, uefi)
					}
					cuts++
				}
			}
			d.apply(t, writes)
			if b, u := d.biosBoots(builds), d.uefiBoots(builds); b != "new" || u != "new" {
				t.Errorf("after the whole plan BIOS boots %q, UEFI %q; want new", b, u)
			}
			fsck(t, d.part())
			t.Logf("%d torn states, each booting a whole build", cuts)
		})
	}
}

func fsck(t *testing.T, part []byte) {
	t.Helper()
	if _, err := fat.Read(bytes.NewReader(part)); err != nil {
		t.Error(err)
	}
}

// TestUnchangedKernel: the same files (gok's in another order, another
// root=) write no file system, only root= in place, one sector per file.
func TestUnchangedKernel(t *testing.T) {
	old := rooted(t, bootFiles(1, ""), 2)
	d := newDisk(t, old)
	a, err := ReadActive(bytes.NewReader(d.part()))
	if err != nil {
		t.Fatal(err)
	}
	next := rooted(t, bootFiles(1, ""), 2)
	next["/cmdline.txt"] = append(bytes.TrimRight(next["/cmdline.txt"], " "), strings.Repeat(" ", 80)...)[:len(next["/cmdline.txt"])]
	p, err := NewPlan(a, next, bootCode, RootArg(p1, 3))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Unchanged || len(p.Stage) != 0 || len(p.Commit) != 2 {
		t.Fatalf("plan: unchanged %v, %d stage, %d commit writes; want in-place root= edits of 2 files", p.Unchanged, len(p.Stage), len(p.Commit))
	}
	for _, w := range p.Commit {
		if w.Off/image.SectorSize != (w.Off+int64(len(w.Data))-1)/image.SectorSize {
			t.Errorf("%s spans two sectors", w.What)
		}
	}
	d.apply(t, p.Commit)
	files, _, err := ReadFiles(bytes.NewReader(d.part()))
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(files, rooted(t, old, 3)) {
		t.Error("after the in-place edit the files are not the old ones with root=3")
	}
	if !strings.Contains(string(p.Cmdline), "PARTNROFF=2") {
		t.Errorf("plan's cmdline %q does not boot partition 3", p.Cmdline)
	}
}

// TestGokPathTears documents what gokrazy's own /update/boot (the whole
// file system written from sector 0, then /update/mbr) leaves when torn:
// BIOS keeps booting the old build only while the old kernel sits in the
// high body; UEFI has no whole file system at sector 0 until the write
// ends.
func TestGokPathTears(t *testing.T) {
	for _, from := range []Body{Low, High} {
		old := rooted(t, bootFiles(1, ""), 2)
		d := newDisk(t, old)
		if from == High {
			a, _ := ReadActive(bytes.NewReader(d.part()))
			p, _ := NewPlan(a, old, bootCode, RootArg(p1, 2))
			if !p.Unchanged {
				t.Fatal("moving to high needs a changed file system")
			}
			// force a move: same files, new body
			b, err := Build(High, old)
			if err != nil {
				t.Fatal(err)
			}
			copy(d.part()[b.BodyOffset:], b.Bytes)
			le32(d[432:], b.VmlinuzLBA)
			le32(d[436:], b.CmdlineLBA)
			copy(d.part(), b.BootSector)
		}
		next := bootFiles(2, "")
		gok, err := Build(Low, next)
		if err != nil {
			t.Fatal(err)
		}
		whole := append(append([]byte{}, gok.BootSector...), make([]byte, gok.BodyOffset-int64(len(gok.BootSector)))...)
		whole = append(whole, gok.Bytes...)
		torn := append(disk{}, d...)
		copy(torn.part(), whole[:len(whole)/2])
		builds := map[string]Files{"old": old, "new": next}
		bios, uefi := torn.biosBoots(builds), torn.uefiBoots(builds)
		wantBIOS := map[Body]string{Low: "", High: "old"}[from]
		if bios != wantBIOS || uefi != "" {
			t.Errorf("old kernel in the %v body, /update/boot torn halfway: BIOS boots %q (want %q), UEFI %q (want none)", from, bios, wantBIOS, uefi)
		}
	}
}

func TestSetRoot(t *testing.T) {
	in := []byte("a root=PARTUUID=x/PARTNROFF=1 b\n" + strings.Repeat(" ", 4))
	for _, tc := range []struct {
		root, want string
		err        bool
	}{
		{"root=/dev/sda3", "a root=/dev/sda3 b\n" + strings.Repeat(" ", 4+13), false},
		{"root=PARTUUID=x/PARTNROFF=2", "a root=PARTUUID=x/PARTNROFF=2 b\n    ", false},
		{"root=PARTUUID=xyz/PARTNROFF=2", "a root=PARTUUID=xyz/PARTNROFF=2 b\n  ", false},
		{"root=PARTUUID=" + strings.Repeat("y", 20), "", true},
	} {
		got, err := SetRoot(in, tc.root)
		if (err != nil) != tc.err || (!tc.err && string(got) != tc.want) {
			t.Errorf("SetRoot(%q) = %q, %v; want %q (error %v)", tc.root, got, err, tc.want, tc.err)
		}
	}
	if _, err := SetRoot([]byte("no root here"), "root=x"); err == nil {
		t.Error("SetRoot without root=: no error")
	}
}
