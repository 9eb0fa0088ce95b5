#include "textflag.h"

// func prefetchPipe(st *stripe, slot *atomic.Uint64, e *entry)
TEXT ·prefetchPipe(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ	st+0(FP), AX
	MOVQ	slot+8(FP), BX
	MOVQ	e+16(FP), CX
	PREFETCHT0	(AX)
	PREFETCHT0	(BX)
	PREFETCHT0	24(BX) // the last of prefetchProbe slots
	PREFETCHT0	(CX)   // entries are one aligned cache line
	RET

// func prefetchKey(st *stripe, slot *atomic.Uint64)
TEXT ·prefetchKey(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	st+0(FP), AX
	MOVQ	slot+8(FP), BX
	PREFETCHT0	(AX)
	PREFETCHT0	(BX)
	PREFETCHT0	24(BX)
	RET

// func prefetchConn(e *entry, c *entryCold)
TEXT ·prefetchConn(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	e+0(FP), AX
	MOVQ	c+8(FP), BX
	PREFETCHT0	(AX)
	PREFETCHT0	(BX)
	RET

// func prefetchSlot(p *uint32)
TEXT ·prefetchSlot(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	p+0(FP), AX
	PREFETCHT0	(AX)
	RET
