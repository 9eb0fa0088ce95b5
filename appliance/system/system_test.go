package system

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecordBoot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "e1kbox", "boots.json")
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var want []Boot
	for i := 0; i < MaxBoots+3; i++ {
		b := Boot{Build: "b" + string(rune('a'+i)), Time: t0.Add(time.Duration(i) * time.Minute)}
		want = append(want, b)
		got, err := RecordBoot(file, b.Build, b.Time)
		if err != nil {
			t.Fatal(err)
		}
		w := want
		if len(w) > MaxBoots {
			w = w[len(w)-MaxBoots:]
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Fatalf("boot %d: history mismatch (-want +got):\n%s", i, diff)
		}
	}
	onDisk, err := ReadBoots(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[len(want)-MaxBoots:], onDisk); diff != "" {
		t.Errorf("on disk (-want +got):\n%s", diff)
	}
}

func TestRecordBootReplacesDamagedHistory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "boots.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := RecordBoot(file, "x", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Build != "x" {
		t.Errorf("history = %+v, want one record for build x", got)
	}
}

func TestCheckPerm(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "perm", "e1kbox")
	if p := CheckPerm(dir); !p.Writable || p.Error != "" {
		t.Errorf("CheckPerm(writable dir) = %+v", p)
	}
	ro := t.TempDir()
	if err := os.Chmod(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o700)
	if os.Geteuid() == 0 {
		// root ignores permission bits; a path under a regular file fails for everyone
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o644)
		ro = filepath.Join(f, "sub")
	}
	if p := CheckPerm(ro); p.Writable || p.Error == "" {
		t.Errorf("CheckPerm(unwritable) = %+v, want not writable with an error", p)
	}
}

func TestPermProblem(t *testing.T) {
	dir := t.TempDir()
	mi := filepath.Join(dir, "mountinfo")
	os.WriteFile(mi, []byte("22 1 8:2 / / ro - squashfs /dev/root ro\n30 22 8:4 / /perm rw,relatime - ext4 /dev/sda4 rw\n"), 0o644)
	if !PermMounted(mi, "/perm") || PermMounted(mi, "/mnt") {
		t.Error("PermMounted misreads mountinfo")
	}
	p := Perm{Dir: "/perm/e1kbox", Error: "mkdir /perm/e1kbox: read-only file system"}
	if got := PermProblem(p, false); !strings.Contains(got, "not mounted") || !strings.Contains(got, "mkfs.ext4") {
		t.Errorf("unformatted: %q", got)
	}
	if got := PermProblem(p, true); !strings.Contains(got, "read-only file system") {
		t.Errorf("mounted, unwritable: %q", got)
	}
	if PermProblem(Perm{Writable: true}, true) != "" {
		t.Error("a writable /perm has a problem")
	}
}
