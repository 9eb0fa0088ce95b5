package squashfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/testenv"

	"github.com/google/go-cmp/cmp"
)

var testTime = time.Date(2026, 7, 1, 12, 34, 56, 0, time.UTC)

// item is one call on an FS.
type item struct {
	kind   string // "dir", "file", "symlink"
	path   string
	mode   fs.FileMode
	data   []byte
	target string
}

// build applies items in order and returns the tree a reader should see,
// including implicitly created parents and the root.
func build(t testing.TB, mtime time.Time, items []item) (*FS, map[string]entry) {
	t.Helper()
	f := New(mtime)
	want := map[string]entry{"/": {Kind: "dir", Mode: fs.ModeDir | 0o755}}
	for _, it := range items {
		var err error
		p := path.Clean("/" + it.path)
		switch it.kind {
		case "dir":
			err = f.Mkdir(it.path, it.mode)
			want[p] = entry{Kind: "dir", Mode: fs.ModeDir | it.mode}
		case "file":
			err = f.AddFile(it.path, it.mode, it.data)
			want[p] = fileEntry(it.mode, it.data)
		case "symlink":
			err = f.AddSymlink(it.path, it.target)
			want[p] = entry{Kind: "symlink", Mode: fs.ModeSymlink | 0o777, Target: it.target}
		}
		if err != nil {
			t.Fatalf("%s %s: %v", it.kind, it.path, err)
		}
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := want[d]; !ok {
				want[d] = entry{Kind: "dir", Mode: fs.ModeDir | 0o755}
			}
		}
	}
	return f, want
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}

// compressible returns n bytes of text-like data that zlib shrinks a lot.
func compressible(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %d: the quick brown fox jumps over the lazy dog\n", i%1000)
	}
	return b.Bytes()[:n]
}

// rootfsItems resembles a gokrazy root file system plus the edge cases: files
// at block boundaries, an all-zero block, empty files, special mode bits, a
// directory with 300 entries (two headers) and one whose listing spans many
// metadata blocks (extended inode with an index).
func rootfsItems() []item {
	items := []item{
		{kind: "file", path: "/gokrazy/init", mode: 0o755, data: randomBytes(1, 3<<20+12345)},
		{kind: "file", path: "/gokrazy/dhcp", mode: 0o755, data: compressible(5<<20 + 7)},
		{kind: "file", path: "/user/mixed", mode: 0o755, data: append(compressible(200<<10), randomBytes(2, 300<<10)...)},
		{kind: "file", path: "/etc/hostname", mode: 0o644, data: []byte("e1kbox\n")},
		{kind: "file", path: "/etc/hosts", mode: 0o644, data: []byte("127.0.0.1 localhost\n::1 localhost\n")},
		{kind: "file", path: "etc/gokr-pw.txt", mode: 0o400, data: []byte("secret")},
		{kind: "file", path: "/etc/http-port.txt", mode: 0o444, data: []byte("80")},
		{kind: "file", path: "/etc/ssl/ca-bundle.pem", mode: 0o444, data: compressible(200 << 10)},
		{kind: "file", path: "/etc/empty", mode: 0o644, data: nil},
		{kind: "symlink", path: "/etc/resolv.conf", target: "/tmp/resolv.conf"},
		{kind: "symlink", path: "/var", target: "/perm/var"},
		{kind: "symlink", path: "/lib/relative", target: "../etc/hosts"},
		{kind: "dir", path: "/perm", mode: 0o755},
		{kind: "dir", path: "/tmp", mode: fs.ModeSticky | 0o777},
		{kind: "dir", path: "/mnt/data", mode: 0o700},
		{kind: "dir", path: "/etc", mode: 0o755}, // after its files: gives an implicit parent its mode
		{kind: "file", path: "/bin/suid", mode: 0o755 | fs.ModeSetuid | fs.ModeSetgid, data: []byte("#!/bin/sh\n")},
		{kind: "file", path: "/blocks/exact", mode: 0o644, data: randomBytes(3, 128<<10)},
		{kind: "file", path: "/blocks/plus1", mode: 0o644, data: randomBytes(4, 128<<10+1)},
		{kind: "file", path: "/blocks/two", mode: 0o644, data: compressible(256 << 10)},
		{kind: "file", path: "/blocks/one", mode: 0o644, data: []byte{42}},
		{kind: "file", path: "/blocks/zeros", mode: 0o644, data: make([]byte, 300<<10)},
	}
	for i := range 30 {
		items = append(items, item{kind: "file", path: fmt.Sprintf("/lib/modules/7.1.3/kernel/drivers/mod%02d.ko", i), mode: 0o644, data: compressible(1000 + i)})
	}
	for i := range 300 {
		items = append(items, item{kind: "file", path: fmt.Sprintf("/many/f%03d", (i*7)%300), mode: 0o644, data: []byte(fmt.Sprint(i))})
	}
	items = append(items, item{kind: "dir", path: "/many/sub", mode: 0o755})
	for i := range 2500 {
		items = append(items, item{kind: "file", path: fmt.Sprintf("/huge/%s-%04d", strings.Repeat("long-name", 5), i), mode: 0o644})
	}
	return items
}

