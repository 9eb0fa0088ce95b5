package pollwait

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func eventfd(t *testing.T) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func signal(t *testing.T, fd int) {
	t.Helper()
	if _, err := unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
}

func newWaiter(t *testing.T, ready func() bool, fds ...int) *Waiter {
	t.Helper()
	w, err := New(t.Name(), ready, fds...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

// waitInBackground runs w.Wait without a deadline on a goroutine of its
// own and returns where the Wait's error goes. With tid, the goroutine
// locks its thread first and sends the thread's id there. The test's
// cleanup wakes the Wait, should it still be parked, and waits for the
// goroutine to end.
func waitInBackground(t *testing.T, w *Waiter, tid chan<- int) <-chan error {
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if tid != nil {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid <- unix.Gettid()
		}
		_, err := w.Wait(time.Time{})
		done <- err
	}()
	t.Cleanup(func() {
		w.Wake()
		<-exited
	})
	return done
}

func TestWait(t *testing.T) {
	a, b := eventfd(t), eventfd(t)
	var ready atomic.Bool
	w := newWaiter(t, ready.Load, a, b)
	for _, c := range []struct {
		name    string
		before  func()
		want    Events
		timeout bool
	}{
		{name: "nothing: the deadline", before: func() {}, timeout: true},
		{name: "second descriptor", before: func() { signal(t, b) }, want: Events{0, unix.EPOLLIN}},
		{name: "both", before: func() { signal(t, a) }, want: Events{unix.EPOLLIN, unix.EPOLLIN}},
		{name: "ready", before: func() {
			var buf [8]byte
			unix.Read(a, buf[:])
			unix.Read(b, buf[:])
			ready.Store(true)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.before()
			start := time.Now()
			got, err := w.Wait(start.Add(50 * time.Millisecond))
			if c.timeout {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("Wait = %v, %v; want os.ErrDeadlineExceeded", got, err)
				}
				if d := time.Since(start); d < 50*time.Millisecond {
					t.Errorf("returned after %v, before the deadline", d)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Wait = %v, %v; want %v, nil", got, err, c.want)
			}
		})
	}
}

// TestWaitWakes: a goroutine parked in Wait wakes when a descriptor
// becomes readable, ready turns true later or Wake is called, not only at
// the deadline.
func TestWaitWakes(t *testing.T) {
	for _, how := range []string{"viaReady=false", "viaReady=true", "Wake"} {
		t.Run(how, func(t *testing.T) {
			fd := eventfd(t)
			var ready atomic.Bool
			w := newWaiter(t, ready.Load, fd)
			done := waitInBackground(t, w, nil)
			time.Sleep(50 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("Wait returned %v with nothing to read", err)
			default:
			}
			switch how {
			case "viaReady=true":
				// ready is only asked again after an event: the rings'
				// kernel side always signals the socket too.
				ready.Store(true)
				signal(t, fd)
			case "Wake":
				if err := w.Wake(); err != nil {
					t.Fatal(err)
				}
			default:
				signal(t, fd)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("Wait still parked 2 s after the descriptor became readable (%s)", how)
			}
		})
	}
}

// TestWake: a Wake when none waits ends the next Wait, with Events.Woken,
// and only that one.
func TestWake(t *testing.T) {
	fd := eventfd(t)
	w := newWaiter(t, nil, fd)
	if err := w.Wake(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		ev, err := w.Wait(time.Now().Add(50 * time.Millisecond))
		if ev.Woken() != want || want && err != nil || !want && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Wait %d after Wake = %v, %v; want woken %v", i, ev, err, want)
		}
	}
}

func TestWaitZeroAllocs(t *testing.T) {
	fd := eventfd(t)
	w := newWaiter(t, nil, fd)
	signal(t, fd) // level-triggered: readable until read
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := w.Wait(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs per Wait, want 0", allocs)
	}
}

func TestNewErrors(t *testing.T) {
	fd := eventfd(t)
	for _, c := range []struct {
		name string
		fds  []int
	}{
		{"none", nil},
		{"too many", []int{fd, fd, fd}},
		{"bad descriptor", []int{-1}},
		{"the same twice", []int{fd, fd}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if w, err := New("x", nil, c.fds...); err == nil {
				w.Close()
				t.Fatalf("New(%v) succeeded", c.fds)
			}
		})
	}
}
