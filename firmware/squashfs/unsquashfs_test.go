package squashfs

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func unsquashfs(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("unsquashfs")
	if err != nil {
		ciRequired(t, "unsquashfs (squashfs-tools) not installed: %v", err)
	}
	return p
}

func writeTemp(t *testing.T, img []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "root.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// lsMode formats a mode the way ls -l (and unsquashfs -lls) does.
func lsMode(m fs.FileMode) string {
	b := []byte("-rwxrwxrwx")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	}
	for i := range 9 {
		if m&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	special := func(bit fs.FileMode, i int, set, unset byte) {
		if m&bit != 0 {
			b[i] = map[bool]byte{true: set, false: unset}[b[i] != '-']
		}
	}
	special(fs.ModeSetuid, 3, 's', 'S')
	special(fs.ModeSetgid, 6, 's', 'S')
	special(fs.ModeSticky, 9, 't', 'T')
	return string(b)
}

// checkUnsquashfsList compares `unsquashfs -lls` with want: types, modes,
// owners, file sizes, mtimes and symlink targets.
func checkUnsquashfsList(t *testing.T, img []byte, want map[string]entry) {
	t.Helper()
	cmd := exec.Command(unsquashfs(t), "-lls", writeTemp(t, img))
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs -lls: %v\n%s", err, out)
	}
	type line struct {
		Mode, Owner, Size, Time, Target string
	}
	stamp := testTime.UTC().Format("2006-01-02 15:04")
	wantLines, gotLines := map[string]line{}, map[string]line{}
	for p, e := range want {
		l := line{Mode: lsMode(e.Mode), Owner: "root/root", Time: stamp, Target: e.Target}
		if e.Kind == "file" {
			l.Size = strconv.Itoa(e.Size)
		}
		wantLines[p] = l
	}
	for _, s := range strings.Split(string(out), "\n") {
		f := strings.Fields(s)
		if len(f) < 6 || !strings.HasPrefix(f[5], "squashfs-root") {
			continue
		}
		l := line{Mode: f[0], Owner: f[1], Time: f[3] + " " + f[4]}
		if f[0][0] == '-' {
			l.Size = f[2]
		}
		if len(f) == 8 && f[6] == "->" {
			l.Target = f[7]
		}
		gotLines[path.Clean("/"+strings.TrimPrefix(f[5], "squashfs-root"))] = l
	}
	if diff := cmp.Diff(wantLines, gotLines); diff != "" {
		t.Errorf("unsquashfs -lls mismatch (-want +got):\n%s", diff)
	}
}

// walkHost reads a directory tree from the host file system, checking owners,
// link counts and mtimes on the way.
func walkHost(t *testing.T, root string) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	subdirs := map[string]uint64{}
	nlinks := map[string]uint64{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := path.Clean("/" + filepath.ToSlash(rel))
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s: owner %d:%d, want 0:0", name, st.Uid, st.Gid)
		}
		if !fi.ModTime().Equal(testTime) {
			t.Errorf("%s: mtime %v, want %v", name, fi.ModTime(), testTime)
		}
		if other, ok := inodes[st.Ino]; ok {
			t.Errorf("%s and %s share inode %d", name, other, st.Ino)
		}
		inodes[st.Ino] = name
		e := entry{Mode: fi.Mode()}
		switch {
		case fi.IsDir():
			e.Kind = "dir"
			nlinks[name] = uint64(st.Nlink)
			if name != "/" {
				subdirs[path.Dir(name)]++
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Kind = "symlink"
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if st.Nlink != 1 {
				t.Errorf("%s: nlink %d, want 1", name, st.Nlink)
			}
			e = fileEntry(fi.Mode(), data)
		}
		got[name] = e
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	for d, n := range nlinks {
		if n != 2+subdirs[d] {
			t.Errorf("%s: nlink %d with %d subdirectories", d, n, subdirs[d])
		}
	}
	return got
}

func TestUnsquashfs(t *testing.T) {
	for _, tt := range treeCases() {
		t.Run(tt.name, func(t *testing.T) {
			f, want := build(t, testTime, tt.items)
			checkUnsquashfs(t, writeImage(t, f), want)
		})
	}
}

func checkUnsquashfs(t *testing.T, img []byte, want map[string]entry) {
	checkUnsquashfsList(t, img, want)

	dest := filepath.Join(t.TempDir(), "x")
	out, err := exec.Command(unsquashfs(t), "-no-progress", "-d", dest, writeTemp(t, img)).CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs -d: %v\n%s", err, out)
	}
	if diff := cmp.Diff(want, walkHost(t, dest)); diff != "" {
		t.Errorf("extracted tree mismatch (-want +got):\n%s", diff)
	}

	// -s prints the superblock; make sure it agrees on the basics.
	out, err = exec.Command(unsquashfs(t), "-s", writeTemp(t, img)).CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs -s: %v\n%s", err, out)
	}
	for _, s := range []string{"Compression gzip", "Block size 131072", "Number of inodes " + strconv.Itoa(len(want)), "Number of ids 1"} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("unsquashfs -s lacks %q:\n%s", s, out)
		}
	}
}
