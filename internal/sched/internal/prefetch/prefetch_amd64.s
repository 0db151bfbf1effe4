#include "textflag.h"

// func lines(p unsafe.Pointer, n uintptr)
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
next:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $64, CX
	JHI  next
	RET
