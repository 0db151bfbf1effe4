#include "textflag.h"

// func lines(p unsafe.Pointer, n uintptr)
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
next:
	PRFM (R0), PLDL1KEEP
	ADD  $64, R0
	SUBS $64, R1
	BHI  next
	RET
