package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaxSumExpMatchesScalar: the fast path (vector terms, plain-comparison
// maximum) gives the term-by-term reference's bits: the draws compare
// running sums of the terms, so any difference could change a token.
func TestMaxSumExpMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inf := float32(math.Inf(-1))
	tests := []struct {
		name  string
		x     []float32
		scale float64
	}{
		{"empty", nil, 1},
		{"one", []float32{3}, 1},
		{"tail of 3", []float32{1, 2, 3, 4, 5, 6, 7}, 1},
		{"masked", []float32{inf, 0, inf, -1, inf, 2, inf, inf, 1}, 1},
		{"zero max", []float32{-1, float32(math.Copysign(0, -1)), 0, -3, -2}, 1},
		{"infinite max", []float32{-1, float32(math.Inf(1)), 0, -3, -2}, 1},
		{"NaN", []float32{-1, 2, float32(math.NaN()), -3, -2, 1, 0.5, 0.25}, 1},
		{"all masked", []float32{inf, inf, inf, inf, inf}, 1},
		{"underflow", []float32{0, -700, -707.5, -708, -708.1, -720, -1e30, 5}, 1},
		{"subnormal range", []float32{-705, -706, -707, -707.9, 0, 0, 0, 0}, 1},
	}
	for _, scale := range []float64{1, 1 / 0.7, 2, 0.1, 100} {
		for _, n := range []int{4, 33, 512, 4099} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 8)
			}
			tests = append(tests, struct {
				name  string
				x     []float32
				scale float64
			}{"random", x, scale})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := make([]float64, len(tt.x)), make([]float64, len(tt.x))
			gm, gs := maxSumExp(tt.x, tt.scale, got)
			wm, ws := exactMaxSumExp(tt.x, tt.scale, want)
			if !sameBits(gm, wm) || !sameBits(gs, ws) {
				t.Fatalf("scale %v: got max %v sum %v, want %v %v", tt.scale, gm, gs, wm, ws)
			}
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("scale %v: term %d of x=%v: got %v, want %v", tt.scale, i, tt.x[i], got[i], want[i])
				}
			}
		})
	}
}

// FuzzMaxSumExp: the vector path gives the scalar path's bits for any
// logits (four per input, the vector block's width, plus a tail).
func FuzzMaxSumExp(f *testing.F) {
	f.Add(float32(0), float32(-1), float32(-707.9), float32(3), float32(0.5), 1.0)
	f.Add(float32(math.Inf(-1)), float32(-1e30), float32(2), float32(1e30), float32(-750), 1/0.7)
	f.Fuzz(func(t *testing.T, a, b, c, d, e float32, scale float64) {
		if scale <= 0 || scale > 1e6 || math.IsNaN(scale) {
			return
		}
		x := []float32{a, b, c, d, e}
		got, want := make([]float64, len(x)), make([]float64, len(x))
		gm, gs := maxSumExp(x, scale, got)
		wm, ws := exactMaxSumExp(x, scale, want)
		if !sameBits(gs, ws) || !sameBits(gm, wm) {
			t.Fatalf("x %v scale %v: got max %v sum %v, want %v %v", x, scale, gm, gs, wm, ws)
		}
		for i := range got {
			if !sameBits(got[i], want[i]) {
				t.Fatalf("x %v scale %v: term %d got %v, want %v", x, scale, i, got[i], want[i])
			}
		}
	})
}

// sameBits is bit equality, except that any NaN equals any NaN (their
// payloads are not specified).
func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}
