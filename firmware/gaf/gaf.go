// Package gaf reads, writes, signs and verifies gokrazy archives (.gaf), the update files `gok overwrite --gaf` writes.
//
// A .gaf is an uncompressed zip of boot.img (the boot file system),
// root.img (the squashfs root), mbr.img (446 bytes of MBR boot code) and
// sbom.json. A signature is a detached ed25519 signature over the whole
// archive file, stored base64-encoded in FILE.gaf.sig.
package gaf

import (
	"archive/zip"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// The members of an archive.
const (
	Boot = "boot.img"
	Root = "root.img"
	MBR  = "mbr.img"
	SBOM = "sbom.json"
)

// Limits on what an archive may hold (the partitions' sizes).
const (
	MaxBoot = 100 << 20
	MaxRoot = 500 << 20
	MaxSBOM = 16 << 20
	MBRSize = 446
)

// ModTime is the time stamp of every member firmware build writes, so the
// same pieces give the same archive.
var ModTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Write writes an archive of the given members (name to content) in name
// order, stored (not compressed) as gok writes them.
func Write(w io.Writer, members map[string][]byte) error {
	zw := zip.NewWriter(w)
	var names []string
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &zip.FileHeader{Name: n, Method: zip.Store, Modified: ModTime}
		h.SetMode(0o644)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return fmt.Errorf("gaf: %w", err)
		}
		if _, err := fw.Write(members[n]); err != nil {
			return fmt.Errorf("gaf: writing %s: %w", n, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("gaf: %w", err)
	}
	return nil
}

// Archive is an opened .gaf.
type Archive struct {
	members map[string]*zip.File
}

// Open checks that r (size bytes) is a gokrazy archive with a boot, root
// and MBR member of plausible sizes.
func Open(r io.ReaderAt, size int64) (*Archive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a gokrazy archive (.gaf, a zip): %w", err)
	}
	a := &Archive{members: map[string]*zip.File{}}
	for _, f := range zr.File {
		if _, dup := a.members[f.Name]; dup {
			return nil, fmt.Errorf("gaf: %s appears twice", f.Name)
		}
		a.members[f.Name] = f
	}
	limits := map[string]uint64{Boot: MaxBoot, Root: MaxRoot, MBR: MBRSize, SBOM: MaxSBOM}
	for _, n := range []string{Boot, Root, MBR} {
		if a.members[n] == nil {
			return nil, fmt.Errorf("gaf: no %s in the archive (it has %s)", n, strings.Join(a.names(), ", "))
		}
	}
	for n, f := range a.members {
		if lim, ok := limits[n]; ok && f.UncompressedSize64 > lim {
			return nil, fmt.Errorf("gaf: %s is %d bytes, more than %d", n, f.UncompressedSize64, lim)
		}
	}
	if s := a.members[MBR].UncompressedSize64; s != MBRSize {
		return nil, fmt.Errorf("gaf: %s is %d bytes, want %d", MBR, s, MBRSize)
	}
	return a, nil
}

func (a *Archive) names() []string {
	var ns []string
	for n := range a.members {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Has reports whether the archive has member name.
func (a *Archive) Has(name string) bool { return a.members[name] != nil }

// Size is member name's uncompressed size.
func (a *Archive) Size(name string) int64 {
	if f := a.members[name]; f != nil {
		return int64(f.UncompressedSize64)
	}
	return 0
}

// Open opens member name for reading; the reader checks its CRC at EOF.
func (a *Archive) Open(name string) (io.ReadCloser, error) {
	f := a.members[name]
	if f == nil {
		return nil, fmt.Errorf("gaf: no %s", name)
	}
	return f.Open()
}

// ReadAll reads member name whole.
func (a *Archive) ReadAll(name string) ([]byte, error) {
	rc, err := a.Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(a.members[name].UncompressedSize64)+1))
	if err != nil {
		return nil, fmt.Errorf("gaf: reading %s: %w", name, err)
	}
	return b, nil
}

// SignatureSuffix is appended to an archive's file name for its signature.
const SignatureSuffix = ".sig"

// Sign returns the signature file contents for the archive read from r.
func Sign(key ed25519.PrivateKey, r io.Reader) ([]byte, error) {
	msg, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg)) + "\n"), nil
}

// ErrUnsigned and ErrBadSignature are what Verify returns for an archive
// without a signature and for one whose signature is not the key's.
var (
	ErrUnsigned     = errors.New("the update is not signed (this box only takes updates signed with its key)")
	ErrBadSignature = errors.New("the update's signature does not match this box's key")
)

// Verify checks sig (a signature file's contents) over msg.
func Verify(pub ed25519.PublicKey, msg, sig []byte) error {
	if len(bytes.TrimSpace(sig)) == 0 {
		return ErrUnsigned
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(sig)))
	if err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w (malformed signature)", ErrBadSignature)
	}
	if !ed25519.Verify(pub, msg, raw) {
		return ErrBadSignature
	}
	return nil
}

// ParsePrivateKey reads a signing key: PEM "PRIVATE KEY" (PKCS #8, as
// `openssl genpkey -algorithm ed25519` writes it) or a base64 32-byte seed.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("signing key is a %T, want ed25519", k)
		}
		return ek, nil
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("signing key: want PEM PKCS #8 (openssl genpkey -algorithm ed25519) or a base64 32-byte seed")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads a public key: base64 of its 32 bytes (what
// EncodePublicKey writes), or PEM "PUBLIC KEY".
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	if blk, _ := pem.Decode([]byte(s)); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, err
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key is a %T, want ed25519", k)
		}
		return ek, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%d bytes, an ed25519 public key has %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// EncodePublicKey is the runtime config's form of a public key.
func EncodePublicKey(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) }

// Digest is a short hex SHA-256 of b, for logs and the dashboard.
func Digest(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b))[:16] }

// EncodeSeed is the base64 seed form of a signing key (what `firmware
// keygen` writes).
func EncodeSeed(k ed25519.PrivateKey) string { return base64.StdEncoding.EncodeToString(k.Seed()) }
