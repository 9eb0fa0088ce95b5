package fat

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// twoBodies returns a 100 MiB partition holding a file system low in it
// (sectors 4 to 65531) and one high in it (from 65532 on), with the boot
// sector of the one named by active at sector 0.
func twoBodies(t *testing.T, lowFiles, highFiles []tfile, active string) (part []byte, low, high *FS) {
	t.Helper()
	part = make([]byte, bootSectors*sectorSize)
	var err error
	if low, err = NewAt(4, MaxReserved, "gokrazy", testTime); err != nil {
		t.Fatal(err)
	}
	if high, err = NewAt(MaxReserved, bootSectors, "gokrazy", testTime); err != nil {
		t.Fatal(err)
	}
	addAll(t, low, lowFiles)
	addAll(t, high, highFiles)
	for _, f := range []*FS{low, high} {
		var body bytes.Buffer
		if _, err := f.WriteBodyTo(&body); err != nil {
			t.Fatal(err)
		}
		if f.BodyOffset()+int64(body.Len()) > f.Size() {
			t.Fatalf("body ends at %d, past the file system's %d bytes", f.BodyOffset()+int64(body.Len()), f.Size())
		}
		copy(part[f.BodyOffset():], body.Bytes())
	}
	if low.Size() > high.BodyOffset() {
		t.Fatalf("low body ends at %d, after the high body's FAT at %d", low.Size(), high.BodyOffset())
	}
	boot := low.BootSector()
	if active == "high" {
		boot = high.BootSector()
	}
	copy(part, boot)
	return part, low, high
}

func TestReadTwoBodies(t *testing.T) {
	lowFiles := bootFiles()
	highFiles := []tfile{
		{path: "/vmlinuz", data: randBytes(9, 5<<20+7)},
		{path: "/cmdline.txt", data: []byte("console=ttyS0 root=PARTUUID=x/PARTNROFF=2\n" + strings.Repeat(" ", 64))},
		{path: "/loader/entries/gokrazy.conf", data: []byte("title e1kbox\rlinux /vmlinuz\roptions x")},
	}
	for _, tc := range []struct {
		active string
		files  []tfile
	}{{"low", lowFiles}, {"high", highFiles}} {
		t.Run(tc.active, func(t *testing.T) {
			part, low, high := twoBodies(t, lowFiles, highFiles, tc.active)
			want := low
			if tc.active == "high" {
				want = high
			}
			im, err := Read(bytes.NewReader(part))
			if err != nil {
				t.Fatal(err)
			}
			if im.BodyOffset() != want.BodyOffset() || im.End() != want.Size() {
				t.Errorf("body %d..%d, want %d..%d", im.BodyOffset(), im.End(), want.BodyOffset(), want.Size())
			}
			n := 0
			for _, tf := range tc.files {
				if tf.dir {
					continue
				}
				n++
				got, err := im.ReadFile(strings.ToUpper(tf.path)) // names are case-insensitive
				if err != nil {
					t.Errorf("%s: %v", tf.path, err)
					continue
				}
				if !bytes.Equal(got, tf.data) {
					t.Errorf("%s: read back %d bytes that differ from the %d written", tf.path, len(got), len(tf.data))
				}
				if len(tf.data) == 0 {
					continue
				}
				off, l, err := im.Extent(tf.path)
				wOff, wLen, _ := want.Extent(tf.path)
				if err != nil || off != wOff || l != wLen {
					t.Errorf("%s: Extent = %d, %d, %v; the writer says %d, %d", tf.path, off, l, err, wOff, wLen)
				}
				if !strings.HasPrefix(tf.path, "/vmlinuz") && !strings.HasPrefix(tf.path, "/cmdline") && !strings.HasPrefix(tf.path, "/loader") {
					continue // gokrazy's reader only tells apart the files it needs
				}
				// gokrazy's device-side reader finds the same bytes.
				dOff, dLen, err := deviceExtent(part, tf.path)
				if err != nil || dOff != off || dLen != l {
					t.Errorf("%s: gokrazy's reader finds %d, %d, %v; want %d, %d", tf.path, dOff, dLen, err, off, l)
				}
			}
			files := 0
			for _, f := range im.Files() {
				if !f.Dir {
					files++
				}
			}
			if files != n {
				t.Errorf("Files lists %d files, want %d: %+v", files, n, im.Files())
			}
			fsckImage(t, part)
		})
	}
}

// fsckImage runs fsck.fat read-only over a partition image.
func fsckImage(t *testing.T, part []byte) {
	t.Helper()
	fsck := needTool(t, "fsck.fat")
	if out, err := exec.Command(fsck, "-n", "-V", writeImage(t, part)).CombinedOutput(); err != nil {
		t.Errorf("fsck.fat -n -V: %v\n%s", err, out)
	}
}

func TestReproducible(t *testing.T) {
	files := bootFiles()
	_, a := build(t, bootSectors, files)
	_, b := build(t, bootSectors, files)
	if !bytes.Equal(a, b) {
		t.Error("two file systems from the same files and time differ")
	}
	files[0].data = append([]byte{}, files[0].data...)
	files[0].data[1000] ^= 1
	_, c := build(t, bootSectors, files)
	if bytes.Equal(a[39:43], c[39:43]) {
		t.Error("a changed kernel kept the volume ID")
	}
}

func TestNewAtRejects(t *testing.T) {
	for _, reserved := range []uint32{0, 2, 6, MaxReserved + 4} {
		if _, err := NewAt(reserved, bootSectors, "gokrazy", testTime); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewAt(%d) = %v, want ErrInvalid", reserved, err)
		}
	}
}

func TestReadRejects(t *testing.T) {
	_, img := build(t, smallSectors, bootFiles())
	for name, mutate := range map[string]func(b []byte){
		"no signature":     func(b []byte) { b[510] = 0 },
		"no sectors/clust": func(b []byte) { b[13] = 0 },
		"tiny FAT":         func(b []byte) { le.PutUint16(b[22:], 1) },
		"loop in chain": func(b []byte) {
			im, _ := readImage(img)
			off := im.files["/vmlinuz"].offset
			c := (int(off)-im.dataOff)/(im.spc*512) + 2
			le.PutUint16(b[im.reserved*512+2*c:], 0)
		},
	} {
		b := append([]byte{}, img...)
		mutate(b)
		im, err := Read(bytes.NewReader(b))
		if err == nil {
			_, err = im.ReadFile("/vmlinuz")
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzRead(f *testing.F) {
	_, img := build(f, smallSectors, bootFiles()[:4])
	f.Add(img[:64<<10])
	f.Fuzz(func(t *testing.T, b []byte) {
		im, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, fi := range im.Files() {
			if !fi.Dir {
				im.ReadFile(fi.Path)
				im.Extent(fi.Path)
			}
		}
	})
}
