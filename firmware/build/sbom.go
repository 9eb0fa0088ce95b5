package build

import (
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"

	"e1kbox/firmware/gaf"
)

// SBOM is gokrazy's software bill of materials, as gok writes it to
// /etc/gokrazy/sbom.json: the config's hash and each program's build info.
// gokrazy shows its hash as SBOMHash.
type SBOM struct {
	ConfigHash      FileHash    `json:"config_hash"`
	ExtraFileHashes []FileHash  `json:"extra_file_hashes"`
	GoPackages      []GoPackage `json:"go_packages"`
}

// FileHash is a file and its SHA-256.
type FileHash struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// GoPackage is one program in the image.
type GoPackage struct {
	Path      string `json:"path"`
	BuildID   string
	BuildInfo string
}

// sbom returns /etc/gokrazy/sbom.json ({"sbom_hash":…, "sbom":…}) and the
// hash, for the programs (host path → image path).
func (b *builder) sbom(bins map[string]string) ([]byte, string, error) {
	cfg, err := os.ReadFile(b.cfgPath)
	if err != nil {
		return nil, "", err
	}
	s := SBOM{ConfigHash: FileHash{Path: "config.json", Hash: fmt.Sprintf("%x", sha256.Sum256(cfg))}, ExtraFileHashes: []FileHash{}}
	for _, host := range slices.Sorted(maps.Keys(bins)) {
		info, err := buildinfo.ReadFile(host)
		if err != nil {
			return nil, "", fmt.Errorf("build info of %s: %w", bins[host], err)
		}
		s.GoPackages = append(s.GoPackages, GoPackage{Path: bins[host], BuildID: goBuildID(host), BuildInfo: info.String()})
	}
	sort.Slice(s.GoPackages, func(i, j int) bool { return s.GoPackages[i].Path < s.GoPackages[j].Path })
	inner, err := json.Marshal(s)
	if err != nil {
		return nil, "", err
	}
	hash := fmt.Sprintf("%x", sha256.Sum256(inner))
	out, err := json.MarshalIndent(struct {
		SBOMHash string          `json:"sbom_hash"`
		SBOM     json.RawMessage `json:"sbom"`
	}{hash, inner}, "", "  ")
	return append(out, '\n'), hash, err
}

// goBuildID reads the Go build ID note of an ELF program ("" if none).
func goBuildID(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	d, err := sec.Data()
	if err != nil || len(d) < 16 {
		return ""
	}
	return string(d[16:])
}

// writeGAF writes the update archive next to the image and, with a signing
// key, its detached signature.
func (b *builder) writeGAF(m *Manifest, members map[string][]byte) error {
	f, err := os.CreateTemp(b.opts.OutDir, ".gaf-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := gaf.Write(f, members); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(secretMode); err != nil { // its root holds the password
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	sigPath := m.GAF + gaf.SignatureSuffix
	if b.opts.SignKey != "" {
		kb, err := os.ReadFile(b.opts.SignKey)
		if err != nil {
			return fmt.Errorf("signing key: %w", err)
		}
		key, err := gaf.ParsePrivateKey(kb)
		if err != nil {
			return fmt.Errorf("%s: %w", b.opts.SignKey, err)
		}
		archive, err := os.Open(f.Name())
		if err != nil {
			return err
		}
		sig, err := gaf.Sign(key, archive)
		archive.Close()
		if err != nil {
			return err
		}
		if err := writeFileAtomic(sigPath, sig, 0o644); err != nil {
			return err
		}
		m.Signature = sigPath
	} else {
		os.Remove(sigPath) // an old signature is not this archive's
	}
	return os.Rename(f.Name(), m.GAF)
}
