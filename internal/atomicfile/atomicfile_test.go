package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplaceRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state")
	for _, want := range []string{"one\n", "two\n"} {
		if err := Write(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".state.tmp-*"))
	if len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Remove: stat err %v, want not exist", err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("Remove of a missing file: %v", err)
	}
}
