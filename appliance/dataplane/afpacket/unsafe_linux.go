package afpacket

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file is the only one in the package that uses unsafe: the status
// words of ring blocks and slots are shared with the kernel and must be read
// and written atomically (acquire/release) in place.

// loadStatus atomically loads the 32-bit status word at mem[off:off+4].
// off must be a multiple of 4.
func loadStatus(mem []byte, off int) uint32 {
	_ = mem[off+3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&mem[off])))
}

// storeStatus atomically stores v into the 32-bit status word at
// mem[off:off+4]. off must be a multiple of 4.
func storeStatus(mem []byte, off int, v uint32) {
	_ = mem[off+3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&mem[off])), v)
}

// copySender is a TxCopy socket's sendmmsg state: one message and one
// iovec per slot, pointing into the slots, built once.
type copySender struct {
	msgs []unix.Mmsghdr
	iovs []unix.Iovec
	sa   unix.RawSockaddrLinklayer
}

func newCopySender(t *txRing, ifindex int) *copySender {
	c := &copySender{msgs: make([]unix.Mmsghdr, len(t.slots)), iovs: make([]unix.Iovec, len(t.slots))}
	c.sa = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Ifindex: int32(ifindex)}
	for i, off := range t.slots {
		c.iovs[i].Base = &t.mem[off+tpHdrLen]
		c.msgs[i].Hdr.Iov = &c.iovs[i]
		c.msgs[i].Hdr.Iovlen = 1
		c.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&c.sa))
		c.msgs[i].Hdr.Namelen = unix.SizeofSockaddrLinklayer
	}
	return c
}

// send passes t's queued slots, from the kernel head on, to sendmmsg (in
// runs that do not wrap around the end of the ring) and returns how many
// the kernel took in order.
func (c *copySender) send(fd int, t *txRing) (int, error) {
	done := 0
	for done < t.queued {
		first := (t.khead + done) % len(t.slots)
		n := min(t.queued-done, len(t.slots)-first)
		for i := first; i < first+n; i++ {
			c.iovs[i].SetLen(int(ne.Uint32(t.mem[t.slots[i]+offLen:])))
		}
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&c.msgs[first])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
		if errno != 0 {
			return done, errno
		}
		done += int(r)
		if int(r) < n {
			return done, nil // stopped early: the caller retries the rest
		}
	}
	return done, nil
}
