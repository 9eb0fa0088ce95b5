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
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxFDs is how many descriptors a Waiter watches: an AF_PACKET socket's
// descriptors (one per EtherType it binds, up to four) and its eventfd.
const MaxFDs = 5

// Waiter waits for any of up to MaxFDs descriptors to be readable (or to
// report an error), or for a ready function to say so. Wait must be called
// from one goroutine at a time; Close once nothing waits.
type Waiter struct {
	file  *os.File
	raw   syscall.RawConn
	fds   [MaxFDs]int32
	n     int
	ready func() bool
	check func(uintptr) bool // w.poll, made once so that Wait does not allocate
	evs   [MaxFDs]unix.EpollEvent
	got   [MaxFDs]uint32
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
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("pollwait: %s: epoll_create1: %w", name, err)
	}
	w := &Waiter{n: len(fds), ready: ready}
	for i, fd := range fds {
		w.fds[i] = int32(fd)
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return nil, fmt.Errorf("pollwait: %s: epoll_ctl add %d: %w", name, fd, err)
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("pollwait: %s: set non-blocking: %w", name, err)
	}
	// A non-blocking descriptor makes a pollable file; it owns epfd now.
	w.file = os.NewFile(uintptr(epfd), "pollwait-"+name)
	if w.raw, err = w.file.SyscallConn(); err != nil {
		w.file.Close()
		return nil, fmt.Errorf("pollwait: %s: %w", name, err)
	}
	w.check = w.poll
	return w, nil
}

// Events are the epoll events of each descriptor (in New's order) that
// ended a Wait; all zero when ready ended it.
type Events [MaxFDs]uint32

// Wait parks the goroutine until ready is true or a descriptor has events,
// or until deadline (zero: no limit), when it returns
// os.ErrDeadlineExceeded.
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
	return w.got, nil
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
		for i := range w.n {
			if ev.Fd == w.fds[i] {
				w.got[i] |= ev.Events
			}
		}
	}
	return n > 0 || (w.ready != nil && w.ready())
}

// Close closes the epoll instance (not the descriptors it watches).
func (w *Waiter) Close() error {
	if err := w.file.Close(); err != nil {
		return fmt.Errorf("pollwait: close: %w", err)
	}
	return nil
}
