package ispvm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// libDirs are where a Debian amd64 system keeps shared libraries, relative
// to a root (an extracted package or the host).
var libDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib"}

// elfNeeds returns the DT_NEEDED libraries of an ELF file and its program
// interpreter ("" for a static binary).
func elfNeeds(path string) (needed []string, interp string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("ispvm: reading ELF %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, "", fmt.Errorf("ispvm: %s's interpreter: %w", path, err)
			}
			interp = string(bytes.TrimRight(b, "\x00"))
		}
	}
	needed, err = f.ImportedLibraries()
	if err != nil && f.Section(".dynamic") != nil {
		return nil, "", fmt.Errorf("ispvm: %s's libraries: %w", path, err)
	}
	return needed, interp, nil
}

// findLib finds a library by its soname under the roots, in order.
func findLib(name string, roots []string) (string, error) {
	for _, r := range roots {
		for _, d := range libDirs {
			p := filepath.Join(r, d, name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("ispvm: library %s not found under %v", name, roots)
}

// libClosure returns every shared library the binaries need, directly or
// through other libraries, by soname, with where it was found, and the
// program interpreters they name (by their absolute path in the VM).
func libClosure(bins []string, roots []string) (libs map[string]string, interps map[string]bool, err error) {
	libs, interps = map[string]string{}, map[string]bool{}
	todo := append([]string(nil), bins...)
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		needed, interp, err := elfNeeds(p)
		if err != nil {
			return nil, nil, err
		}
		if interp != "" {
			interps[interp] = true
		}
		for _, n := range needed {
			if _, ok := libs[n]; ok {
				continue
			}
			lp, err := findLib(n, roots)
			if err != nil {
				return nil, nil, fmt.Errorf("%w (needed by %s)", err, p)
			}
			libs[n] = lp
			todo = append(todo, lp)
		}
	}
	return libs, interps, nil
}

// modName is a module's name as modinfo's depends= lists it.
func modName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".ko"), "-", "_")
}

// parseDepends returns the module names in a .modinfo section's
// "depends=" entry (NUL-separated key=value strings).
func parseDepends(modinfo []byte) []string {
	for _, kv := range bytes.Split(modinfo, []byte{0}) {
		v, ok := bytes.CutPrefix(kv, []byte("depends="))
		if !ok {
			continue
		}
		var deps []string
		for _, d := range strings.Split(string(v), ",") {
			if d = strings.TrimSpace(d); d != "" {
				deps = append(deps, strings.ReplaceAll(d, "-", "_"))
			}
		}
		return deps
	}
	return nil
}

// moduleDepends reads a .ko file's dependencies from its .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ispvm: reading module %s: %w", path, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("ispvm: module %s has no .modinfo", path)
	}
	b, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("ispvm: module %s's .modinfo: %w", path, err)
	}
	return parseDepends(b), nil
}

// moduleIndex maps module names to their .ko files under dir.
func moduleIndex(dir string) (map[string]string, error) {
	idx := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			idx[modName(p)] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ispvm: listing modules in %s: %w", dir, err)
	}
	return idx, nil
}

// loadOrder returns the modules to insmod, dependencies first, for the
// wanted modules; deps gives a module's dependencies.
func loadOrder(wanted []string, deps func(name string) ([]string, error)) ([]string, error) {
	var order []string
	state := map[string]int{} // 1: visiting, 2: done
	var visit func(m string, path []string) error
	visit = func(m string, path []string) error {
		switch state[m] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("ispvm: module dependency cycle: %s", strings.Join(append(path, m), " -> "))
		}
		state[m] = 1
		ds, err := deps(m)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := visit(d, append(path, m)); err != nil {
				return err
			}
		}
		state[m] = 2
		order = append(order, m)
		return nil
	}
	for _, m := range wanted {
		if err := visit(m, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}
