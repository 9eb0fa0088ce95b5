package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// txBusy are the slot states in which the slot belongs to the kernel or
// waits for user space to fix it; any other value (TP_STATUS_AVAILABLE, maybe
// with timestamp bits) means the slot is free.
const txBusy = unix.TP_STATUS_SEND_REQUEST | unix.TP_STATUS_SENDING | unix.TP_STATUS_WRONG_FORMAT

// Flush backoff while the driver queue or the send buffer is full: first
// yield a few times (a completion usually frees the queue within
// microseconds), then sleep with exponential backoff.
const (
	txSpinRetries = 32
	txMinSleep    = 50 * time.Microsecond
	txMaxSleep    = time.Millisecond
)

// ErrTxStalled is returned (wrapped) by Flush when the kernel took no frame
// for the configured TxRetryTimeout. The frames stay queued in the ring and
// go out with a later Flush.
var ErrTxStalled = errors.New("afpacket: transmit stalled")

// txRing is the user-space side of a TPACKET_V3 TX ring. It mirrors the
// kernel's ring head: the kernel sends slots strictly in order starting at
// its head, advancing it only past slots it took (or dropped with
// PACKET_LOSS, which we do not set).
type txRing struct {
	mem     []byte
	slots   []int // byte offset of each slot in mem
	slotCap int   // bytes of frame data a slot holds
	mtu     int

	head   int // next slot to fill
	khead  int // the kernel's head: oldest queued slot it has not taken
	queued int // slots in SEND_REQUEST from khead on

	// send asks the kernel to transmit the queued slots (sendto with
	// MSG_DONTWAIT on the real socket; a model in tests).
	send         func() error
	retryTimeout time.Duration
	sleep        func(time.Duration)
	// stalled is set when a flush gave up; until the kernel takes a frame
	// again, flush tries once instead of waiting (a port with its link
	// down must not cost every batch a full retry timeout).
	stalled bool

	sent, enobufs, eagain, wrongFormat, oversize, runt, stalls atomic.Uint64
}

// newTxRing lays out fixed-size slots over mem: frameSize-byte slots packed
// into blockSize-byte blocks, as the kernel addresses them.
func newTxRing(mem []byte, g Geometry) *txRing {
	t := &txRing{
		mem:          mem,
		slotCap:      g.TxFrameSize - tpHdrLen,
		mtu:          g.MTU,
		retryTimeout: g.TxRetryTimeout,
		sleep:        time.Sleep,
	}
	per := g.TxBlockSize / g.TxFrameSize
	t.slots = make([]int, 0, g.TxFrames)
	for b := 0; b < g.TxBlockCount; b++ {
		for i := 0; i < per; i++ {
			t.slots = append(t.slots, b*g.TxBlockSize+i*g.TxFrameSize)
		}
	}
	return t
}

// fits applies the kernel's length rules (tpacket_snd): at least an
// Ethernet header, at most MTU+14, or MTU+18 when the frame carries an
// 802.1Q tag; and never more than the slot holds. It counts rejects.
func (t *txRing) fits(n int, tpid uint16) bool {
	limit := t.mtu + ethHdrLen
	if tpid == 0x8100 {
		limit += vlanTagLen
	}
	switch {
	case n < ethHdrLen:
		t.runt.Add(1)
		return false
	case n > limit || n > t.slotCap:
		t.oversize.Add(1)
		return false
	}
	return true
}

// slot returns the offset of the next free slot, or false if the ring is
// full (queued, or still in flight in the kernel).
func (t *txRing) slot() (int, bool) {
	if t.queued == len(t.slots) {
		return 0, false
	}
	off := t.slots[t.head]
	if loadStatus(t.mem, off+offStatus)&txBusy != 0 {
		return 0, false
	}
	return off, true
}

// commit queues the slot at off (the head slot) with an n-byte frame.
func (t *txRing) commit(off, n int) {
	h := t.mem[off : off+tpHdrLen]
	ne.PutUint32(h[offNextOffset:], 0)
	ne.PutUint32(h[offSnaplen:], uint32(n))
	ne.PutUint32(h[offLen:], uint32(n))
	storeStatus(t.mem, off+offStatus, unix.TP_STATUS_SEND_REQUEST)
	t.head++
	if t.head == len(t.slots) {
		t.head = 0
	}
	t.queued++
}

func (t *txRing) append(frame []byte) bool {
	tpid := uint16(0)
	if len(frame) >= ethHdrLen {
		tpid = binary.BigEndian.Uint16(frame[12:])
	}
	if !t.fits(len(frame), tpid) {
		return false
	}
	off, ok := t.slot()
	if !ok {
		return false
	}
	copy(t.mem[off+tpHdrLen:], frame)
	t.commit(off, len(frame))
	return true
}

func (t *txRing) appendTagged(frame []byte, tpid, tci uint16) bool {
	n := len(frame) + vlanTagLen
	if len(frame) < ethHdrLen {
		t.runt.Add(1)
		return false
	}
	if !t.fits(n, tpid) {
		return false
	}
	off, ok := t.slot()
	if !ok {
		return false
	}
	d := t.mem[off+tpHdrLen : off+tpHdrLen+n]
	copy(d[:12], frame[:12])
	binary.BigEndian.PutUint16(d[12:], tpid)
	binary.BigEndian.PutUint16(d[14:], tci)
	copy(d[16:], frame[12:])
	t.commit(off, n)
	return true
}

