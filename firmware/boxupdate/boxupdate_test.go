package boxupdate

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/bootpart"
	"e1kbox/firmware/gaf"
	"e1kbox/firmware/image"
	"e1kbox/firmware/watchdog"
)

const p1 = "60c24cc1-f3f9-427a-8199-202db7930001"

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func bootFiles(kernel uint64) bootpart.Files {
	c := []byte("console=ttyS0,115200 " + bootpart.RootArg(p1, 2) + " ro init=/gokrazy/init panic=10\n" + strings.Repeat(" ", 64))
	return bootpart.Files{"/vmlinuz": randBytes(kernel, 300_000), "/cmdline.txt": c,
		"/loader/entries/gokrazy.conf": append([]byte("title e1kbox\rlinux /vmlinuz\roptions "), c...),
		"/EFI/BOOT/BOOTX64.EFI":        randBytes(50, 9000)}
}

var code = bytes.Repeat([]byte{0xEB}, 446)

// box is a disk, a boot partition and two roots as image files, running
// the build whose boot files are given, from root 2.
type box struct {
	dev   *Devices
	state State
}

func newBox(t *testing.T, files bootpart.Files) *box {
	t.Helper()
	dir := t.TempDir()
	d := &Devices{Disk: filepath.Join(dir, "disk"), Boot: filepath.Join(dir, "p1"),
		Roots: [2]string{filepath.Join(dir, "p2"), filepath.Join(dir, "p3")}, P1GUID: p1, Active: 2}
	b, err := bootpart.Build(bootpart.Low, files)
	if err != nil {
		t.Fatal(err)
	}
	boot := make([]byte, image.BootSectors*image.SectorSize)
	copy(boot, b.BootSector)
	copy(boot[b.BodyOffset:], b.Bytes)
	mbr := append([]byte{}, code...)
	le32(mbr[432:], b.VmlinuzLBA)
	le32(mbr[436:], b.CmdlineLBA)
	for p, data := range map[string][]byte{d.Disk: append(mbr, make([]byte, 66)...), d.Boot: boot, d.Roots[0]: []byte("old root"), d.Roots[1]: make([]byte, 1<<20)} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &box{dev: d, state: State{Dir: filepath.Join(dir, "perm", "update")}}
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }

