package dhcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"e1kbox/appliance/atomicfile"
)

// LoadFile reads the file at path and decodes it; a missing file is the
// zero L (no lease) and no error. Errors name path.
func LoadFile[L any](path string, decode func([]byte) (L, error)) (L, error) {
	var none L
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	l, err := decode(data)
	if err != nil {
		return none, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// SaveFile writes data to path atomically (a temp file in the same
// directory, fsync, rename, fsync of the directory), making the directory
// first.
func SaveFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o644)
}

// RemoveFile removes the file at path, and makes the removal durable; a
// missing file is no error.
func RemoveFile(path string) error { return atomicfile.Remove(path) }

// EncodeJSON is v as a lease file holds it: indented JSON and a newline.
func EncodeJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