// buffer returns the data area of the next free slot for a caller that
// builds the frame in place, or nil if the ring is full.
func (t *txRing) buffer() []byte {
	off, ok := t.slot()
	if !ok {
		return nil
	}
	return t.mem[off+tpHdrLen : off+tpHdrLen+t.slotCap : off+tpHdrLen+t.slotCap]
}

// commitBuffer queues the slot handed out by buffer with its first n bytes.
func (t *txRing) commitBuffer(n int) bool {
	off, ok := t.slot()
	if !ok {
		return false
	}
	tpid := uint16(0)
	if n >= ethHdrLen && n <= t.slotCap {
		tpid = binary.BigEndian.Uint16(t.mem[off+tpHdrLen+12:])
	}
	if !t.fits(n, tpid) {
		return false
	}
	t.commit(off, n)
	return true
}

// reap advances the mirrored kernel head over the slots the kernel took and
// repairs a slot it rejected. It returns how many slots were taken and how
// many were rejected.
func (t *txRing) reap() (taken, rejected int) {
	for t.queued > 0 {
		off := t.slots[t.khead]
		st := loadStatus(t.mem, off+offStatus)
		switch {
		case st&unix.TP_STATUS_SEND_REQUEST != 0:
			t.sent.Add(uint64(taken))
			return taken, rejected
		case st&unix.TP_STATUS_WRONG_FORMAT != 0:
			t.dropHead()
			t.wrongFormat.Add(1)
			rejected++
		default: // SENDING, or AVAILABLE when already completed
			t.khead++
			if t.khead == len(t.slots) {
				t.khead = 0
			}
			t.queued--
			taken++
		}
	}
	t.sent.Add(uint64(taken))
	return taken, rejected
}

// dropHead discards the frame at the kernel's head, which the kernel marked
// TP_STATUS_WRONG_FORMAT and will not move past. The queued frames behind it
// move up one slot, so that the head slot holds the next frame and the order
// is kept; the last queued slot becomes free. The kernel does not touch
// queued slots outside sendto, which only this goroutine calls.
func (t *txRing) dropHead() {
	i := t.khead
	for k := 1; k < t.queued; k++ {
		j := i + 1
		if j == len(t.slots) {
			j = 0
		}
		dst, src := t.slots[i], t.slots[j]
		n := int(ne.Uint32(t.mem[src+offLen:]))
		copy(t.mem[dst+tpHdrLen:dst+tpHdrLen+n], t.mem[src+tpHdrLen:src+tpHdrLen+n])
		ne.PutUint32(t.mem[dst+offSnaplen:], uint32(n))
		ne.PutUint32(t.mem[dst+offLen:], uint32(n))
		ne.PutUint32(t.mem[dst+offNextOffset:], 0)
		storeStatus(t.mem, dst+offStatus, unix.TP_STATUS_SEND_REQUEST)
		i = j
	}
	storeStatus(t.mem, t.slots[i]+offStatus, unix.TP_STATUS_AVAILABLE)
	t.head = i
	t.queued--
}

// flush hands all queued slots to the kernel. ENOBUFS (driver queue full
// with PACKET_QDISC_BYPASS, or no carrier) and EAGAIN (send buffer
// exhausted) leave frames in SEND_REQUEST; flush backs off and retries until
// the kernel took them all or made no progress for retryTimeout, in which
// case the frames stay queued for the next flush. After such a stall, flush
// makes a single attempt per call until the kernel takes frames again.
func (t *txRing) flush() error {
	var (
		deadline time.Time
		spins    int
		pause    = txMinSleep
	)
	for t.queued > 0 {
		err := t.send()
		taken, rejected := t.reap()
		if taken > 0 || rejected > 0 {
			t.stalled = false
		}
		if t.queued == 0 {
			return nil
		}
		switch {
		case err == nil:
			// The kernel stopped early without an error: it could not
			// allocate an skb after sending some frames. Retry.
		case errors.Is(err, unix.ENOBUFS):
			t.enobufs.Add(1)
		case errors.Is(err, unix.EAGAIN):
			t.eagain.Add(1)
		case errors.Is(err, unix.EINTR):
		case rejected > 0:
			// EINVAL/EMSGSIZE for a malformed frame, now dropped: go on
			// with the rest right away.
			continue
		default:
			return fmt.Errorf("send: %w", err)
		}
		if taken > 0 || rejected > 0 {
			deadline, spins, pause = time.Time{}, 0, txMinSleep
			continue
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(t.retryTimeout)
		}
		if t.stalled || now.After(deadline) {
			if !t.stalled {
				t.stalls.Add(1)
				t.stalled = true
			}
			if err == nil {
				return fmt.Errorf("%w, %d frames kept queued", ErrTxStalled, t.queued)
			}
			return fmt.Errorf("%w, %d frames kept queued: %w", ErrTxStalled, t.queued, err)
		}
		if spins < txSpinRetries {
			spins++
			runtime.Gosched()
			continue
		}
		t.sleep(pause)
		pause = min(2*pause, txMaxSleep)
	}
	return nil
}

// drop forgets all queued frames (used when the socket is closed).
func (t *txRing) drop() int {
	n := t.queued
	t.queued = 0
	t.khead = t.head
	return n
}