func (b *box) active(t *testing.T) bootpart.Files {
	t.Helper()
	f, err := os.Open(b.dev.Boot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := bootpart.ReadActive(f)
	if err != nil {
		t.Fatal(err)
	}
	return a.Files
}

func archive(t *testing.T, files bootpart.Files, root string, sbom string) []byte {
	t.Helper()
	b, err := bootpart.Build(bootpart.Low, files)
	if err != nil {
		t.Fatal(err)
	}
	img := append(append(append([]byte{}, b.BootSector...), make([]byte, b.BodyOffset-512)...), b.Bytes...)
	var buf bytes.Buffer
	if err := gaf.Write(&buf, map[string][]byte{gaf.Boot: img, gaf.Root: []byte(root), gaf.MBR: code,
		gaf.SBOM: []byte(`{"sbom_hash":"` + sbom + `","sbom":{}}`)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type booted struct {
	kernel  []byte
	cmdline string
}

func (b *box) engine(key ed25519.PublicKey, got chan<- booted) *Engine {
	return &Engine{Devices: b.dev, State: b.state, TmpDir: os.TempDir(), HealthTimeout: time.Second,
		PublicKey: func() ed25519.PublicKey { return key },
		Current:   func() Build { return Build{Timestamp: "old", SBOMHash: "sbom-old"} },
		TestBoot:  func(k []byte, c string) error { got <- booted{k, c}; return nil }}
}

// guard returns a guard for the box as booted with cmdline from root.
func (b *box) guard(cmdline string, root int, cur Build, healthy error, reboots *int) *Guard {
	d := *b.dev
	d.Active = root
	return &Guard{Devices: &d, State: b.state, Cmdline: cmdline, HealthTimeout: time.Second, Poll: 10 * time.Millisecond,
		Current: func(context.Context) (Build, error) { return cur, nil },
		Healthy: func(context.Context) error { return healthy },
		Reboot:  func() error { *reboots++; return nil }}
}

func equal(a, b bootpart.Files) bool { return bootpart.SameContent(a, b) && len(a) == len(b) }

func TestUpdateCommitted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		newKernel uint64
		written   bool
	}{{"new kernel", 2, true}, {"same kernel", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			old, next := bootFiles(1), bootFiles(tc.newKernel)
			b := newBox(t, old)
			got := make(chan booted, 1)
			rec, err := b.engine(nil, got).Apply(context.Background(), "test", bytes.NewReader(archive(t, next, "new root", "sbom-new")), nil)
			if err != nil {
				t.Fatal(err)
			}
			tb := <-got
			if rec.BootWritten != tc.written || rec.Outcome != Testing || rec.To.Root != 3 || rec.To.SBOMHash != "sbom-new" {
				t.Errorf("record %+v", rec)
			}
			if r, _ := os.ReadFile(b.dev.Roots[1]); !bytes.HasPrefix(r, []byte("new root")) {
				t.Errorf("root 3 holds %.10q, want the new root", r)
			}
			if !equal(b.active(t), old) {
				t.Error("the boot partition's active file system changed before the test boot")
			}
			if !bytes.Equal(tb.kernel, next["/vmlinuz"]) || !strings.Contains(tb.cmdline, bootpart.RootArg(p1, 3)) || !strings.Contains(tb.cmdline, TestbootFlag+rec.ID) {
				t.Errorf("test boot of %d bytes with %q", len(tb.kernel), tb.cmdline)
			}
			// The update's command line lacks the watchdog's parameters
			// (as gok's builds on gokrazy's kernel do): its test boot has them.
			for _, p := range watchdog.Params {
				if !strings.Contains(tb.cmdline, " "+p+" ") {
					t.Errorf("test boot without %s: %q", p, tb.cmdline)
				}
			}
			// The new build comes up healthy in its test boot.
			reboots := 0
			if err := b.guard(tb.cmdline, 3, Build{Timestamp: "new", SBOMHash: "sbom-new"}, nil, &reboots).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			last, _ := b.state.Last()
			if last == nil || last.Outcome != Committed || last.To.Timestamp != "new" || reboots != 0 {
				t.Fatalf("last = %+v, %d reboots", last, reboots)
			}
			files := b.active(t)
			if !bytes.Equal(files["/vmlinuz"], next["/vmlinuz"]) || !strings.Contains(string(files["/cmdline.txt"]), bootpart.RootArg(p1, 3)) {
				t.Error("after the commit the boot partition does not boot the new kernel on root 3")
			}
			if c, _ := b.state.Confirmed(); c == nil || c.Root != 3 || c.Timestamp != "new" {
				t.Errorf("confirmed = %+v", c)
			}
			if p, _ := b.state.Pending(); p != nil {
				t.Error("pending record left")
			}
		})
	}
}

func TestUpdateReverted(t *testing.T) {
	old, next := bootFiles(1), bootFiles(2)
	for _, tc := range []struct {
		name     string
		testboot bool // the new build's guard runs (else the box came back on the old one)
		reboots  int
		reason   string
	}{
		{"not healthy", true, 1, "not healthy within"},
		{"never came up", false, 0, "did not come up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t, old)
			got := make(chan booted, 1)
			if _, err := b.engine(nil, got).Apply(context.Background(), "test", bytes.NewReader(archive(t, next, "new root", "sbom-new")), nil); err != nil {
				t.Fatal(err)
			}
			tb := <-got
			reboots := 0
			g := b.guard(tb.cmdline, 3, Build{Timestamp: "new", SBOMHash: "sbom-new"}, errors.New("appliance health: status \"degraded\""), &reboots)
			if !tc.testboot {
				g = b.guard("root=x", 2, Build{Timestamp: "old", SBOMHash: "sbom-old"}, nil, &reboots)
			}
			err := g.Run(context.Background())
			if tc.testboot != errors.Is(err, ErrReverted) || reboots != tc.reboots {
				t.Fatalf("guard: %v, %d reboots", err, reboots)
			}
			last, _ := b.state.Last()
			if last == nil || last.Outcome != Reverted || !strings.Contains(last.Reason, tc.reason) {
				t.Fatalf("last = %+v", last)
			}
			if !equal(b.active(t), old) {
				t.Error("the boot partition does not boot the old build")
			}
		})
	}
}

