package squashfs

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzTokens are the pieces fuzzed paths and targets are made of: few enough
// that calls collide, plus the invalid ones.
var fuzzTokens = []string{"a", "b", "/", "/", ".", "..", "\x00", strings.Repeat("n", 256), "é", " "}

type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) str() string {
	var s strings.Builder
	for range in.byte() % 6 {
		s.WriteString(fuzzTokens[int(in.byte())%len(fuzzTokens)])
	}
	return s.String()
}

func (in *fuzzInput) mode() fs.FileMode {
	v := uint16(in.byte())<<8 | uint16(in.byte())
	m := fs.FileMode(v & 0o777)
	for bit, fm := range map[uint16]fs.FileMode{1 << 9: fs.ModeSetuid, 1 << 10: fs.ModeSetgid, 1 << 11: fs.ModeSticky, 1 << 12: fs.ModeDir, 1 << 13: fs.ModeSymlink} {
		if v&bit != 0 {
			m |= fm
		}
	}
	return m
}

// model predicts the outcome of every call from the documented rules.
type model struct {
	tree     map[string]entry
	explicit map[string]bool
}

// check returns the expected error class for adding p, and p's cleaned form.
func (m *model) check(p string) (string, error) {
	rel := strings.TrimPrefix(p, "/")
	if rel == "." || !fs.ValidPath(rel) || strings.Contains(rel, "\x00") {
		return "", fs.ErrInvalid
	}
	for _, e := range strings.Split(rel, "/") {
		if len(e) > 256 {
			return "", fs.ErrInvalid
		}
	}
	full := "/" + rel
	for d := path.Dir(full); d != "/"; d = path.Dir(d) {
		if e, ok := m.tree[d]; ok && e.Kind != "dir" {
			return "", ErrNotDir
		}
	}
	return full, nil
}

func (m *model) addParents(p string) {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := m.tree[d]; !ok {
			m.tree[d] = entry{Kind: "dir", Mode: fs.ModeDir | 0o755}
		}
	}
}

func validMode(m, allowedType fs.FileMode) bool {
	return m&^(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky|allowedType) == 0
}

// FuzzBuild builds trees from fuzz input, checks every call's success or
// failure against a model, and reads the image back with the test reader.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0xed, 0, 1, 2, 4, 0, 2, 0xa4, 200, 2, 2, 0, 1, 3, 1})
	f.Add([]byte{1, 3, 0, 2, 0, 1, 0xa4, 3, 0, 3, 0, 2, 0, 1, 0xff, 1, 0x99, 2, 1, 7, 2, 0, 1})
	f.Add([]byte("\x00\x02\x00\x03\x01\xff\x01\x04\x00\x03\x01\x00\x01\xa4\xff\xaa\x02\x02\x00\x02\x02\x05\x06"))
	f.Add(bytes.Repeat([]byte{1, 2, 0, 1, 1, 0xa4, 130, 0}, 8))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		fsys := New(testTime)
		m := &model{tree: map[string]entry{"/": {Kind: "dir", Mode: fs.ModeDir | 0o755}}, explicit: map[string]bool{}}
		for ops := 0; len(in.b) > 0 && ops < 32; ops++ {
			op, p := in.byte()%3, in.str()
			full, pathErr := m.check(p)
			var err, wantErr error // wantErr: argument checks come before path checks
			var e entry
			switch op {
			case 0:
				mode := in.mode()
				err = fsys.Mkdir(p, mode)
				e = entry{Kind: "dir", Mode: fs.ModeDir | mode}
				if !validMode(mode, fs.ModeDir) {
					wantErr = fs.ErrInvalid
				}
			case 1:
				mode := in.mode()
				n := int(in.byte()) * 600
				content := compressible(n)
				if in.byte()%2 == 1 {
					content = randomBytes(uint64(n), n)
				}
				err = fsys.AddFile(p, mode, content)
				e = fileEntry(mode, content)
				if !validMode(mode, 0) {
					wantErr = fs.ErrInvalid
				}
			case 2:
				target := in.str()
				err = fsys.AddSymlink(p, target)
				e = entry{Kind: "symlink", Mode: fs.ModeSymlink | 0o777, Target: target}
				if target == "" || strings.Contains(target, "\x00") || len(target) > 4095 {
					wantErr = fs.ErrInvalid
				}
			}
			if wantErr == nil {
				wantErr = pathErr
			}
			if old, ok := m.tree[full]; wantErr == nil && ok && (op != 0 || old.Kind != "dir" || m.explicit[full]) {
				wantErr = fs.ErrExist
			}
			if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
				t.Fatalf("op %d on %q: got error %v, want %v", op, p, err, wantErr)
			}
			if err == nil {
				m.tree[full] = e
				m.explicit[full] = op == 0
				m.addParents(full)
			}
		}
		var buf bytes.Buffer
		if _, err := fsys.WriteTo(&buf); err != nil {
			t.Fatalf("WriteTo: %v", err)
		}
		got, err := readImage(buf.Bytes(), uint32(testTime.Unix()))
		if err != nil {
			t.Fatalf("readImage: %v", err)
		}
		if diff := cmp.Diff(m.tree, got); diff != "" {
			t.Errorf("tree mismatch (-want +got):\n%s", diff)
		}
	})
}
