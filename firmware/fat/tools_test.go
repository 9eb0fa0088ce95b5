package fat

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"e1kbox/internal/testenv"

	"github.com/google/go-cmp/cmp"
)

// missing reports an unmet test requirement: fatal under CI=true, a skip
// otherwise.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Unavailable(t, "requirement missing: "+fmt.Sprintf(format, args...))
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s: %v", name, err)
	}
	return p
}

// writeImage writes img to a file in a temporary directory.
func writeImage(t *testing.T, img []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "boot.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tree returns every path the files create (parents included), mapped to
// "dir" or the hex SHA-256 of the content.
func tree(files []tfile) map[string]string {
	m := map[string]string{}
	for _, tf := range files {
		parts := strings.Split(tf.path[1:], "/")
		for i := 1; i < len(parts); i++ {
			m["/"+strings.Join(parts[:i], "/")] = "dir"
		}
		if tf.dir {
			m[tf.path] = "dir"
		} else {
			m[tf.path] = fmt.Sprintf("%x", sha256.Sum256(tf.data))
		}
	}
	return m
}

func TestFsck(t *testing.T) {
	fsck := needTool(t, "fsck.fat")
	for _, tc := range []struct {
		name    string
		sectors uint32
		files   []tfile
	}{
		{"boot partition", bootSectors, bootFiles()},
		{"small", smallSectors, bootFiles()},
		{"odd size", 204_801, bootFiles()},
		{"empty", smallSectors, nil},
		{"full root", smallSectors, rootFiller()},
		{"big subdirectory", bootSectors, bigDir()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, img := build(t, tc.sectors, tc.files)
			p := writeImage(t, img)
			out, err := exec.Command(fsck, "-n", "-V", p).CombinedOutput()
			if err != nil {
				t.Fatalf("fsck.fat -n -V: %v\n%s", err, out)
			}
			// Any warning would add lines to the two pass lines and the summary.
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 4 || !strings.HasPrefix(lines[3], p+": ") {
				t.Fatalf("fsck.fat -n -V reported more than the summary:\n%s", out)
			}
			// fsck.fat counts the volume label as a file.
			want := fmt.Sprintf("%s: %d files, %d/%d clusters", p, len(tree(tc.files))+1, f.usedClusters(), f.clusters)
			if lines[3] != want {
				t.Errorf("fsck.fat summary %q, want %q", lines[3], want)
			}
		})
	}
}

// bigDir makes a subdirectory that spans several clusters.
func bigDir() []tfile {
	var files []tfile
	for i := 0; i < 300; i++ {
		files = append(files, tfile{path: fmt.Sprintf("/overlays/overlay-number-%03d.dtbo", i), data: []byte{byte(i)}})
	}
	return files
}

func TestMtools(t *testing.T) {
	mdir, mcopy, mlabel := needTool(t, "mdir"), needTool(t, "mcopy"), needTool(t, "mlabel")
	files := append(bootFiles(), bigDir()...)
	_, img := build(t, bootSectors, files)
	p := writeImage(t, img)
	// Keep a user's mtools configuration out of the way.
	env := append(os.Environ(), "MTOOLSRC=/dev/null")

	cmd := exec.Command(mdir, "-i", p, "-/", "-b", "::/")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mdir: %v", err)
	}
	var got, want []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		got = append(got, strings.TrimSuffix(strings.TrimPrefix(l, "::"), "/"))
	}
	for path := range tree(files) {
		want = append(want, path)
	}
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mdir listing (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
	for i, tf := range files {
		if tf.dir {
			continue
		}
		dst := filepath.Join(dir, fmt.Sprint(i))
		cmd := exec.Command(mcopy, "-n", "-i", p, "::"+tf.path, dst)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mcopy %s: %v\n%s", tf.path, err, out)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, tf.data) {
			t.Errorf("mcopy %s: %d bytes differ from the %d written", tf.path, len(b), len(tf.data))
		}
	}

	cmd = exec.Command(mlabel, "-i", p, "-s", "::")
	cmd.Env = env
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("mlabel: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "Volume label is gokrazy" {
		t.Errorf("mlabel -s: %q", got)
	}
}