func writeImage(t testing.TB, f *FS) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := f.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) || n%4096 != 0 {
		t.Fatalf("WriteTo returned %d, wrote %d bytes; want equal multiples of 4096", n, buf.Len())
	}
	return buf.Bytes()
}

type treeCase struct {
	name  string
	items []item
}

func treeCases() []treeCase {
	return []treeCase{
		{"empty", nil},
		{"one empty file", []item{{kind: "file", path: "/a", mode: 0o644}}},
		{"empty dirs", []item{{kind: "dir", path: "/a/b/c", mode: 0o700}, {kind: "dir", path: "/d", mode: 0o555}}},
		{"rootfs", rootfsItems()},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range treeCases() {
		t.Run(tt.name, func(t *testing.T) {
			f, want := build(t, testTime, tt.items)
			r, err := readImageStats(writeImage(t, f), uint32(testTime.Unix()))
			if err != nil {
				t.Fatalf("readImage: %v", err)
			}
			if diff := cmp.Diff(want, r.tree); diff != "" {
				t.Errorf("tree mismatch (-want +got):\n%s", diff)
			}
			if tt.name != "rootfs" {
				return
			}
			// The edge cases the tree was made for must show up in the image.
			if d := r.dirs["/huge"]; !d.Extended || d.Index < 10 {
				t.Errorf("/huge: %+v, want an extended directory with an index", d)
			}
			if d := r.dirs["/many"]; d.Headers < 2 {
				t.Errorf("/many: %+v, want several headers for 301 entries", d)
			}
			if r.raw == 0 || r.zipped == 0 || r.zMeta == 0 {
				t.Errorf("%d raw and %d compressed data blocks, %d compressed metadata blocks; want some of each", r.raw, r.zipped, r.zMeta)
			}
		})
	}
}

// TestManyInodes checks a directory of 40000 entries next to siblings whose
// inode numbers are 40000 apart.
func TestManyInodes(t *testing.T) {
	items := []item{
		{kind: "file", path: "/a/first", mode: 0o644, data: []byte("1")},
		{kind: "file", path: "/a/zlast", mode: 0o644, data: []byte("2")},
	}
	for i := range 40000 {
		items = append(items, item{kind: "file", path: fmt.Sprintf("/a/middle/%05d", i), mode: 0o644})
	}
	f, want := build(t, testTime, items)
	img := writeImage(t, f)
	got, err := readImage(img, uint32(testTime.Unix()))
	if err != nil {
		t.Fatalf("readImage: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tree mismatch (-want +got):\n%s", diff)
	}
	checkUnsquashfsList(t, img, want)
}

func TestDeterministic(t *testing.T) {
	items := rootfsItems()
	reversed := make([]item, 0, len(items))
	for i := len(items) - 1; i >= 0; i-- {
		reversed = append(reversed, items[i])
	}
	// Mkdir of /etc must come after its files to set an implicit parent's
	// mode; in reverse order it comes first, which is equally valid.
	f1, _ := build(t, testTime, items)
	f2, _ := build(t, testTime, reversed)
	img1, img2 := writeImage(t, f1), writeImage(t, f2)
	if again := writeImage(t, f1); !bytes.Equal(img1, again) {
		t.Error("writing the same FS twice gave different images")
	}
	if !bytes.Equal(img1, img2) {
		t.Error("the same tree added in a different order gave a different image")
	}
	f3, _ := build(t, testTime.Add(time.Second), items)
	if bytes.Equal(img1, writeImage(t, f3)) {
		t.Error("a different modification time gave the same image")
	}
}

func TestErrors(t *testing.T) {
	setup := func(t *testing.T) *FS {
		t.Helper()
		f := New(testTime)
		for _, err := range []error{
			f.AddFile("/etc/hosts", 0o644, []byte("x")),
			f.Mkdir("/perm", 0o755),
			f.AddSymlink("/var", "/perm/var"),
			f.AddFile("/lib/modules/a.ko", 0o644, nil), // /lib and /lib/modules implicit
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	long := strings.Repeat("n", 256)
	tests := []struct {
		name    string
		op      func(f *FS) error
		wantErr error // nil: must succeed
	}{
		{"file duplicate", func(f *FS) error { return f.AddFile("/etc/hosts", 0o644, nil) }, fs.ErrExist},
		{"file over dir", func(f *FS) error { return f.AddFile("/perm", 0o644, nil) }, fs.ErrExist},
		{"symlink over file", func(f *FS) error { return f.AddSymlink("/etc/hosts", "x") }, fs.ErrExist},
		{"dir over file", func(f *FS) error { return f.Mkdir("/etc/hosts", 0o755) }, fs.ErrExist},
		{"dir over symlink", func(f *FS) error { return f.Mkdir("/var", 0o755) }, fs.ErrExist},
		{"explicit dir twice", func(f *FS) error { return f.Mkdir("/perm", 0o700) }, fs.ErrExist},
		{"implicit dir", func(f *FS) error { return f.Mkdir("/lib/modules", 0o700) }, nil},
		{"implicit dir with ModeDir", func(f *FS) error { return f.Mkdir("lib", fs.ModeDir|0o755) }, nil},
		{"file below file", func(f *FS) error { return f.AddFile("/etc/hosts/x", 0o644, nil) }, ErrNotDir},
		{"dir below symlink", func(f *FS) error { return f.Mkdir("/var/log", 0o755) }, ErrNotDir},
		{"deep below file", func(f *FS) error { return f.AddSymlink("/etc/hosts/a/b", "x") }, ErrNotDir},
		{"root", func(f *FS) error { return f.Mkdir("/", 0o755) }, fs.ErrInvalid},
		{"empty", func(f *FS) error { return f.AddFile("", 0o644, nil) }, fs.ErrInvalid},
		{"dot", func(f *FS) error { return f.AddFile("/a/./b", 0o644, nil) }, fs.ErrInvalid},
		{"dotdot", func(f *FS) error { return f.AddFile("/a/../b", 0o644, nil) }, fs.ErrInvalid},
		{"double slash", func(f *FS) error { return f.AddFile("/a//b", 0o644, nil) }, fs.ErrInvalid},
		{"trailing slash", func(f *FS) error { return f.Mkdir("/a/", 0o755) }, fs.ErrInvalid},
		{"two leading slashes", func(f *FS) error { return f.Mkdir("//a", 0o755) }, fs.ErrInvalid},
		{"NUL", func(f *FS) error { return f.AddFile("/a\x00b", 0o644, nil) }, fs.ErrInvalid},
		{"name of 256 bytes", func(f *FS) error { return f.AddFile("/d/"+long, 0o644, nil) }, nil},
		{"name of 257 bytes", func(f *FS) error { return f.AddFile("/d/"+long+"x", 0o644, nil) }, fs.ErrInvalid},
		{"file with ModeDir", func(f *FS) error { return f.AddFile("/x", fs.ModeDir|0o755, nil) }, fs.ErrInvalid},
		{"dir with ModeSymlink", func(f *FS) error { return f.Mkdir("/x", fs.ModeSymlink|0o755) }, fs.ErrInvalid},
		{"file with ModeAppend", func(f *FS) error { return f.AddFile("/x", fs.ModeAppend|0o644, nil) }, fs.ErrInvalid},
		{"empty target", func(f *FS) error { return f.AddSymlink("/x", "") }, fs.ErrInvalid},
		{"target with NUL", func(f *FS) error { return f.AddSymlink("/x", "a\x00") }, fs.ErrInvalid},
		{"target of 4096 bytes", func(f *FS) error { return f.AddSymlink("/x", strings.Repeat("t", 4096)) }, fs.ErrInvalid},
		{"target of 4095 bytes", func(f *FS) error { return f.AddSymlink("/x", strings.Repeat("t", 4095)) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			before := writeImage(t, f)
			err := tt.op(f)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("got error %v, want success", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if after := writeImage(t, f); !bytes.Equal(before, after) {
				t.Error("a failed call changed the tree")
			}
		})
	}
}

func TestModTimeRange(t *testing.T) {
	for _, mt := range []time.Time{time.Unix(-1, 0), time.Unix(1<<32, 0)} {
		if _, err := New(mt).WriteTo(&bytes.Buffer{}); err == nil {
			t.Errorf("WriteTo with mtime %v succeeded, want an error", mt)
		}
	}
	if _, err := New(time.Unix(1<<32-1, 0)).WriteTo(&bytes.Buffer{}); err != nil {
		t.Errorf("WriteTo with the largest 32-bit mtime: %v", err)
	}
}

type failWriter struct{ left int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errors.New("disk full")
	}
	w.left -= len(p)
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	f, _ := build(t, testTime, []item{{kind: "file", path: "/a", mode: 0o644, data: randomBytes(5, 200<<10)}})
	n, err := f.WriteTo(&failWriter{left: 1000})
	if err == nil || n != 1000 {
		t.Errorf("WriteTo = %d, %v; want 1000 and an error", n, err)
	}
}

// ciRequired fails the test when CI=true, otherwise skips it.
func ciRequired(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Unavailable(t, fmt.Sprintf(format, args...))
}

// TestReaderRejects makes sure the test reader is strict enough to catch
// broken images, so the round-trip tests mean something.
func TestReaderRejects(t *testing.T) {
	f, _ := build(t, testTime, []item{
		{kind: "file", path: "/d/f", mode: 0o644, data: []byte("x")},
		{kind: "file", path: "/d/g", mode: 0o644, data: compressible(300 << 10)},
	})
	img := writeImage(t, f)
	if _, err := readImage(img, uint32(testTime.Unix())); err != nil {
		t.Fatalf("readImage of the intact image: %v", err)
	}
	dirStart := int(binary.LittleEndian.Uint64(img[72:]))
	tests := []struct {
		name    string
		corrupt func(b []byte) []byte
	}{
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"flags", func(b []byte) []byte { b[24] |= 0x40; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-4096] }},
		{"wrong mtime", func(b []byte) []byte { b[8]++; return b }},
		{"data block", func(b []byte) []byte { b[superSize+10] ^= 0xff; return b }},
		{"directory table", func(b []byte) []byte { b[dirStart+2+4] ^= 0x10; return b }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readImage(tt.corrupt(bytes.Clone(img)), uint32(testTime.Unix())); err == nil {
				t.Error("readImage accepted a corrupted image")
			}
		})
	}
}
