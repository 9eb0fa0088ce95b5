package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestIsTestboot(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    bool
	}{
		{"console=tty1 root=PARTUUID=x/PARTNROFF=1 ro init=/gokrazy/init\n" + "    ", false},
		{"console=tty1 root=PARTUUID=x/PARTNROFF=1 ro gokrazy.try_boot_inactive=1\n", true},
		{"ro gokrazy.switch_on_boot=1", false},
		{"gokrazy.try_boot_inactive=10", false},
	} {
		if got := isTestboot(tc.cmdline); got != tc.want {
			t.Errorf("isTestboot(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}

func TestLoadSpec(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "init.json")
	if err := os.WriteFile(p, []byte(`{"services":[{"path":"/user/appliance","args":["-x"],"env":["A=b"]}],"testboot_timeout":"45s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := loadSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Services) != 1 || s.Services[0].Path != "/user/appliance" || s.Services[0].Args[0] != "-x" {
		t.Errorf("services = %+v", s.Services)
	}
	if got := s.testbootTimeout(); got != 45*time.Second {
		t.Errorf("testbootTimeout = %v, want 45s", got)
	}
	if got := (&Spec{TestbootTimeout: "bogus"}).testbootTimeout(); got != 120*time.Second {
		t.Errorf("default testbootTimeout = %v, want 120s", got)
	}
	if err := os.WriteFile(p, []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSpec(p); err == nil {
		t.Error("loadSpec of broken JSON: no error")
	}
}

func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	perm, etc := filepath.Join(dir, "perm-pw"), filepath.Join(dir, "etc-pw")
	if err := os.WriteFile(etc, []byte("from-etc\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if got := readPassword(perm, etc); got != "from-etc" {
		t.Errorf("without /perm file: got %q, want from-etc", got)
	}
	if err := os.WriteFile(perm, []byte(" from-perm \n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if got := readPassword(perm, etc); got != "from-perm" {
		t.Errorf("with /perm file: got %q, want from-perm", got)
	}
}
