#include "textflag.h"

// func prefetchStripe(st *stripe, slot *atomic.Uint64)
TEXT ·prefetchStripe(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	st+0(FP), AX
	MOVQ	slot+8(FP), BX
	PREFETCHT0	(AX)
	PREFETCHT0	(BX)
	PREFETCHT0	24(BX) // the last of prefetchProbe slots
	RET

// func prefetchLines(e *entry)
TEXT ·prefetchLines(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	e+0(FP), AX
	PREFETCHT0	(AX)
	PREFETCHT0	44(AX)
	PREFETCHT0	87(AX) // the last byte of the 88-byte entry
	RET
