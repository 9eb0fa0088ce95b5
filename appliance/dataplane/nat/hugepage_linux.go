package nat

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks the kernel to back the big arrays of t (entries and
// index slots) with transparent huge pages when they are first touched.
// At 1M connections they span 30000 4 KiB pages, so nearly every lookup
// and prefetch would otherwise also wait for a page walk. It is a hint:
// a kernel without transparent huge pages refuses it, and nothing
// changes.
func adviseHuge(t *table) {
	adviseRange(unsafe.Pointer(unsafe.SliceData(t.entries)), uintptr(len(t.entries))*unsafe.Sizeof(entry{}))
	adviseRange(unsafe.Pointer(unsafe.SliceData(t.cold)), uintptr(len(t.cold))*unsafe.Sizeof(entryCold{}))
	adviseRange(unsafe.Pointer(unsafe.SliceData(t.slots)), uintptr(len(t.slots))*unsafe.Sizeof(atomic.Uint64{}))
}

// adviseRange advises the 2 MiB-aligned part of the n bytes at p.
func adviseRange(p unsafe.Pointer, n uintptr) {
	const huge = 2 << 20
	skip := (huge - uintptr(p)%huge) % huge
	if n < skip+huge {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, skip)), (n-skip)&^(huge-1))
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: see adviseHuge
}
