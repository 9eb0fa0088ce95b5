package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	for _, tt := range []struct {
		name string
		old  []byte // nil: no file before
		perm os.FileMode
	}{
		{"new file", nil, 0o644},
		{"replaces", []byte("old content"), 0o644},
		{"private", []byte("old"), 0o600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			path := filepath.Join(dir, "f.json")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.old != nil {
				if err := os.WriteFile(path, tt.old, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(path, []byte("new"), tt.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Errorf("content %q, %v; want \"new\"", got, err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != tt.perm {
				t.Errorf("mode %v, %v; want %v", fi.Mode().Perm(), err, tt.perm)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("directory holds %d entries, want only the file (no temporary left)", len(ents))
			}
		})
	}
}

func TestWriteFails(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "missing", "f"), nil, 0o644); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
	dir := t.TempDir()
	// A directory where the file should be: the rename fails, nothing is
	// left behind, and the error names the path.
	path := filepath.Join(dir, "d")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Write(path, []byte("new"), 0o644)
	if err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if want := "write " + path + ": "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries left in the directory, want 1 (no temporary)", len(ents))
	}
}

func TestRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v, want the file gone", err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("Remove of a missing file: %v, want nil", err)
	}
}
