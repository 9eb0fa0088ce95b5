package afpacket

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// NextBlock returns the next retired RX block, waiting up to timeout for
// one; a negative timeout waits until a block arrives or the socket is
// closed, zero does not wait. It returns (nil, nil) when the timeout
// expires, ErrClosed once Close was called, and an error wrapping
// unix.ENETDOWN when the interface went down (the socket keeps working once
// it is up again). A block still held from the previous call is released
// first. The returned Block is reused by the next call.
func (s *Socket) NextBlock(timeout time.Duration) (*Block, error) {
	if s.rx.blocks == 0 {
		return nil, ErrNoRing
	}
	if s.rx.held {
		s.ReleaseBlock()
	}
	if !s.life.acquire() {
		return nil, ErrClosed
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		if s.rx.ready() {
			return s.rx.open(), nil // the reference is dropped by ReleaseBlock
		}
		if s.life.closed() {
			s.life.release()
			return nil, ErrClosed
		}
		if timeout == 0 {
			s.life.release()
			return nil, nil
		}
		var tsp *unix.Timespec // nil: wait without limit
		if timeout > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				s.life.release()
				return nil, nil
			}
			s.ts = unix.NsecToTimespec(int64(left))
			tsp = &s.ts
		}
		_, err := unix.Ppoll(s.pfd[:], tsp, nil)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			s.life.release()
			return nil, fmt.Errorf("afpacket: %s: poll: %w", s.name, err)
		}
		if s.pfd[1].Revents != 0 {
			s.life.release()
			return nil, ErrClosed
		}
		if s.pfd[0].Revents&unix.POLLNVAL != 0 {
			s.life.release()
			return nil, fmt.Errorf("afpacket: %s: poll: %w", s.name, unix.EBADF)
		}
		if s.pfd[0].Revents&unix.POLLERR != 0 {
			soerr, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err == nil && soerr != 0 {
				s.life.release()
				return nil, fmt.Errorf("afpacket: %s: %w", s.name, unix.Errno(soerr))
			}
		}
	}
}

// ReleaseBlock hands the current block back to the kernel. Frames of the
// block must not be used afterwards. It is a no-op without a current block.
func (s *Socket) ReleaseBlock() {
	if !s.rx.held {
		return
	}
	truncated, corrupt := s.rx.release()
	if truncated > 0 {
		s.rxTruncated.Add(uint64(truncated))
	}
	if corrupt {
		s.rxCorrupt.Add(1)
	}
	s.life.release()
}
