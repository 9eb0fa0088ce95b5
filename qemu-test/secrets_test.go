package qemutest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBuildKeepsThePasswordPrivate: the build outputs that hold the
// gokrazy password (the manifest, the root file system, the disk image)
// are readable by their owner only.
func TestBuildKeepsThePasswordPrivate(t *testing.T) {
	bs := theBuilds(t)
	for _, f := range []string{filepath.Join(filepath.Dir(bs.good.Root), "manifest.json"), bs.good.Root, bs.good.Image} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %v: the build host's other users can read the password", f, m)
		}
	}
	st, err := os.Stat(bs.good.Boot)
	if err != nil || st.Mode().Perm()&0o044 == 0 {
		t.Errorf("boot.img: %v, %v (it holds no secret and stays readable)", st, err)
	}
}
