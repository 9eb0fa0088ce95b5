package dataplane

import (
	"encoding/binary"
	"sync/atomic"
)

// hostStage is one worker's transmit path into the host port: frames are
// copied into a small fixed buffer by the per-frame path (no syscall, no
// allocation) and written to the TAP, one write per frame, when the worker
// flushes its batch. Each worker has its own stage; the TAP descriptor is
// the only thing the workers share, and the kernel keeps each write whole.
type hostStage struct {
	write func([]byte) error
	buf   []byte
	size  int   // bytes per slot
	lens  []int // frame length per slot
	n     int   // queued frames
	errs  atomic.Uint64
}

const hostStageFrames = 64

// newHostStage returns a stage for frames up to maxFrame bytes.
func newHostStage(write func([]byte) error, maxFrame int) *hostStage {
	return &hostStage{
		write: write,
		buf:   make([]byte, hostStageFrames*maxFrame),
		size:  maxFrame,
		lens:  make([]int, hostStageFrames),
	}
}

func (s *hostStage) slot() []byte {
	if s.n == len(s.lens) {
		return nil
	}
	return s.buf[s.n*s.size : (s.n+1)*s.size : (s.n+1)*s.size]
}

// Append implements txPort.
func (s *hostStage) Append(frame []byte) bool {
	d := s.slot()
	if d == nil || len(frame) > len(d) {
		return false
	}
	s.lens[s.n] = copy(d, frame)
	s.n++
	return true
}

// AppendTagged implements txPort: the tag goes back into the bytes.
func (s *hostStage) AppendTagged(frame []byte, tpid, tci uint16) bool {
	d := s.slot()
	if d == nil || len(frame) < 14 || len(frame)+4 > len(d) {
		return false
	}
	copy(d[:12], frame[:12])
	binary.BigEndian.PutUint16(d[12:], tpid)
	binary.BigEndian.PutUint16(d[14:], tci)
	copy(d[16:], frame[12:])
	s.lens[s.n] = len(frame) + 4
	s.n++
	return true
}

// TxSlot implements txPort.
func (s *hostStage) TxSlot() []byte { return s.slot() }

// TxCommit implements txPort.
func (s *hostStage) TxCommit(n int) bool {
	if s.n == len(s.lens) || n < 14 || n > s.size {
		return false
	}
	s.lens[s.n] = n
	s.n++
	return true
}

// Flush implements txPort: it writes every queued frame. A frame the
// kernel refuses is dropped and counted; the error of the last failure is
// returned.
func (s *hostStage) Flush() error {
	var last error
	for i := range s.n {
		if err := s.write(s.buf[i*s.size : i*s.size+s.lens[i]]); err != nil {
			s.errs.Add(1)
			last = err
		}
	}
	s.n = 0
	return last
}
