package fat

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	bootSectors  = 204800 // the e1kbox boot partition
	smallSectors = 16_500 // 4111 clusters, close to the FAT16 minimum
)

var testTime = time.Date(2026, 7, 1, 12, 34, 56, 0, time.UTC)

type tfile struct {
	path string
	data []byte // nil with dir set: Mkdir
	dir  bool
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// bootFiles is what e1kbox puts on its boot partition, plus nested
// directories and long names for the tools to read.
func bootFiles() []tfile {
	cmdline := []byte("console=tty1 console=ttyS0,115200 root=PARTUUID=60c24cc1-f3f9-427a-8199-202db7930001/PARTNROFF=1 ro init=/gokrazy/init panic=10 oops=panic rootwait pci=nommconf" + strings.Repeat(" ", 64))
	return []tfile{
		{path: "/vmlinuz", data: randBytes(1, 3<<20+123)},
		{path: "/cmdline.txt", data: cmdline},
		{path: "/loader/entries/gokrazy.conf", data: append([]byte("title gokrazy\nlinux /vmlinuz\noptions "), cmdline...)},
		{path: "/EFI/BOOT/BOOTX64.EFI", data: randBytes(2, 100_000)},
		{path: "/overlays/vc4-kms-v3d-pi4.dtbo", data: randBytes(3, 4096)},
		{path: "/overlays/vc4-kms-v3d.dtbo", data: randBytes(4, 2049)},
		{path: "/a/b/c/d/A-file-name_that_is_long-enough-for-several-entries~" + strings.Repeat("x", 150) + ".data", data: randBytes(5, 1)},
		{path: "/RECOVERY.000", data: []byte("recovery")},
		{path: "/empty.txt", data: []byte{}},
		{path: "/emptydir", dir: true},
	}
}

func build(t testing.TB, sectors uint32, files []tfile) (*FS, []byte) {
	t.Helper()
	return buildAt(t, sectors, testTime, files)
}

func buildAt(t testing.TB, sectors uint32, modTime time.Time, files []tfile) (*FS, []byte) {
	t.Helper()
	f, err := New(sectors, "gokrazy", modTime)
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, f, files)
	return f, image(t, f)
}

