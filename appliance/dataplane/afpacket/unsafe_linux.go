package afpacket

import (
	"sync/atomic"
	"unsafe"
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
