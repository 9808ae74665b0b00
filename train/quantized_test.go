package train

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// quantizeModel rewrites the model at src with every matrix (2-D tensor)
// in typ, through ggml's own quantization, as llama-quantize would.
func quantizeModel(t testing.TB, src, dst string, typ gguf.TensorType) {
	t.Helper()
	rewriteModel(t, src, dst, func(w *gguf.Writer, ti gguf.TensorInfo, d []float32) error {
		switch {
		case len(ti.Shape) < 2 || ti.Shape[1] < 2:
			return w.AddTensor(ti.Name, ti.Shape, gguf.F32, d)
		case typ == gguf.F16:
			return w.AddTensor(ti.Name, ti.Shape, typ, d)
		}
		raw, err := llamacpp.Quantize(llamacpp.Type(typ), d, int(ti.Shape[0]))
		if err != nil {
			return err
		}
		return w.AddTensorBytes(ti.Name, ti.Shape, typ, raw)
	}, nil)
}

// TestQuantizedParity: on a model stored quantized or in half precision
// the trainer holds the matrices in the file's type and multiplies by them
// as llama.cpp does (weights and activations quantized), so its logprobs
// are llama_decode's on the same file to float rounding on short
// sequences. On long ones an upstream rounding difference now and then
// tips an activation across a quantization boundary, and that position
// and the ones attending to it differ by up to a few hundredths: the test
// bounds the mean there, against dequantized weights, which differ
// everywhere. The weights take the file's bytes, not four per value.
func TestQuantizedParity(t *testing.T) {
	src := tinyModel(t, "llama")
	short := randomSeqs(51, 3, 30, 60, 512)
	long := randomSeqs(51, 3, 500, 700, 512)
	for _, tc := range []struct {
		typ   gguf.TensorType
		want  float64 // the largest |Δ logprob| allowed when kept, short sequences
		ratio float64 // kept ÷ dequantized mean |Δ| allowed, long sequences
	}{
		{gguf.Q8_0, 1e-5, 0.2},
		{gguf.Q4_0, 1e-5, 0.2},
		{gguf.F16, 3e-3, 1},
		{gguf.BF16, 3e-3, 1},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			quantizeModel(t, src, path, tc.typ)
			m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var worst, mean [2]float64
			var weights, off [2]int64 // off: long sequences' positions more than 1e-4 away
			n := 0
			for i, dequantize := range []bool{false, true} {
				o := testOptions()
				o.DequantizeBase = dequantize
				tr, err := New(path, o)
				if err != nil {
					t.Fatal(err)
				}
				weights[i] = tr.memoryNeed(tr.base).weights
				_, lps, _, err := columns(tr.Evaluate(context.Background(), append(short, long...)))
				tr.Close()
				if err != nil {
					t.Fatal(err)
				}
				for j, s := range short {
					worst[i] = math.Max(worst[i], maskedDiff(t, lps[j], decodeAll(t, m, s.Tokens, nil), s.Mask))
				}
				n = 0
				for j, s := range long {
					want := decodeAll(t, m, s.Tokens, nil)
					for k, on := range s.Mask {
						if on {
							d := math.Abs(float64(lps[len(short)+j][k] - want[k]))
							mean[i] += d
							n++
							if d > 1e-4 {
								off[i]++
							}
						}
					}
				}
				mean[i] /= float64(n)
			}
			t.Logf("%v: |Δ logprob| to llama_decode, short sequences max %.3g (dequantized %.3g), long ones mean %.3g (%.3g), %d of %d positions over 1e-4 (%d); weights %d bytes (%d)",
				tc.typ, worst[0], worst[1], mean[0], mean[1], off[0], n, off[1], weights[0], weights[1])
			if worst[0] > tc.want || worst[0] >= worst[1] {
				t.Errorf("kept in %v the logprobs of short sequences differ from llama_decode by %g (dequantized %g), want ≤ %g", tc.typ, worst[0], worst[1], tc.want)
			}
			if mean[0] > tc.ratio*mean[1] {
				t.Errorf("kept in %v the logprobs of long sequences differ from llama_decode by %g on average, dequantized %g: want at most %g times that", tc.typ, mean[0], mean[1], tc.ratio)
			}
			if weights[0] >= weights[1]*3/4 {
				t.Errorf("kept in %v the weights take %d bytes, dequantized %d", tc.typ, weights[0], weights[1])
			}
		})
	}
}

