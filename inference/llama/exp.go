package llama

import "math"

// maxSumExp returns the maximum of x·scale and Σ exp(x·scale − max),
// leaving each term in exps (which must be at least as long as x); scale
// must be positive.
//
// This is the sampler's per-token cost: one exponential per vocabulary
// entry. The result must not depend on the path taken, since the draws
// compare running sums of the terms: the terms are computed four at a time
// where the CPU allows (expBlock), with the scalar operations, and summed in
// index order either way, so every path gives the same bits.
func maxSumExp(x []float32, scale float64, exps []float64) (float64, float64) {
	exps = exps[:len(x)]
	// The maximum of the float32 logits by plain comparison (the builtin
	// max costs several times more for its NaN and signed-zero rules);
	// float64(v)·scale is monotonic in v for scale > 0, so this is the
	// maximum of the products. Where those rules could matter (a zero
	// maximum, a NaN or an infinity anywhere) the exact loop below redoes it.
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	m := float64(mx) * scale
	if math.IsInf(m, -1) || mx == 0 {
		return exactMaxSumExp(x, scale, exps)
	}
	i, s := expBlock(x, scale, m, exps)
	for ; i < len(x); i++ {
		exps[i] = expNonPos(float64(x[i])*scale - m)
		s += exps[i]
	}
	if math.IsNaN(s) {
		return exactMaxSumExp(x, scale, exps)
	}
	return m, s
}

// exactMaxSumExp is maxSumExp term by term with the builtin max: the
// reference for inputs with NaNs, infinities, signed zeros or nothing at
// all to draw from.
func exactMaxSumExp(x []float32, scale float64, exps []float64) (float64, float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v)*scale)
	}
	if math.IsInf(m, -1) {
		clear(exps[:len(x)])
		return m, 0
	}
	s := 0.0
	for i, v := range x {
		exps[i] = expNonPos(float64(v)*scale - m)
		s += exps[i]
	}
	return m, s
}

// The constants of expNonPos (shared with the vector version's table).
const (
	log2e = 1.4426950408889634
	ln2hi = 6.93147180369123816490e-01
	ln2lo = 1.90821492927058770002e-10
	// expMin is where expNonPos stops: below the smallest normal float64.
	expMin = -708
)

// expNonPos is exp(x) for x ≤ 0, to about 1e-9 relative error, several
// times faster than math.Exp: the sampler takes one exponential per
// vocabulary entry per token, which on small models costs as much as the
// decode itself.
func expNonPos(x float64) float64 {
	if x < expMin { // also -Inf
		return 0
	}
	k := math.Floor(x*log2e + 0.5)
	r := x - k*ln2hi - k*ln2lo // |r| ≤ ln2/2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// expTab holds expNonPos's constants for expAVX2, one per row, repeated in
// each of the four lanes; the row order is the assembly's (offset 32·row).
var expTab = func() (t [expTabLen][4]float64) {
	rows := [expTabLen]float64{
		expMin, log2e, 0.5, ln2hi, ln2lo,
		1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1,
		0x1.8p52,                   // k + 1.5·2^52 puts the integer k in the low mantissa bits
		math.Float64frombits(1023), // the exponent bias, added as an integer
	}
	for i, v := range rows {
		t[i] = [4]float64{v, v, v, v}
	}
	return t
}()

const expTabLen = 15
