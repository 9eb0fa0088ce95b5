package fat

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzData backs the fuzzed file contents: file i gets fuzzData[i%256:][:size].
var fuzzData = randBytes(9, 256+255<<14)

// FuzzAddFile feeds newline-separated paths (a trailing "/" means Mkdir) with
// sizes from pairs of bytes (size = b0 << (b1 % 15)) into a near-minimal file
// system. Whatever it accepts must read back through the strict test reader
// under the same names and contents, Extent must point at the data, the
// device-side reader must find every pure-8.3 path, and failed calls must
// leave no trace.
func FuzzAddFile(f *testing.F) {
	f.Add("/vmlinuz\n/cmdline.txt\n/loader/entries/gokrazy.conf\n/EFI/BOOT/BOOTX64.EFI", []byte{200, 10, 1, 0, 20, 0, 30, 3})
	f.Add("/a/b/\n/a/B/c.txt\n/A/b\n/x.y.z\n/abcdefghijkl.mnop\n/abcdefghijkm.mnop\n/abcdef~1.mno\n/A/B/", []byte{1, 1, 2, 2, 3, 3, 0, 0, 5, 5})
	f.Add("/big\n/big2\n/big3/x", []byte{255, 14, 255, 14, 255, 12})
	f.Add("/"+strings.Repeat("n", 255)+"\n/"+strings.Repeat("m", 256)+"\n/a..b\n/gokrazy\n/bad name\n//x\n/.x", []byte{7})
	f.Fuzz(func(t *testing.T, paths string, sizes []byte) {
		fsys, err := New(smallSectors, "gokrazy", testTime)
		if err != nil {
			t.Fatal(err)
		}
		var accepted []tfile
		for i, op := range strings.SplitN(paths, "\n", 300) {
			tf := tfile{path: op}
			if len(op) > 1 && strings.HasSuffix(op, "/") {
				tf = tfile{path: op[:len(op)-1], dir: true}
				err = fsys.Mkdir(tf.path)
			} else {
				size := 0
				if 2*i+1 < len(sizes) {
					size = int(sizes[2*i]) << (sizes[2*i+1] % 15)
				}
				tf.data = fuzzData[i%256:][:size]
				err = fsys.AddFile(op, tf.data)
			}
			switch {
			case err == nil:
				accepted = append(accepted, tf)
			case !errors.Is(err, ErrInvalid) && !errors.Is(err, fs.ErrExist) && !errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrDirFull):
				t.Fatalf("%q: unexpected error %v", op, err)
			}
		}
		img := image(t, fsys)
		if _, replay := build(t, smallSectors, accepted); !bytes.Equal(img, replay) {
			t.Fatal("image differs from one built from the accepted calls alone")
		}
		im, err := readImage(img)
		if err != nil {
			t.Fatal(err)
		}
		canonical := canonicalPaths(accepted)
		got := map[string]string{}
		for p, s := range im.files {
			got[p] = "dir"
			if !s.isDir {
				got[p] = fmt.Sprintf("%x", sha256.Sum256(s.data))
			}
		}
		if diff := cmp.Diff(tree(canonical), got); diff != "" {
			t.Fatalf("read back (-want +got):\n%s", diff)
		}
		for _, tf := range canonical {
			if tf.dir || len(tf.data) == 0 {
				continue
			}
			off, n, err := fsys.Extent(tf.path)
			if err != nil || off != im.files[tf.path].offset || n != int64(len(tf.data)) {
				t.Fatalf("%s: Extent = %d+%d, %v; reader has offset %d", tf.path, off, n, err, im.files[tf.path].offset)
			}
			if !deviceFindable(tf.path) {
				continue
			}
			if doff, dn, err := deviceExtent(img, tf.path); err != nil || doff != off || dn != n {
				t.Fatalf("%s: device reader gives %d+%d, %v; Extent %d+%d", tf.path, doff, dn, err, off, n)
			}
		}
	})
}

// canonicalPaths rewrites the paths to the case the file system keeps: that
// of the call that created each directory.
func canonicalPaths(files []tfile) []tfile {
	real := map[string]string{}
	var out []tfile
	for _, tf := range files {
		cur := ""
		for _, c := range strings.Split(tf.path[1:], "/") {
			next := cur + "/" + c
			if r, ok := real[strings.ToLower(next)]; ok {
				next = r
			}
			real[strings.ToLower(next)] = next
			cur = next
		}
		tf.path = cur
		out = append(out, tf)
	}
	return out
}

// deviceFindable reports whether every component of p is a pure 8.3 name
// (no extension, or exactly three characters of one) other than the label,
// which the device-side reader must find.
func deviceFindable(p string) bool {
	for i, c := range strings.Split(p[1:], "/") {
		base, ext, dot := strings.Cut(c, ".")
		if len(base) > 8 || dot && len(ext) != 3 || strings.Contains(ext, ".") || i == 0 && c == "gokrazy" {
			return false
		}
	}
	return true
}
