package afpacket

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/pollwait"
)

// NextBlock returns the next retired RX block, waiting up to timeout for
// one; a negative timeout waits until a block arrives or the socket is
// closed, zero does not wait. It returns (nil, nil) when the timeout
// expires or Wake was called, ErrClosed once Close was called, and an error wrapping
// unix.ENETDOWN when the interface went down (the socket keeps working once
// it is up again). A block still held from the previous call is released
// first. The returned Block is reused by the next call.
func (s *Socket) NextBlock(timeout time.Duration) (*Block, error) {
	if s.rx.blocks == 0 {
		return nil, ErrNoRing
	}
	if s.cur != nil {
		s.ReleaseBlock()
	}
	if !s.life.acquire() {
		return nil, ErrClosed
	}
	var limit time.Time
	if timeout > 0 {
		limit = time.Now().Add(timeout)
	}
	for {
		if r := s.readyRing(); r != nil {
			s.cur = r
			return r.open(), nil // the reference is dropped by ReleaseBlock
		}
		if s.life.closed() {
			s.life.release()
			return nil, ErrClosed
		}
		if timeout == 0 {
			s.life.release()
			return nil, nil
		}
		var deadline time.Time // zero: wait without limit
		if timeout > 0 {
			if time.Until(limit) <= 0 {
				s.life.release()
				return nil, nil
			}
			deadline = limit
		}
		ev, err := s.wait.Wait(deadline)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue // the loop sees the time is up
		case err != nil:
			s.life.release()
			return nil, fmt.Errorf("afpacket: %s: %w", s.name, err)
		case ev.Woken(): // Close or Wake
			s.life.release()
			if s.life.closed() {
				return nil, ErrClosed
			}
			return nil, nil
		default:
			if err := s.socketError(ev); err != nil {
				s.life.release()
				return nil, fmt.Errorf("afpacket: %s: %w", s.name, err)
			}
		}
	}
}

// Wake makes a NextBlock that waits, or the next one to wait, return at
// once without a block, as its timeout would: a worker that sleeps long
// while idle is woken for work that cannot wait (a port update). Any
// goroutine may call it; it returns ErrClosed after Close.
func (s *Socket) Wake() error {
	if !s.life.acquire() {
		return ErrClosed
	}
	defer s.life.release()
	if err := s.wake(); err != nil {
		return fmt.Errorf("afpacket: %s: wake: %w", s.name, err)
	}
	return nil
}

// ReleaseBlock hands the current block back to the kernel. Frames of the
// block must not be used afterwards. It is a no-op without a current block.
func (s *Socket) ReleaseBlock() {
	r := s.cur
	if r == nil {
		return
	}
	s.cur = nil
	truncated, corrupt := r.release()
	if truncated > 0 {
		s.rxTruncated.Add(uint64(truncated))
	}
	if corrupt {
		s.rxCorrupt.Add(1)
	}
	s.life.release()
}

// socketError is the pending error (SO_ERROR) of a descriptor whose
// event reported one (EPOLLERR), nil if none.
func (s *Socket) socketError(ev pollwait.Events) error {
	for i := range 1 + len(s.more) {
		if ev[i]&unix.EPOLLERR == 0 {
			continue
		}
		soerr, err := unix.GetsockoptInt(s.fdOf(i), unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			return unix.Errno(soerr)
		}
	}
	return nil
}
