package llama

import "golang.org/x/sys/cpu"

// hasExpAVX2 reports whether expAVX2 may run: it uses 256-bit integer
// shifts and adds (AVX2), and the OS must save the wide registers.
var hasExpAVX2 = cpu.X86.HasAVX2

// expAVX2 sets dst[i] = expNonPos(float64(src[i])*scale - m) for i < n
// (n a multiple of 4), four at a time, and returns their sum taken in
// index order. It does expNonPos's operations in the same order (no fused
// multiply-adds, floor by VROUNDPD as in math.Floor), so every term and
// the sum are bit-for-bit the scalar ones.
//
//go:noescape
func expAVX2(dst *float64, src *float32, n int, scale, m float64, tab *[expTabLen][4]float64) (sum float64)

// expBlock computes the leading multiple of 4 of exps with expAVX2 when the
// CPU has it and returns how many terms it computed and their sum.
func expBlock(x []float32, scale, m float64, exps []float64) (int, float64) {
	n := len(x) &^ 3
	if !hasExpAVX2 || n == 0 {
		return 0, 0
	}
	return n, expAVX2(&exps[0], &x[0], n, scale, m, &expTab)
}
