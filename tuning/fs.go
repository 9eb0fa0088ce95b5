package tuning

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// root resolves the absolute procfs/sysfs paths the knobs use below a
// filesystem root: "/" on the box, a t.TempDir() tree in unit tests.
type root string

func (r root) path(p string) string {
	return filepath.Join(string(r), filepath.FromSlash(p))
}

// read returns the file's content without surrounding white space.
func (r root) read(p string) (string, error) {
	b, err := os.ReadFile(r.path(p))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// write writes v in one write(2). It never creates the file: a knob
// file that does not exist is unavailable, not something to create.
func (r root) write(p, v string) error {
	f, err := os.OpenFile(r.path(p), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := f.Write([]byte(v)); err != nil {
		f.Close()
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}

func (r root) exists(p string) bool {
	_, err := os.Stat(r.path(p))
	return err == nil
}

// readlinkBase returns the last element of a symlink's target, e.g. the
// driver name of /sys/class/net/eth1/device/driver.
func (r root) readlinkBase(p string) (string, error) {
	t, err := os.Readlink(r.path(p))
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", p, err)
	}
	return path.Base(filepath.ToSlash(t)), nil
}

func (r root) readDir(p string) ([]string, error) {
	ents, err := os.ReadDir(r.path(p))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}
