package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"e1kbox/internal/testenv"
)

func TestGUID(t *testing.T) {
	s := "60c24cc1-f3f9-427a-8199-202db7930001"
	g, err := ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.String(); got != s {
		t.Errorf("round trip = %s, want %s", got, s)
	}
	// mixed endian: the first field is stored little-endian
	if g[0] != 0xc1 || g[3] != 0x60 || g[8] != 0x81 {
		t.Errorf("on-disk bytes % x", g[:])
	}
	for _, bad := range []string{"", "60c24cc1f3f9427a8199202db7930001", "60c24cc1-f3f9-427a-8199-202db79300zz"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) succeeded", bad)
		}
	}
	if got := RootCmdline(0x202db793, 3); got != "PARTUUID=60c24cc1-f3f9-427a-8199-202db7930001/PARTNROFF=2" {
		t.Errorf("RootCmdline = %s", got)
	}
}

func TestLayoutTooSmall(t *testing.T) {
	if _, err := NewLayout(MinDiskBytes-SectorSize, 1); err == nil {
		t.Error("NewLayout accepted a disk below the minimum")
	}
}

// TestTables writes the tables onto a sparse file and checks them with our
// reader and with sgdisk and fdisk, the independent tools.
func TestTables(t *testing.T) {
	const size = 2 << 30
	l, err := NewLayout(size, HostID("e1kbox"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteTables(f); err != nil {
		t.Fatal(err)
	}
	parts, err := ReadGPTPartitions(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 4 {
		t.Fatalf("got %d partitions, want 4", len(parts))
	}
	want := []struct{ first, last int64 }{
		{BootStart, BootStart + BootSectors - 1},
		{RootAStart, RootAStart + RootSectors - 1},
		{RootBStart, RootBStart + RootSectors - 1},
		{PermStart, l.DiskSectors - 1 - 34},
	}
	for i, p := range parts {
		if p.First != want[i].first || p.Last != want[i].last {
			t.Errorf("partition %d: %d-%d, want %d-%d", i+1, p.First, p.Last, want[i].first, want[i].last)
		}
		if got, w := p.GUID.String(), PartitionGUID(HostID("e1kbox"), i+1); got != w {
			t.Errorf("partition %d GUID %s, want %s", i+1, got, w)
		}
	}
	if parts[0].Type != typeESP || parts[1].Type != typeRootAMD64 {
		t.Errorf("partition types %v %v", parts[0].Type, parts[1].Type)
	}

	testenv.Require(t, "sgdisk")
	sgdisk, _ := exec.LookPath("sgdisk")
	out, err := exec.Command(sgdisk, "--verify", p).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Errorf("sgdisk --verify: %v\n%s", err, out)
	}
	out, err = exec.Command(sgdisk, "--info=1", p).CombinedOutput()
	if err != nil || !strings.Contains(strings.ToLower(string(out)), strings.ToLower(PartitionGUID(HostID("e1kbox"), 1))) {
		t.Errorf("sgdisk --info=1 does not show partition 1's GUID: %v\n%s", err, out)
	}
	// The hybrid MBR: partition 1 (FAT, bootable), then the protective 0xEE.
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if raw[446] != 0x80 || raw[446+4] != 0x0C || raw[462+4] != 0xEE || raw[510] != 0x55 || raw[511] != 0xAA {
		t.Errorf("hybrid MBR entries wrong: % x", raw[446:512])
	}
	if got := uint32(raw[440]) | uint32(raw[441])<<8 | uint32(raw[442])<<16 | uint32(raw[443])<<24; got != HostID("e1kbox") {
		t.Errorf("disk signature %08x, want the host ID %08x", got, HostID("e1kbox"))
	}
}

func TestBootCode(t *testing.T) {
	loader := make([]byte, 446)
	for i := range loader {
		loader[i] = byte(i)
	}
	b, err := BootCode(loader, 8229, 40553, 0x202db793)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 446 {
		t.Fatalf("len = %d", len(b))
	}
	le := func(o int) uint32 { return uint32(b[o]) | uint32(b[o+1])<<8 | uint32(b[o+2])<<16 | uint32(b[o+3])<<24 }
	if le(432) != 8229 || le(436) != 40553 || le(440) != 0x202db793 || b[444] != 0 || b[445] != 0 {
		t.Errorf("patched fields wrong: % x", b[428:])
	}
	if b[431] != 431&0xff {
		t.Error("boot code before offset 432 not preserved")
	}
	if _, err := BootCode(loader[:100], 1, 2, 3); err == nil {
		t.Error("short loader accepted")
	}
}
