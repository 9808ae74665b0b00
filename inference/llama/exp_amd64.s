#include "textflag.h"

// func expAVX2(dst *float64, src *float32, n int, scale, m float64, tab *[expTabLen][4]float64) (sum float64)
//
// Per lane, exactly expNonPos(float64(x)*scale - m); see expNonPos and
// expTab for the constants (each row is one constant in all four lanes).
// The sum is taken one term at a time in index order, as the scalar loop
// does (a tree of lanes would round differently); its chain of additions
// overlaps the next block's exponentials.
TEXT ·expAVX2(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD scale+24(FP), Y14
	VBROADCASTSD m+32(FP), Y12 // not Y15: X15 is the Go ABI's zero register
	MOVQ         tab+40(FP), R8
	VXORPD       X9, X9, X9 // sum

loop:
	CMPQ CX, $4
	JLT  done
	VCVTPS2PD (SI), Y0     // float64(x)
	VMULPD    Y14, Y0, Y0  // ·scale
	VSUBPD    Y12, Y0, Y0  // xx = x·scale − m
	VCMPPD    $5, 0(R8), Y0, Y13 // keep = !(xx < −708): NLT_US, so NaN stays NaN as in Go

	// k = floor(xx·log2e + 0.5)
	VMULPD   32(R8), Y0, Y1
	VADDPD   64(R8), Y1, Y1
	VROUNDPD $1, Y1, Y1

	// r = xx − k·ln2hi − k·ln2lo
	VMULPD 96(R8), Y1, Y2
	VSUBPD Y2, Y0, Y2
	VMULPD 128(R8), Y1, Y3
	VSUBPD Y3, Y2, Y2

	// p = 1 + r(1 + r(1/2 + r(1/6 + r(1/24 + r(1/120 + r(1/720 + r(1/5040 + r/40320)))))))
	VMULPD 160(R8), Y2, Y3
	VADDPD 192(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 224(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 256(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 288(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 320(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 352(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 384(R8), Y3, Y3
	VMULPD Y3, Y2, Y3
	VADDPD 384(R8), Y3, Y3

	// 2^k = bits((k + 1023) << 52). k + 1.5·2^52 holds k in its low
	// mantissa bits (k is an integer in [−1022, 1] on kept lanes); the
	// shift drops everything above the low 12 bits.
	VADDPD 416(R8), Y1, Y4
	VPADDQ 448(R8), Y4, Y4
	VPSLLQ $52, Y4, Y4
	VMULPD Y4, Y3, Y3

	VANDPD  Y13, Y3, Y3 // below −708: +0
	VMOVUPD Y3, (DI)

	// sum += e0; sum += e1; sum += e2; sum += e3
	VADDSD       X3, X9, X9
	VPERMILPD    $1, X3, X5
	VADDSD       X5, X9, X9
	VEXTRACTF128 $1, Y3, X6
	VADDSD       X6, X9, X9
	VPERMILPD    $1, X6, X7
	VADDSD       X7, X9, X9

	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $4, CX
	JMP  loop

done:
	VZEROUPPER
	MOVSD X9, sum+48(FP)
	RET
