package dataplane

import "context"

// Bounds of the PPPoE client's control frame queue: a control frame is at
// most an untagged Ethernet frame of RFC 4638's larger payloads.
const (
	pppoeQueueFrames = 64
	pppoeFrameMax    = 2048
)

// pppoeQueue carries the PPPoE control frames the WAN port's workers
// receive (discovery, LCP, PAP, CHAP, the NCPs) to the PPPoE client:
// preallocated buffers passed through channels, so that a worker copies
// a frame without allocating and never blocks (put fails when every
// buffer is taken).
type pppoeQueue struct {
	// dhcp6 is the DHCPv6 client's queue: the session's IPv6/UDP
	// datagrams to port 546, as untagged Ethernet frames (nil in itself).
	dhcp6 *pppoeQueue
	bufs  [][]byte
	free  chan int       // indexes of free buffers
	full  chan pppoeItem // filled buffers, in order
}

type pppoeItem struct {
	buf, n int
}

func newPPPoEQueue() *pppoeQueue {
	q := newQueue(pppoeQueueFrames)
	q.dhcp6 = newQueue(dhcp6QueueFrames)
	return q
}

// dhcp6QueueFrames bounds the DHCPv6 client's queue.
const dhcp6QueueFrames = 16

func newQueue(frames int) *pppoeQueue {
	q := &pppoeQueue{bufs: make([][]byte, frames), free: make(chan int, frames), full: make(chan pppoeItem, frames)}
	for i := range q.bufs {
		q.bufs[i] = make([]byte, pppoeFrameMax)
		q.free <- i
	}
	return q
}

// put copies the untagged frame b into the queue; false: the queue is
// full or b too long. It does not allocate or block.
func (q *pppoeQueue) put(b []byte) bool {
	if len(b) > pppoeFrameMax {
		return false
	}
	select {
	case i := <-q.free:
		q.full <- pppoeItem{buf: i, n: copy(q.bufs[i], b)} // never blocks: a buffer per slot
		return true
	default:
		return false
	}
}

// receive calls input with each queued frame, in order, until ctx ends.
// The frame is valid only during the call.
func (q *pppoeQueue) receive(ctx context.Context, input func([]byte)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case it := <-q.full:
			input(q.bufs[it.buf][:it.n])
			q.free <- it.buf
		}
	}
}

// next copies the next queued frame into b (cut to len(b)) and returns
// its length, or false when done is closed first.
func (q *pppoeQueue) next(done <-chan struct{}, b []byte) (int, bool) {
	select {
	case <-done:
		return 0, false
	case it := <-q.full:
		n := copy(b, q.bufs[it.buf][:it.n])
		q.free <- it.buf
		return n, true
	}
}
