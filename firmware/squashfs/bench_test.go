package squashfs

import (
	"fmt"
	"io"
	"os"
	"testing"
)

// BenchmarkWriteTo writes an ~18 MiB gokrazy-like tree whose binaries are
// copies of the test binary (real Go machine code, which compresses like the
// firmware's programs).
func BenchmarkWriteTo(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		b.Fatal(err)
	}
	f := New(testTime)
	total := 0
	add := func(p string, mode os.FileMode, data []byte) {
		if err := f.AddFile(p, mode, data); err != nil {
			b.Fatal(err)
		}
		total += len(data)
	}
	for i := 0; total < 18<<20; i++ {
		add(fmt.Sprintf("/gokrazy/prog%d", i), 0o755, bin[:min(len(bin), 18<<20-total)])
	}
	for i := range 30 {
		add(fmt.Sprintf("/lib/modules/7.1.3/kernel/mod%02d.ko", i), 0o644, compressible(20000+i))
	}
	add("/etc/ssl/ca-bundle.pem", 0o444, compressible(220<<10))
	add("/etc/hostname", 0o644, []byte("e1kbox\n"))
	if err := f.AddSymlink("/var", "/perm/var"); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(total))
	var size int64
	for b.Loop() {
		if size, err = f.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)/float64(total), "image/input")
}
