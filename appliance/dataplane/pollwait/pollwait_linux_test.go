package pollwait

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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
// becomes readable or ready turns true later, not only at the deadline.
func TestWaitWakes(t *testing.T) {
	for _, viaReady := range []bool{false, true} {
		t.Run(fmt.Sprintf("viaReady=%v", viaReady), func(t *testing.T) {
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
			if viaReady {
				// ready is only asked again after an event: the rings'
				// kernel side always signals the socket too.
				ready.Store(true)
			}
			signal(t, fd)
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Wait still parked 2 s after the descriptor became readable")
			}
		})
	}
}

// TestWaitParksTheThread: while a locked goroutine waits, its thread sleeps
// in the runtime (futex), not in a poll system call that would keep a P.
func TestWaitParksTheThread(t *testing.T) {
	fd := eventfd(t)
	w := newWaiter(t, nil, fd)
	tid := make(chan int, 1)
	done := waitInBackground(t, w, tid)
	path := fmt.Sprintf("/proc/self/task/%d/syscall", <-tid)
	var nr int
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) == 0 || f[0] == "running" {
			continue
		}
		if nr, err = strconv.Atoi(f[0]); err != nil {
			t.Fatalf("%s: %q", path, b)
		}
		if nr == unix.SYS_FUTEX {
			break
		}
	}
	if nr != unix.SYS_FUTEX {
		t.Errorf("the waiting thread is in system call %d, want futex (%d): a thread blocked in poll keeps its P", nr, unix.SYS_FUTEX)
	}
	signal(t, fd)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWake: Wake ends a parked Wait with Events.Woken, or the next one
// when none waits, and only that one.
func TestWake(t *testing.T) {
	fd := eventfd(t)
	w := newWaiter(t, nil, fd)
	errc := waitInBackground(t, w, nil)
	time.Sleep(50 * time.Millisecond)
	if err := w.Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait still parked 2 s after Wake")
	}
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
