package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzStoreSequences drives the store through apply, confirm, rollback,
// deadline, restart and failed-run sequences with writes that fail at
// random, and checks after every step that the config the box runs is the
// one the store holds, and after a restart that the box comes back on the
// config it ran (the last confirmed one when a change was pending).
func FuzzStoreSequences(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 2, 2, 5})
	f.Add([]byte{0, 3, 4, 0, 9, 3, 5, 4, 1, 5})
	f.Add([]byte{0, 1, 4, 1, 2, 5, 6, 0, 2, 1})
	f.Add([]byte{0, 7, 4, 3, 5, 4, 0, 8, 1, 5})
	factory, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		dir := t.TempDir()
		paths := Paths{Factory: filepath.Join(dir, "factory.json"), Live: filepath.Join(dir, "perm", "config.json")}
		if err := os.WriteFile(paths.Factory, factory, 0o644); err != nil {
			t.Fatal(err)
		}
		broken := failWrites(t)
		running := -1
		run := func(c *Config) error {
			if fdbSize(c) == 666 {
				return errors.New("the box cannot run this")
			}
			running = fdbSize(c)
			return nil
		}
		start := func() *Store {
			s := NewStore(paths, testEnv)
			s.now = func() time.Time { return time.Unix(1e9, 0) }
			c, _, err := s.Load()
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if err := run(c); err != nil {
				t.Fatalf("boot: %v", err)
			}
			s.Run(run)
			return s
		}
		s := start()
		defer func() { s.Close() }()
		check := func(step int) {
			t.Helper()
			if c, _ := s.Current(); fdbSize(c) != running {
				t.Fatalf("step %d (%v): the store holds fdbSize %d, the box runs %d", step, ops[:step+1], fdbSize(c), running)
			}
		}
		confirmed := running
		for i := 0; i < len(ops); i++ {
			arg := 0
			if i+1 < len(ops) {
				arg = int(ops[i+1])
			}
			switch ops[i] % 7 {
			case 0: // apply
				size := 1000 + arg
				if arg%16 == 15 {
					size = 666
				}
				s.Apply(variant(t, size), time.Hour)
				i++
			case 1: // confirm
				if p := s.Pending(); p != nil && s.Confirm(p.ID) == nil {
					confirmed = running
				}
			case 2: // rollback
				s.Rollback()
			case 3: // the deadline passes
				if p := s.Pending(); p != nil {
					s.expire(p.ID)
				}
			case 4: // the disk breaks or mends
				broken.Store(!broken.Load())
			case 5: // restart
				want := running
				if s.Pending() != nil {
					want = confirmed
				}
				s.Close()
				s = start()
				if running != want {
					t.Fatalf("step %d (%v): after a restart the box runs fdbSize %d, want %d", i, ops[:i+1], running, want)
				}
				confirmed = running
			case 6: // SIGHUP
				if _, _, err := s.Reload(); err != nil {
					t.Fatalf("Reload: %v", err)
				}
				if s.Pending() == nil {
					confirmed = running
				}
			}
			if s.Pending() == nil {
				confirmed = running
			}
			check(i)
		}
	})
}
