// Package pollwait waits for file descriptors in the Go runtime's
// netpoller instead of blocking a thread in poll(2).
//
// A goroutine blocked in a system call keeps its P in the syscall state,
// so the runtime's sysmon thread never sleeps deeply: with the dataplane's
// workers idle in ppoll it woke about 600 times a second, and each of its
// wake-ups costs a context switch on the box's CPUs (docs/dataplane.md,
// Measured). A goroutine parked in the netpoller leaves its P idle. The
// descriptors go into an epoll instance of their own, level-triggered, and
// only that instance is made non-blocking: the descriptors keep their
// flags (an AF_PACKET socket's sends depend on them).
package pollwait

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxFDs is how many descriptors a Waiter watches besides its own eventfd
// (Wake): an AF_PACKET socket's, one per EtherType it binds.
const MaxFDs = 4

// Waiter waits for any of up to MaxFDs descriptors to be readable (or to
// report an error), for a ready function to say so, or for Wake. Wait
// must be called from one goroutine at a time; Close once nothing waits.
type Waiter struct {
	file  *os.File
	raw   syscall.RawConn
	efd   int               // the eventfd Wake signals, fds[MaxFDs]
	fds   [MaxFDs + 1]int32 // -1 where unused
	n     int               // descriptors watched, efd included
	ready func() bool
	check func(uintptr) bool // w.poll, made once so that Wait does not allocate
	evs   [MaxFDs + 1]unix.EpollEvent
	got   Events
	err   error
}

// New returns a Waiter for fds (readable: EPOLLIN; errors and hang-ups
// are always reported). ready, if not nil, is asked first and after every
// wake-up: Wait returns as soon as it is true (for memory-mapped rings,
// whose readiness is in the mapping). name names the epoll file.
func New(name string, ready func() bool, fds ...int) (*Waiter, error) {
	if len(fds) == 0 || len(fds) > MaxFDs {
		return nil, fmt.Errorf("pollwait: %s: %d descriptors, want 1 to %d", name, len(fds), MaxFDs)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pollwait: %s: eventfd: %w", name, err)
	}
	w := &Waiter{efd: efd, n: len(fds) + 1, ready: ready}
	for i := range w.fds {
		w.fds[i] = -1
	}
	for i, fd := range fds {
		w.fds[i] = int32(fd)
	}
	w.fds[MaxFDs] = int32(efd)
	if err := w.open(name, append(fds[:len(fds):len(fds)], efd)); err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("pollwait: %s: %w", name, err)
	}
	w.check = w.poll
	return w, nil
}

// open makes the epoll instance of fds, a pollable file.
func (w *Waiter) open(name string, fds []int) error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	for _, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return fmt.Errorf("epoll_ctl add %d: %w", fd, err)
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return fmt.Errorf("set non-blocking: %w", err)
	}
	// A non-blocking descriptor makes a pollable file; it owns epfd now.
	w.file = os.NewFile(uintptr(epfd), "pollwait-"+name)
	if w.raw, err = w.file.SyscallConn(); err != nil {
		w.file.Close()
		return err
	}
	return nil
}

// Events are the epoll events of each descriptor (in New's order) that
// ended a Wait, and at index MaxFDs those of the Waiter's eventfd
// (Woken); all zero when ready ended it.
type Events [MaxFDs + 1]uint32

// Woken reports whether Wake ended the Wait.
func (e *Events) Woken() bool { return e[MaxFDs] != 0 }

// Wait parks the goroutine until ready is true, a descriptor has events or
// Wake was called (since the last Wait that reported it), or until
// deadline (zero: no limit), when it returns os.ErrDeadlineExceeded.
func (w *Waiter) Wait(deadline time.Time) (Events, error) {
	if err := w.file.SetReadDeadline(deadline); err != nil {
		return Events{}, fmt.Errorf("pollwait: deadline: %w", err)
	}
	w.got, w.err = Events{}, nil
	if err := w.raw.Read(w.check); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return Events{}, os.ErrDeadlineExceeded
		}
		return Events{}, fmt.Errorf("pollwait: %w", err)
	}
	if w.err != nil {
		return Events{}, fmt.Errorf("pollwait: epoll_wait: %w", w.err)
	}
	if w.got.Woken() {
		// Drained before Wait returns, so that a Wake after the caller
		// looked at its own state (a Close) still finds its signal.
		var buf [8]byte
		unix.Read(w.efd, buf[:])
	}
	return w.got, nil
}

// Wake makes the Wait in progress, or the next one, return at once with
// Events.Woken. Any goroutine may call it until Close.
func (w *Waiter) Wake() error {
	var one [8]byte // eventfd counter increment, native endian
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(w.efd, one[:]); err != nil {
		return fmt.Errorf("pollwait: wake: %w", err)
	}
	return nil
}

// poll is the netpoller's check: true ends the wait. It reads the epoll
// set without blocking; the netpoller waits for the set's next event
// otherwise.
func (w *Waiter) poll(epfd uintptr) bool {
	if w.ready != nil && w.ready() {
		return true
	}
	n, err := unix.EpollWait(int(epfd), w.evs[:w.n], 0)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return false
		}
		w.err = err
		return true
	}
	for _, ev := range w.evs[:n] {
		for i, fd := range w.fds {
			if ev.Fd == fd {
				w.got[i] |= ev.Events
			}
		}
	}
	return n > 0 || (w.ready != nil && w.ready())
}

// Close closes the epoll instance and the eventfd (not the descriptors
// it watches).
func (w *Waiter) Close() error {
	err := w.file.Close()
	if err2 := unix.Close(w.efd); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("pollwait: close: %w", err)
	}
	return nil
}