func TestSignedUpdates(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	b := newBox(t, bootFiles(1))
	a := archive(t, bootFiles(2), "new root", "sbom-new")
	sig, _ := gaf.Sign(priv, bytes.NewReader(a))
	bad, _ := gaf.Sign(other, bytes.NewReader(a))
	for _, tc := range []struct {
		name string
		sig  []byte
		want error
	}{{"unsigned", nil, gaf.ErrUnsigned}, {"wrong key", bad, gaf.ErrBadSignature}} {
		_, err := b.engine(pub, make(chan booted, 1)).Apply(context.Background(), "test", bytes.NewReader(a), tc.sig)
		var r *Refused
		if !errors.Is(err, tc.want) || !errors.As(err, &r) {
			t.Errorf("%s: %v, want a refusal for %v", tc.name, err, tc.want)
		}
		if root, _ := os.ReadFile(b.dev.Roots[1]); bytes.HasPrefix(root, []byte("new")) {
			t.Fatalf("%s: the root was written", tc.name)
		}
		if p, _ := b.state.Pending(); p != nil {
			t.Fatalf("%s: a pending record was left", tc.name)
		}
	}
	got := make(chan booted, 1)
	if _, err := b.engine(pub, got).Apply(context.Background(), "test", bytes.NewReader(a), sig); err != nil {
		t.Fatalf("signed: %v", err)
	}
	<-got
}

func TestRefusesBadArchives(t *testing.T) {
	b := newBox(t, bootFiles(1))
	for name, body := range map[string][]byte{
		"not a zip":  []byte("PK? no"),
		"same build": archive(t, bootFiles(2), "x", "sbom-old"),
		"boot no fat": func() []byte {
			var w bytes.Buffer
			gaf.Write(&w, map[string][]byte{gaf.Boot: []byte("x"), gaf.Root: []byte("r"), gaf.MBR: code})
			return w.Bytes()
		}(),
	} {
		_, err := b.engine(nil, make(chan booted, 1)).Apply(context.Background(), "test", bytes.NewReader(body), nil)
		var r *Refused
		if !errors.As(err, &r) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

// TestForeignUpdate: a build another client switched to (gok) gets the
// same health gate; unhealthy, the guard switches root= back and reboots.
func TestForeignUpdate(t *testing.T) {
	for _, healthy := range []bool{true, false} {
		b := newBox(t, bootFiles(1))
		if err := b.state.Confirm(Build{Timestamp: "old", Root: 2}); err != nil {
			t.Fatal(err)
		}
		// gok switched the box to root 3
		f, _ := os.Open(b.dev.Boot)
		a, _ := bootpart.ReadActive(f)
		f.Close()
		p, _ := bootpart.InPlace(a, bootpart.RootArg(p1, 3))
		if err := ApplyWrites(b.dev, p.Commit); err != nil {
			t.Fatal(err)
		}
		var herr error
		if !healthy {
			herr = errors.New("down")
		}
		reboots := 0
		err := b.guard("", 3, Build{Timestamp: "gok"}, herr, &reboots).Run(context.Background())
		last, _ := b.state.Last()
		cmd := string(b.active(t)["/cmdline.txt"])
		if healthy {
			if err != nil || last == nil || last.Outcome != Committed || last.Client != "gokrazy" || !strings.Contains(cmd, bootpart.RootArg(p1, 3)) {
				t.Errorf("healthy gok build: %v, %+v", err, last)
			}
			continue
		}
		if !errors.Is(err, ErrReverted) || reboots != 1 || last.Outcome != Reverted || !strings.Contains(cmd, bootpart.RootArg(p1, 2)) {
			t.Errorf("unhealthy gok build: %v, %d reboots, %+v, cmdline %q", err, reboots, last, cmd)
		}
	}
}

func TestParseRoot(t *testing.T) {
	g, n, err := ParseRoot("console=tty1 root=PARTUUID=60C24CC1-f3f9-427a-8199-202db7930001/PARTNROFF=2 ro")
	if err != nil || g != p1 || n != 3 {
		t.Errorf("ParseRoot = %q, %d, %v", g, n, err)
	}
	if _, _, err := ParseRoot("root=/dev/sda2"); err == nil {
		t.Error("root=/dev/sda2 parsed")
	}
}
