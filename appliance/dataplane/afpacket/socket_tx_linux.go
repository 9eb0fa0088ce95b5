package afpacket

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// sendto asks the kernel to transmit every SEND_REQUEST slot from its head.
func (s *Socket) sendto() error {
	return unix.Sendto(s.fd, nil, unix.MSG_DONTWAIT, &s.sa)
}

// sendCopy hands the queued slots to the kernel with sendmmsg (TxCopy)
// and marks those it took free, as the kernel does in a mapped ring. A
// frame the kernel refuses (EINVAL, EMSGSIZE) at the head is marked
// TP_STATUS_WRONG_FORMAT, like the mapped ring's kernel does, and dropped
// by reap.
func (s *Socket) sendCopy() error {
	t := s.tx
	n, err := s.copy.send(s.fd, t)
	for i := range n {
		k := (t.khead + i) % len(t.slots)
		storeStatus(t.mem, t.slots[k]+offStatus, unix.TP_STATUS_AVAILABLE)
	}
	if n == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EMSGSIZE)) {
		storeStatus(t.mem, t.slots[t.khead]+offStatus, unix.TP_STATUS_WRONG_FORMAT)
	}
	return err
}

// txReady makes sure the TX goroutine holds a reference on the mapping.
func (s *Socket) txReady() bool {
	if s.txHeld {
		return !s.life.closed()
	}
	if !s.life.acquire() {
		return false
	}
	s.txHeld = true
	return true
}

// Append copies frame (from the destination MAC on, without FCS) into the
// next free TX slot. It returns false if the frame was not queued: the ring
// is full (Flush, then retry), the frame is too long or too short (counted
// in Stats, never truncated), or the socket is closed.
func (s *Socket) Append(frame []byte) bool {
	if s.tx == nil || !s.txReady() {
		return false
	}
	return s.tx.append(frame)
}

// AppendTagged is Append for a frame whose VLAN tag was stripped on receive:
// it writes the frame with a tpid/tci tag inserted after the MAC addresses,
// in the same single copy. Only tpid 0x8100 frames may exceed MTU+14 bytes.
func (s *Socket) AppendTagged(frame []byte, tpid, tci uint16) bool {
	if s.tx == nil || !s.txReady() {
		return false
	}
	return s.tx.appendTagged(frame, tpid, tci)
}

// TxSlot returns the data area of the next free TX slot so that a frame can
// be built in place, or nil if the ring is full or the socket closed. Queue
// it with TxCommit; until then it is not sent and TxSlot returns the same
// slot again.
func (s *Socket) TxSlot() []byte {
	if s.tx == nil || !s.txReady() {
		return nil
	}
	return s.tx.buffer()
}

// TxCommit queues the slot returned by TxSlot with its first n bytes as the
// frame. It returns false if n violates the length rules (counted) or no
// slot is free.
func (s *Socket) TxCommit(n int) bool {
	if s.tx == nil || !s.txReady() {
		return false
	}
	return s.tx.commitBuffer(n)
}

// Flush transmits the queued frames with one sendto (more only while the
// driver queue is full). Frames are never dropped on ENOBUFS or EAGAIN: Flush
// backs off and retries, and if the kernel takes nothing for TxRetryTimeout
// it returns an error wrapping ErrTxStalled (and the last errno) with the
// frames still queued. The kernel also answers ENOBUFS while the link has no
// carrier; so that a dead port does not cost every batch the full timeout,
// Flush then tries only once per call until the kernel takes frames again.
// Meanwhile the ring fills and Append reports it full.
func (s *Socket) Flush() error {
	if s.tx == nil {
		return ErrNoRing
	}
	if !s.txHeld {
		return nil
	}
	if s.life.closed() {
		s.txDropped.Add(uint64(s.tx.drop()))
		s.txHeld = false
		s.life.release()
		return ErrClosed
	}
	err := s.tx.flush()
	if s.tx.queued == 0 {
		s.txHeld = false
		s.life.release()
	}
	if err != nil {
		return fmt.Errorf("afpacket: %s: %w", s.name, err)
	}
	return nil
}

// Queued is the number of frames appended but not yet taken by the kernel.
func (s *Socket) Queued() int {
	if s.tx == nil {
		return 0
	}
	return s.tx.queued
}