func addAll(t testing.TB, f *FS, files []tfile) {
	t.Helper()
	for _, tf := range files {
		var err error
		if tf.dir {
			err = f.Mkdir(tf.path)
		} else {
			err = f.AddFile(tf.path, tf.data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// image returns f's full image: WriteTo's output padded to Size.
func image(t testing.TB, f *FS) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := f.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) || n != f.Len() {
		t.Fatalf("WriteTo returned %d, wrote %d bytes, Len() = %d", n, buf.Len(), f.Len())
	}
	if f.Len() > f.Size() {
		t.Fatalf("Len() = %d > Size() = %d", f.Len(), f.Size())
	}
	return append(buf.Bytes(), make([]byte, f.Size()-n)...)
}

func TestBootPartition(t *testing.T) {
	files := bootFiles()
	f, img := build(t, bootSectors, files)

	// Boot sector fields gokrazy and the tools rely on.
	if got, want := string(img[3:11]), "gokrazy!"; got != want {
		t.Errorf("OEM = %q, want %q", got, want)
	}
	if got := img[16]; got != 1 {
		t.Errorf("number of FATs = %d, want 1", got)
	}
	if got := le.Uint32(img[32:]); got != bootSectors {
		t.Errorf("total sectors = %d, want %d", got, bootSectors)
	}
	if got := string(img[43:54]); got != "gokrazy    " {
		t.Errorf("BPB label = %q", got)
	}
	if got := string(img[54:62]); got != "FAT16   " {
		t.Errorf("file system type = %q", got)
	}

	im, err := readImage(img)
	if err != nil {
		t.Fatal(err)
	}
	if im.label != "gokrazy" {
		t.Errorf("root directory label = %q, want gokrazy", im.label)
	}
	for _, tf := range files {
		s, ok := im.files[tf.path]
		if !ok {
			t.Errorf("%s: not found; have %v", tf.path, keys(im.files))
			continue
		}
		if s.isDir != tf.dir || !bytes.Equal(s.data, tf.data) {
			t.Errorf("%s: read back differs (dir %v)", tf.path, s.isDir)
		}
		if tf.dir || len(tf.data) == 0 {
			continue
		}
		off, n, err := f.Extent(tf.path)
		if err != nil {
			t.Fatal(err)
		}
		if off != s.offset || n != int64(len(tf.data)) || !bytes.Equal(img[off:off+n], tf.data) {
			t.Errorf("%s: Extent = %d+%d, reader has it at %d", tf.path, off, n, s.offset)
		}
	}

	// Short names exactly as gokrazy writes them (raw bytes).
	for p, want := range map[string]string{
		"/vmlinuz":                       "vmlinuz    ",
		"/cmdline.txt":                   "cmdline txt",
		"/loader":                        "loader     ",
		"/loader/entries":                "entries    ",
		"/loader/entries/gokrazy.conf":   "GOKRAZ~1CON",
		"/EFI":                           "EFI        ",
		"/EFI/BOOT/BOOTX64.EFI":          "BOOTX64 EFI",
		"/overlays/vc4-kms-v3d-pi4.dtbo": "VC4-KM~1DTB",
		"/overlays/vc4-kms-v3d.dtbo":     "VC4-KM~2DTB",
		"/RECOVERY.000":                  "RECOVERY000",
	} {
		if got := shortOf(im, p); got != want {
			t.Errorf("%s: short name %q, want %q", p, got, want)
		}
	}

	// The device's reader finds what it rewrites and what the MBR loads.
	for _, p := range []string{"/cmdline.txt", "/loader/entries/gokrazy.conf", "/vmlinuz", "/EFI/BOOT/BOOTX64.EFI", "/RECOVERY.000"} {
		off, n, err := deviceExtent(img, p)
		if err != nil {
			t.Errorf("device reader: %v", err)
			continue
		}
		wantOff, wantN, err := f.Extent(p)
		if err != nil {
			t.Fatal(err)
		}
		if off != wantOff || n != wantN {
			t.Errorf("device reader: %s at %d+%d, Extent says %d+%d", p, off, n, wantOff, wantN)
		}
		if off%512 != 0 {
			t.Errorf("%s: offset %d is not sector aligned", p, off)
		}
	}
}

func keys(m map[string]seen) []string {
	var k []string
	for p := range m {
		k = append(k, p)
	}
	return k
}

// TestDeviceReaderTwoFATs proves deviceExtent would catch a second FAT.
func TestDeviceReaderTwoFATs(t *testing.T) {
	f, img := build(t, bootSectors, bootFiles())
	if _, _, err := deviceExtent(img, "/cmdline.txt"); err != nil {
		t.Fatal(err)
	}
	// Insert a second copy of the FAT the way general-purpose writers do.
	fatEnd := int(reservedSectors+f.fatSectors) * sectorSize
	two := append(append(append([]byte{}, img[:fatEnd]...), img[reservedSectors*sectorSize:fatEnd]...), img[fatEnd:]...)
	two[16] = 2
	if _, err := readImage(two); err != nil {
		t.Fatalf("two-FAT image should be valid FAT: %v", err)
	}
	if _, _, err := deviceExtent(two, "/cmdline.txt"); err == nil {
		t.Error("device reader found /cmdline.txt in a two-FAT image")
	}
}

func TestShortNames(t *testing.T) {
	for _, tc := range []struct {
		names []string // in one directory, in order
		want  []string // raw 11-byte short names
	}{
		{[]string{"vmlinuz", "cmdline.txt", "Config.Txt"}, []string{"vmlinuz    ", "cmdline txt", "Config  Txt"}},
		{[]string{"gokrazy.conf", "gokrazy.confx"}, []string{"GOKRAZ~1CON", "GOKRAZ~2CON"}},
		{[]string{"abcdefghij", "abcdef~1"}, []string{"ABCDEF~2   ", "abcdef~1   "}},
		{[]string{"a.b.c", "x.tar.gz", "abc.conf"}, []string{"AB~1    C  ", "XTAR~1  GZ ", "ABC~1   CON"}},
		{[]string{"abcdefgh", "abcdefghi", "a.md"}, []string{"abcdefgh   ", "ABCDEF~1   ", "a       md "}},
	} {
		var files []tfile
		for i, n := range tc.names {
			files = append(files, tfile{path: "/d/" + n, data: []byte{byte(i)}})
		}
		_, img := build(t, smallSectors, files)
		im, err := readImage(img)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range tc.names {
			got = append(got, shortOf(im, "/d/"+n))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("short names of %q (-want +got):\n%s", tc.names, diff)
		}
	}
}

func TestExtentStable(t *testing.T) {
	f, err := New(bootSectors, "gokrazy", testTime)
	if err != nil {
		t.Fatal(err)
	}
	kernel := randBytes(7, 100_000)
	if err := f.AddFile("/vmlinuz", kernel); err != nil {
		t.Fatal(err)
	}
	off1, _, err := f.Extent("/vmlinuz")
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, f, bootFiles()[1:])
	off2, n, err := f.Extent("/vmlinuz")
	if err != nil {
		t.Fatal(err)
	}
	img := image(t, f)
	if off1 != off2 || !bytes.Equal(img[off2:off2+n], kernel) {
		t.Errorf("Extent moved from %d to %d or does not point at the data", off1, off2)
	}
	if off2 != f.dataStart() || off2%clusterSize != 0 {
		t.Errorf("first file at %d, want the cluster-aligned data start %d", off2, f.dataStart())
	}
	// Lookups are case-insensitive like FAT itself.
	if off, _, err := f.Extent("/efi/boot/bootx64.efi"); err != nil || off == 0 {
		t.Errorf("case-insensitive Extent: %d, %v", off, err)
	}
}

func TestDeterministic(t *testing.T) {
	_, a := build(t, bootSectors, bootFiles())
	_, b := build(t, bootSectors, bootFiles())
	if !bytes.Equal(a, b) {
		t.Error("same input gave different images")
	}
	if _, c := buildAt(t, bootSectors, testTime.Add(time.Hour), bootFiles()); bytes.Equal(a, c) {
		t.Error("a different time gave the same image")
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		sectors uint32
		ok      bool
	}{
		{bootSectors, true},
		{16_500, true},   // near the FAT16 minimum, 16-bit sector count
		{262_000, true},  // near the maximum with 4 sectors per cluster
		{204_801, true},  // odd size
		{16_000, false},  // would be FAT12
		{270_000, false}, // would need bigger clusters
		{0, false},
	} {
		f, err := New(tc.sectors, "gokrazy", testTime)
		if (err == nil) != tc.ok {
			t.Errorf("New(%d): %v, want ok=%v", tc.sectors, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		if err := f.AddFile("/cmdline.txt", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		img := image(t, f)
		if f.Size() != int64(tc.sectors)*512 {
			t.Errorf("Size() = %d", f.Size())
		}
		if _, err := readImage(img); err != nil {
			t.Errorf("%d sectors: %v", tc.sectors, err)
		}
		if _, _, err := deviceExtent(img, "/cmdline.txt"); err != nil {
			t.Errorf("%d sectors: %v", tc.sectors, err)
		}
	}
}

func TestErrors(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, tc := range []struct {
		name    string
		setup   []tfile
		op      tfile
		wantErr error
	}{
		{"relative", nil, tfile{path: "a"}, ErrInvalid},
		{"empty", nil, tfile{path: ""}, ErrInvalid},
		{"root", nil, tfile{path: "/", dir: true}, ErrInvalid},
		{"trailing slash", nil, tfile{path: "/a/"}, ErrInvalid},
		{"double slash", nil, tfile{path: "//a"}, ErrInvalid},
		{"dotdot", nil, tfile{path: "/a/../b"}, ErrInvalid},
		{"leading dot", nil, tfile{path: "/.hidden"}, ErrInvalid},
		{"trailing dot", nil, tfile{path: "/a."}, ErrInvalid},
		{"space", nil, tfile{path: "/a b"}, ErrInvalid},
		{"non-ASCII", nil, tfile{path: "/ä"}, ErrInvalid},
		{"LFN-only character", nil, tfile{path: "/a+b"}, ErrInvalid},
		{"too long", nil, tfile{path: "/" + long}, ErrInvalid},
		{"duplicate", []tfile{{path: "/cmdline.txt", data: []byte("x")}}, tfile{path: "/cmdline.txt"}, fs.ErrExist},
		{"duplicate other case", []tfile{{path: "/cmdline.txt"}}, tfile{path: "/CMDLINE.TXT"}, fs.ErrExist},
		{"mkdir existing", []tfile{{path: "/a/b"}}, tfile{path: "/A", dir: true}, fs.ErrExist},
		{"mkdir over file", []tfile{{path: "/a"}}, tfile{path: "/a", dir: true}, fs.ErrExist},
		{"file as parent", []tfile{{path: "/a"}}, tfile{path: "/a/b"}, ErrInvalid},
		{"full", []tfile{{path: "/a", data: make([]byte, 4_000*clusterSize)}}, tfile{path: "/b/c", data: make([]byte, 200*clusterSize)}, ErrNoSpace},
		{"larger than the file system", nil, tfile{path: "/a", data: make([]byte, 5_000*clusterSize)}, ErrNoSpace},
		{"root full", rootFiller(), tfile{path: "/one-more-long-name/x"}, ErrDirFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, before := build(t, smallSectors, tc.setup)
			var err error
			if tc.op.dir {
				err = f.Mkdir(tc.op.path)
			} else {
				err = f.AddFile(tc.op.path, tc.op.data)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			// A failed call leaves the file system as it was.
			if after := image(t, f); !bytes.Equal(before, after) {
				t.Error("failed call changed the image")
			}
		})
	}
	if _, err := New(bootSectors, "bad label!!!", testTime); !errors.Is(err, ErrInvalid) {
		t.Errorf("New with a 12-character label: %v", err)
	}
	f, _ := build(t, bootSectors, []tfile{{path: "/empty"}, {path: "/d", dir: true}})
	for p, want := range map[string]error{"/empty": ErrInvalid, "/d": ErrInvalid, "/missing": fs.ErrNotExist, "x": ErrInvalid} {
		if _, _, err := f.Extent(p); !errors.Is(err, want) {
			t.Errorf("Extent(%q) = %v, want %v", p, err, want)
		}
	}
}

// rootFiller fills the 512-entry root directory to 511 entries: the label
// and 170 names taking two long-name entries and a short entry each.
func rootFiller() []tfile {
	var files []tfile
	for i := 0; i < 170; i++ {
		files = append(files, tfile{path: "/file-with-long-name-" + string(rune('a'+i/26)) + string(rune('a'+i%26))})
	}
	return files
}

func shortOf(im *fatImage, p string) string {
	s := im.files[p].short
	return string(s[:])
}
