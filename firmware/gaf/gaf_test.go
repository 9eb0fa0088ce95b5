package gaf

import (
	"archive/zip"
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"e1kbox/internal/testenv"
)

func members() map[string][]byte {
	return map[string][]byte{Boot: bytes.Repeat([]byte("b"), 5000), Root: bytes.Repeat([]byte("r"), 9000),
		MBR: bytes.Repeat([]byte{0x90}, MBRSize), SBOM: []byte(`{"sbom_hash":"x"}`)}
}

func archive(t testing.TB, m map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	m := members()
	b := archive(t, m)
	if !bytes.Equal(b, archive(t, m)) {
		t.Error("the same members gave two different archives")
	}
	a, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range m {
		got, err := a.ReadAll(n)
		if err != nil || !bytes.Equal(got, want) || a.Size(n) != int64(len(want)) {
			t.Errorf("%s: %d bytes, %v; want %d", n, len(got), err, len(want))
		}
	}
	// Stored, like gok's: the members are readable at fixed offsets.
	zr, _ := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	for _, f := range zr.File {
		if f.Method != zip.Store {
			t.Errorf("%s: method %d, want Store", f.Name, f.Method)
		}
	}
}

// TestUnzip: Debian's unzip lists what Write wrote.
func TestUnzip(t *testing.T) {
	unzip, err := exec.LookPath("unzip")
	if err != nil {
		testenv.Unavailable(t, "unzip: "+err.Error())
	}
	p := filepath.Join(t.TempDir(), "x.gaf")
	os.WriteFile(p, archive(t, members()), 0o644)
	out, err := exec.Command(unzip, "-t", p).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Fatalf("unzip -t: %v\n%s", err, out)
	}
}

func TestOpenRejects(t *testing.T) {
	noRoot := members()
	delete(noRoot, Root)
	shortMBR := members()
	shortMBR[MBR] = shortMBR[MBR][:440]
	for name, b := range map[string][]byte{
		"not a zip": []byte("hello"),
		"no root":   archive(t, noRoot),
		"short mbr": archive(t, shortMBR),
		"truncated": archive(t, members())[:3000],
	} {
		if _, err := Open(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSignVerify(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	other, _, _ := ed25519.GenerateKey(nil)
	msg := archive(t, members())
	sig, err := Sign(priv, bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(pub, msg, sig); err != nil {
		t.Errorf("good signature: %v", err)
	}
	tampered := append([]byte{}, msg...)
	tampered[100] ^= 1
	for name, tc := range map[string]struct {
		pub      ed25519.PublicKey
		msg, sig []byte
		want     error
	}{
		"unsigned":    {pub, msg, nil, ErrUnsigned},
		"other key":   {other, msg, sig, ErrBadSignature},
		"tampered":    {pub, tampered, sig, ErrBadSignature},
		"garbage sig": {pub, msg, []byte("not base64!"), ErrBadSignature},
	} {
		if err := Verify(tc.pub, tc.msg, tc.sig); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for name, in := range map[string][]byte{"pem": pemKey, "seed": []byte(" " + EncodeSeed(priv) + "\n")} {
		k, err := ParsePrivateKey(in)
		if err != nil || !k.Equal(priv) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParsePrivateKey([]byte("short")); err == nil {
		t.Error("a bad private key parsed")
	}
	got, err := ParsePublicKey(EncodePublicKey(pub))
	if err != nil || !got.Equal(pub) {
		t.Errorf("public key round trip: %v", err)
	}
	for _, bad := range []string{"", "!!", "AAAA"} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("ParsePublicKey(%q): no error", bad)
		}
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(archive(f, members()))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		a.ReadAll(MBR)
	})
}
