package train

import (
	"fmt"

	"github.com/omar-selfplay/omar/llamacpp"
)

// declareTransposes creates, in LoRA mode, a transposed copy of every
// frozen matrix the backward pass multiplies by: the seven matrices of
// each layer and the output layer. The backward of mul_mat(W, x) with
// respect to x is then mul_mat(Wᵀ, dy) on the forward kernels instead of
// ggml's out_prod (llamacpp.Graph.UseTransposedBackward). In full mode
// the matrices change every step and are parameters: nothing is copied.
// On CUDA out_prod is a cuBLAS product as fast as mul_mat, so the copies
// would only double the weights' memory: they are made on the CPU only.
// Their type is transposedType's.
func (t *Trainer) declareTransposes() {
	if t.opts.Full || t.opts.OutProdBackward || t.opts.Device == "cuda" {
		return
	}
	t.wT = map[llamacpp.Tensor]llamacpp.Tensor{}
	add := func(w llamacpp.Tensor) {
		if w == nil || t.wT[w] != nil {
			return
		}
		wT := t.wctx.NewTensor(transposedType(w, t.opts.BackwardType), w.Ne[1], w.Ne[0])
		t.wT[w] = llamacpp.SetName(wT, fmt.Sprintf("%.56s.T", llamacpp.GetName(w)))
	}
	for _, l := range t.w.layers {
		for _, m := range AllModules {
			add(l.mat[m])
		}
	}
	add(t.w.output)
}

// transposedType is the type of w's transposed copy under
// Options.BackwardType. By default a matrix the file stores quantized gets
// a Q8_0 copy (a quarter of F32's memory: 0.63 instead of 2.4 GB for
// Qwen3-0.6B, 4.3 instead of 16 GB for a 4B model); the backward's
// products with it quantize the gradient to 8 bits a value, as the
// forward pass quantizes the activations, and the LoRA gradients stay
// within a few parts in a thousand of the F32 copy's
// (TestQ8TransposedGradients; docs/results/2026-12-07-backward-speed.md).
// F32, F16 and BF16 matrices get F32 copies, the exact transposes, as do
// matrices whose columns do not fill Q8_0 blocks of 32.
func transposedType(w llamacpp.Tensor, backward string) llamacpp.Type {
	if w.Ne[1]%32 != 0 {
		return llamacpp.TypeF32
	}
	switch backward {
	case BackwardQ8_0:
		return llamacpp.TypeQ8_0
	case BackwardF32:
		return llamacpp.TypeF32
	}
	if w.Type == llamacpp.TypeF32 || w.Type == llamacpp.TypeF16 || w.Type == llamacpp.TypeBF16 {
		return llamacpp.TypeF32
	}
	return llamacpp.TypeQ8_0
}

// transpose returns the [cols, rows] transpose of a row-major matrix of
// rows rows of cols values (ggml's [ne0 = cols, ne1 = rows]).
func transpose(a []float32, cols, rows int) []float32 {
	out := make([]float32, len(a))
	const blk = 32 // cache blocking: a 32×32 tile of each side stays in L1
	for r0 := 0; r0 < rows; r0 += blk {
		for c0 := 0; c0 < cols; c0 += blk {
			for r := r0; r < min(r0+blk, rows); r++ {
				for c := c0; c < min(c0+blk, cols); c++ {
					out[c*rows+r] = a[r*cols+c]
				}
			}
		}
	}
	return out
}

// transposeForBackward copies xᵀ in the forward pass of a training graph
// whose backward runs on mul_mat (Options.OutProdBackward off), so that
// the backward product out_prod(x, dcᵀ) becomes mul_mat(xᵀ, dc).
//
// forward uses it for the attention: c = mul_mat(a, b) has the gradients
// da = out_prod(b, dc) and db = out_prod(a, dcᵀ) = mul_mat(aᵀ, dc). For
// the scores that gives dq = mul_mat(kᵀ, dkq) and dk = mul_mat(qᵀ, dkqᵀ)
// (scoresForBackward); for the output kqv = mul_mat(vᵀ, s) it is
// ds = mul_mat(v, dkqv), where a same-shape reshape before the head
// permute makes ggml's backward deliver dkqv contiguous. dvᵀ =
// out_prod(s, dkqv) stays: its rows are the keys, long enough for
// out_prod's vector kernel.
func (b *built) transposeForBackward(ctx llamacpp.Context, x llamacpp.Tensor) llamacpp.Tensor {
	if xT := b.known[x]; xT != nil {
		return xT
	}
	xT := ctx.Cont(ctx.Transpose(x))
	b.known[x] = xT
	b.order = append(b.order, xT)
	return xT
}

// scoresForBackward computes the attention scores kᵀq [kT, qT, H, nb] of a
// training graph so that both their gradients run on mul_mat. Written as
// mul_mat(k, q), dk = out_prod(q, dkq) has rows of the head width (32
// values for the built-in model), which ggml's out_prod runs one scalar
// at a time — a fifth of a LoRA update's CPU time. Here the scores are
// taken transposed, mul_mat(q, k), and turned back with a copy behind a
// same-shape reshape, whose backward makes the transposed score gradient
// contiguous: dk = mul_mat(qᵀ, dkqᵀ) and dq = mul_mat(kᵀ, dkq) on the
// forward kernels, with qᵀ and kᵀ copied. Once the backward is built the
// forward copy becomes mul_mat(k, q) itself and the transposed product is
// left uncomputed (llamacpp.Graph.UseDirectProducts), so the price is one
// copy of the score gradient, a few nanoseconds a value, against the 32
// scalar products of each value's out_prod; the sums are the same.
func (b *built) scoresForBackward(ctx llamacpp.Context, q, k llamacpp.Tensor) llamacpp.Tensor {
	b.transposeForBackward(ctx, q)
	b.transposeForBackward(ctx, k)
	qk := ctx.MulMat(q, k) // [qT, kT, H, nb]
	kq := ctx.Cont(ctx.Transpose(ctx.Reshape(qk, qk.Ne[:]...)))
	b.direct = append(b.direct, kq)
	return kq
}
