package capture

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/testenv"
)

// writeFile writes frames (n bytes each, payload = index) into a pcapng.
func writeFile(t testing.TB, frames [][]byte, snaplen int) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, "eth1", snaplen, "e1kbox test")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1780000000, 123456789)
	for i, f := range frames {
		before := w.Written()
		if err := w.WritePacket(t0.Add(time.Duration(i)*time.Millisecond), f, len(f)); err != nil {
			t.Fatal(err)
		}
		if got := w.Written() - before; got != w.PacketSize(len(f)) {
			t.Fatalf("packet %d took %d bytes, PacketSize says %d", i, got, w.PacketSize(len(f)))
		}
	}
	if int64(buf.Len()) != w.Written() {
		t.Fatalf("Written %d, buffer %d", w.Written(), buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	frames := [][]byte{udpFrame(0, 60), udpFrame(1, 61), udpFrame(2, 1514), udpFrame(3, 63)}
	b := writeFile(t, frames, 100)
	f, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.LinkType != LinkEthernet || f.Snaplen != 100 || f.Interface != "eth1" || len(f.Packets) != 4 {
		t.Fatalf("file %+v", f)
	}
	for i, p := range f.Packets {
		want := frames[i][:min(100, len(frames[i]))]
		if !bytes.Equal(p.Data, want) || p.Orig != len(frames[i]) {
			t.Errorf("packet %d: %d bytes of %d, want %d of %d", i, len(p.Data), p.Orig, len(want), len(frames[i]))
		}
		if want := time.Unix(1780000000, 123456789).Add(time.Duration(i) * time.Millisecond); !p.Time.Equal(want) {
			t.Errorf("packet %d at %v, want %v", i, p.Time, want)
		}
	}
}

// udpFrame is an Ethernet/IPv4/UDP frame of n bytes whose payload starts
// with i (big endian), from 10.9.0.1:4000 to 10.9.0.2:5000.
func udpFrame(i, n int) []byte {
	f := frame("10.9.0.1", "10.9.0.2", 17, 4000, 5000, 0)
	f[14+2], f[14+3] = byte((n-14)>>8), byte(n-14)
	f[14+24], f[14+25] = byte((n-34)>>8), byte(n-34)
	for len(f) < n {
		f = append(f, 0)
	}
	f[42], f[43], f[44], f[45] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return f[:n]
}

// TestTcpdumpReads checks that tcpdump opens a written file and sees every
// frame with its addresses.
func TestTcpdumpReads(t *testing.T) {
	testenv.Require(t, "tcpdump")
	var frames [][]byte
	for i := range 1000 {
		frames = append(frames, udpFrame(i, 60+i%1400))
	}
	p := filepath.Join(t.TempDir(), "c.pcapng")
	if err := os.WriteFile(p, writeFile(t, frames, 65535), 0o644); err != nil {
		t.Fatal(err)
	}
	checkTcpdump(t, p, 1000)
}

// checkTcpdump runs tcpdump -r on a file and checks it shows want frames
// from 10.9.0.1.4000 to 10.9.0.2.5000, in order of their payload index.
func checkTcpdump(t *testing.T, path string, want int) {
	t.Helper()
	out, err := exec.Command("tcpdump", "-n", "-tt", "-r", path).CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, " IP ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != want {
		t.Fatalf("tcpdump shows %d IP frames, want %d:\n%s", len(lines), want, firstLines(string(out), 5))
	}
	for i, l := range lines {
		if !strings.Contains(l, "10.9.0.1.4000 > 10.9.0.2.5000: UDP") {
			t.Fatalf("frame %d: %q", i, l)
		}
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	return strings.Join(l[:min(n, len(l))], "\n")
}

func TestReadRefusesBadFiles(t *testing.T) {
	good := writeFile(t, [][]byte{udpFrame(0, 60)}, 65535)
	for name, b := range map[string][]byte{
		"empty":        {},
		"short":        good[:10],
		"cut":          good[:len(good)-4],
		"no section":   good[28+20+12:], // from the IDB on
		"bad length":   append(append([]byte{}, good[:4]...), append([]byte{0xff, 0, 0, 0}, good[8:]...)...),
		"lengths skew": append(append([]byte{}, good[:len(good)-4]...), 0, 1, 0, 0),
	} {
		if _, err := Read(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzRead: no input makes Read panic, and what Writer writes always reads
// back the same.
func FuzzRead(f *testing.F) {
	f.Add(writeFile(f, [][]byte{udpFrame(0, 60), udpFrame(1, 70)}, 65535), uint64(1))
	f.Add([]byte{}, uint64(2))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		Read(b) // must not panic
		r := rand.New(rand.NewPCG(seed, 0))
		var frames [][]byte
		for range r.IntN(5) {
			fr := make([]byte, r.IntN(200))
			for i := range fr {
				fr[i] = byte(r.Uint32())
			}
			frames = append(frames, fr)
		}
		snap := 1 + r.IntN(300)
		file, err := Read(writeFile(t, frames, snap))
		if err != nil {
			t.Fatal(err)
		}
		if len(file.Packets) != len(frames) {
			t.Fatalf("%d packets, want %d", len(file.Packets), len(frames))
		}
		for i, p := range file.Packets {
			if !bytes.Equal(p.Data, frames[i][:min(snap, len(frames[i]))]) || p.Orig != len(frames[i]) {
				t.Fatalf("packet %d differs", i)
			}
		}
	})
}