// TestQuantizedTraining trains an adapter on a Q8_0 model: the input
// gradients through the quantized matrices agree between the transposed
// copies (mul_mat) and ggml's out_prod, a few steps lower the loss, and
// the merged model SaveModel writes is the one written from the
// dequantized weights, to the byte.
func TestQuantizedTraining(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q8.gguf")
	quantizeModel(t, tinyModel(t, "qwen3"), path, gguf.Q8_0)
	ctx := context.Background()
	var grads [2][][]float32
	for i, outProd := range []bool{false, true} {
		o := testOptions()
		o.OutProdBackward = outProd
		o.BackwardType = BackwardF32 // exact transposes: the same sums as out_prod
		o.KLCoef = 0.1
		tr, err := New(path, o)
		if err != nil {
			t.Fatal(err)
		}
		if tr.w.layers[0].mat["ffn_up"].Type != llamacpp.Type(gguf.Q8_0) {
			t.Fatalf("ffn_up held as type %d, want Q8_0", tr.w.layers[0].mat["ffn_up"].Type)
		}
		grads[i] = ppoGradients(t, tr)
		tr.Close()
	}
	maxDiff, maxAbs := nestedDiff(grads[0], grads[1])
	if maxAbs == 0 || maxDiff > 1e-4*maxAbs {
		t.Fatalf("gradients through Q8_0 weights differ by %g between mul_mat and out_prod (largest %g)", maxDiff, maxAbs)
	}

	var saved [2][]byte
	for i, dequantize := range []bool{false, true} {
		o := testOptions()
		o.LR = 1e-2
		o.DequantizeBase = dequantize
		tr, err := New(path, o)
		if err != nil {
			t.Fatal(err)
		}
		seqs := randomSeqs(23, 4, 20, 40, tr.Vocab())
		first, err := tr.SFTStep(ctx, seqs)
		if err != nil {
			t.Fatal(err)
		}
		last := first
		for range 5 {
			if last, err = tr.SFTStep(ctx, seqs); err != nil {
				t.Fatal(err)
			}
		}
		if !(last < first) {
			t.Errorf("dequantize %v: SFT loss %g → %g, want lower", dequantize, first, last)
		}
		// The same adapter on both (A from the seed, B random): the
		// merge adds it to the dequantized base either way.
		fresh, err := New(path, o)
		if err != nil {
			t.Fatal(err)
		}
		randomize(fresh, 9, 0.05)
		out := filepath.Join(t.TempDir(), "merged.gguf")
		if err := fresh.SaveModel(out, gguf.F32); err != nil {
			t.Fatal(err)
		}
		fresh.Close()
		tr.Close()
		if saved[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(saved[0], saved[1]) {
		t.Error("SaveModel from the Q8_0 weights differs from SaveModel from their F32 dequantization")
	}
}

// TestQ8TransposedGradients: the Q8_0 transposed copies a quantized model
// gets by default (transposedType) quantize the backward's gradients to 8
// bits a value, as the forward pass quantizes its activations: the PPO
// gradient of every parameter keeps its direction (cosine ≥ 0.999; 0.9997
// and up measured) within 5% of its length (1–2.6% measured) of the
// gradient through the exact F32 transposes, in a quarter of their memory.
func TestQ8TransposedGradients(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q8.gguf")
	quantizeModel(t, tinyModel(t, "qwen3"), path, gguf.Q8_0)
	var grads [2][][]float32
	var copies [2]int64
	for i, typ := range []string{BackwardF32, ""} {
		o := testOptions()
		o.BackwardType = typ
		o.KLCoef, o.EntropyCoef = 0.1, 0.01
		tr, err := New(path, o)
		if err != nil {
			t.Fatal(err)
		}
		want := llamacpp.TypeF32
		if typ == "" {
			want = llamacpp.TypeQ8_0
		}
		if got := tr.wT[tr.w.layers[0].mat["ffn_up"]].Type; got != want {
			t.Fatalf("backward type %q: ffn_up's transposed copy is type %d, want %d", typ, got, want)
		}
		copies[i] = tr.memoryNeed(tr.base).transposes
		grads[i] = ppoGradients(t, tr)
		tr.Close()
	}
	if !(copies[1] < copies[0]/3) {
		t.Errorf("Q8_0 copies take %d bytes, F32 copies %d: want under a third", copies[1], copies[0])
	}
	worst := 0.0
	for j := range grads[0] {
		var dot, a2, b2, d2 float64
		for k, a := range grads[0][j] {
			b := grads[1][j][k]
			dot += float64(a) * float64(b)
			a2 += float64(a) * float64(a)
			b2 += float64(b) * float64(b)
			d2 += float64(a-b) * float64(a-b)
		}
		if a2 == 0 {
			continue
		}
		rel := math.Sqrt(d2 / a2)
		worst = max(worst, rel)
		if cos := dot / math.Sqrt(a2*b2); cos < 0.999 || rel > 0.05 {
			t.Errorf("parameter %d: Q8_0 copies' gradient at cosine %.6f, relative error %.4f from the F32 copies'", j, cos, rel)
		}
	}
	if worst == 0 {
		t.Fatal("the gradients are identical: the backward did not multiply by the Q8_0 copies")
	}
	t.Logf("largest relative error of a parameter's gradient: %.5f", worst)
}
