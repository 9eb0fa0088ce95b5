package config

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failWrites makes every write to the disk fail (as on a full or
// read-only /perm) once the returned switch is set.
func failWrites(t testing.TB) *atomic.Bool {
	t.Helper()
	var broken atomic.Bool
	failWrite = func(string) error {
		if broken.Load() {
			return syscall.EROFS
		}
		return nil
	}
	t.Cleanup(func() { failWrite = nil })
	return &broken
}

// TestRollbackWithUnwritablePerm: a change that is not confirmed rolls
// back on the box even when the disk takes no writes any more (full,
// read-only): the unconfirmed config must not keep running, and the
// warnings stay bounded. The marker left on disk rolls it back at the
// next start too.
func TestRollbackWithUnwritablePerm(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	var mu sync.Mutex
	var ran []int
	s.Run(func(c *Config) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, fdbSize(c))
		return nil
	})
	breakDisk := failWrites(t)
	if _, err := s.Apply(variant(t, 1000), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	breakDisk.Store(true)
	if _, err := s.Apply(variant(t, 2000), time.Second); err == nil {
		t.Fatal("Apply on an unwritable disk succeeded")
	}
	deadline := time.Now().Add(3 * time.Second)
	for s.Pending() != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c, _ := s.Current(); s.Pending() != nil || fdbSize(c) != 8192 {
		t.Fatalf("after the deadline: current fdbSize %d, pending %+v; want the confirmed 8192 and nothing pending", fdbSize(c), s.Pending())
	}
	mu.Lock()
	if len(ran) != 2 || ran[0] != 1000 || ran[1] != 8192 {
		t.Errorf("the box ran %v, want [1000 8192]", ran)
	}
	mu.Unlock()
	if w := s.Warnings(); !containsWarning(w, "the live config could not be rewritten") || len(w) > maxWarnings {
		t.Errorf("warnings %q", w)
	}
	for range 3 * maxWarnings {
		s.mu.Lock()
		s.warn("the disk is full")
		s.mu.Unlock()
	}
	if w := s.Warnings(); len(w) > maxWarnings {
		t.Errorf("%d warnings kept, want at most %d", len(w), maxWarnings)
	}

	// The disk is still read-only at the next start: the marker says the
	// change was never confirmed.
	failWrite = nil
	if !markerExists(paths) || liveFDBSize(t, paths) != 1000 {
		t.Fatalf("on disk: marker %v, live fdbSize %d; want the marker and the unconfirmed 1000", markerExists(paths), liveFDBSize(t, paths))
	}
	s2 := NewStore(paths, testEnv)
	t.Cleanup(s2.Close)
	if c, _ := load(t, s2); fdbSize(c) != 8192 {
		t.Errorf("next start runs fdbSize %d, want the confirmed 8192", fdbSize(c))
	}
}

// TestChangesSerialized: concurrent applies, confirms and rollbacks leave
// the box running exactly the config the store holds.
func TestChangesSerialized(t *testing.T) {
	s, _ := testStore(t)
	load(t, s)
	var mu sync.Mutex
	running := 8192
	s.Run(func(c *Config) error {
		time.Sleep(time.Millisecond) // a dataplane apply takes a while
		mu.Lock()
		defer mu.Unlock()
		running = fdbSize(c)
		return nil
	})
	// The configs are made here: variant fails the test, which only the
	// test's goroutine may do.
	configs := make([][]*Config, 4)
	for g := range configs {
		for i := range 25 {
			configs[g] = append(configs[g], variant(t, 1000+100*g+i))
		}
	}
	var wg sync.WaitGroup
	for g := range configs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				switch i % 5 {
				case 0, 1, 2:
					id, err := s.Apply(configs[g][i], 5*time.Millisecond)
					if err == nil && i%5 == 1 {
						s.Confirm(id)
					}
				case 3:
					s.Rollback()
				case 4:
					time.Sleep(6 * time.Millisecond) // let a deadline pass
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond) // the last deadline passes
	s.op.Lock()
	mu.Lock()
	c, _ := s.Current()
	if fdbSize(c) != running {
		t.Errorf("the store holds fdbSize %d, the box runs %d", fdbSize(c), running)
	}
	mu.Unlock()
	s.op.Unlock()
}

// TestApplyThatDoesNotRun: a config the box cannot run is rolled back at
// once, in the store and on the box.
func TestApplyThatDoesNotRun(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	var ran []int
	s.Run(func(c *Config) error {
		ran = append(ran, fdbSize(c))
		if fdbSize(c) == 666 {
			return errors.New("no such interface")
		}
		return nil
	})
	_, err := s.Apply(variant(t, 666), time.Minute)
	if !errors.Is(err, ErrRun) || !strings.Contains(err.Error(), "no such interface") {
		t.Fatalf("Apply = %v, want ErrRun", err)
	}
	if c, _ := s.Current(); fdbSize(c) != 8192 || s.Pending() != nil || markerExists(paths) || liveFDBSize(t, paths) != 8192 {
		t.Errorf("after a failed run: current %d, pending %+v, marker %v, live %d", fdbSize(c), s.Pending(), markerExists(paths), liveFDBSize(t, paths))
	}
	if fmt.Sprint(ran) != "[666 8192]" {
		t.Errorf("the box ran %v, want [666 8192]", ran)
	}
}
