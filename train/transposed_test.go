package train

import (
	"context"
	"math"
	"testing"
)

func TestTranspose(t *testing.T) {
	a := []float32{1, 2, 3, 4, 5, 6} // 2 rows of 3
	got := transpose(a, 3, 2)
	want := []float32{1, 4, 2, 5, 3, 6}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("transpose = %v, want %v", got, want)
		}
	}
	big := make([]float32, 70*45)
	for i := range big {
		big[i] = float32(i)
	}
	back := transpose(transpose(big, 70, 45), 45, 70)
	for i := range big {
		if back[i] != big[i] {
			t.Fatalf("transpose twice differs at %d", i)
		}
	}
}

// TestTransposedBackwardMatchesOutProd computes the PPO gradient of the
// same minibatch with the frozen matrices' input gradients as mul_mat by
// their transposed copies (the default) and as ggml's out_prod: the
// rewrite must happen and the gradients agree to float rounding.
func TestTransposedBackwardMatchesOutProd(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			ctx := context.Background()
			var grads [2][][]float32
			for i, outProd := range []bool{false, true} {
				o := testOptions()
				o.OutProdBackward = outProd
				o.KLCoef, o.EntropyCoef = 0.1, 0.01
				tr := newTrainer(t, arch, o)
				randomize(tr, 5, 0.05)
				seqs := randomSeqs(17, 3, 20, 50, tr.Vocab())
				setRefLogprobs(t, tr, seqs)
				idx := []int{0, 1, 2}
				tr.gbuf.Clear(0)
				if _, err := tr.accumulate(ctx, tr.ppo, seqs, idx, tr.tokenWeights(seqs, idx)); err != nil {
					t.Fatal(err)
				}
				grads[i] = readParams(tr, true)
				rewritten := 0
				for k, b := range tr.cache {
					if k.kind == kindTrain {
						rewritten += b.transposed
					}
				}
				// Per layer the input gradients of q, k, v, output,
				// gate, up and down (layer 0's q, k and v read the
				// embeddings, which need none), the output layer, and
				// two attention products per layer (dq and ds).
				if want := 7*tr.hp.nLayer - 3 + 1 + 2*tr.hp.nLayer; !outProd && rewritten != want {
					t.Fatalf("%d backward nodes rewritten to mul_mat, want %d", rewritten, want)
				}
			}
			maxDiff, maxAbs := nestedDiff(grads[0], grads[1])
			if maxAbs == 0 || maxDiff > 1e-4*maxAbs {
				t.Fatalf("gradients differ by %g (largest %g)", maxDiff, maxAbs)
			}
			t.Logf("largest gradient %g, largest difference %g", maxAbs, maxDiff)
		})
	}
}

// TestLastLayerSelectedMatchesFull scores the policy and the reference and
// computes the PPO gradient of one minibatch with the last layer on the
// selected rows only (the default in LoRA mode) and on every row: the
// numbers agree to float rounding.
func TestLastLayerSelectedMatchesFull(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			ctx := context.Background()
			var grads [2][][]float32
			var refs, vals, lps [2][][]float32
			for i, full := range []bool{false, true} {
				o := testOptions()
				o.KLCoef, o.EntropyCoef = 0.1, 0.01
				tr := newTrainer(t, arch, o)
				tr.fullLastLayer = full
				randomize(tr, 5, 0.05)
				seqs := randomSeqs(17, 3, 20, 50, tr.Vocab())
				var err error
				if refs[i], err = tr.references(ctx, seqs); err != nil {
					t.Fatal(err)
				}
				if vals[i], lps[i], _, err = columns(tr.EvaluatePolicy(ctx, seqs)); err != nil {
					t.Fatal(err)
				}
				for j := range seqs {
					seqs[j].RefLogprobs = refs[i][j]
				}
				idx := []int{0, 1, 2}
				tr.gbuf.Clear(0)
				if _, err := tr.accumulate(ctx, tr.ppo, seqs, idx, tr.tokenWeights(seqs, idx)); err != nil {
					t.Fatal(err)
				}
				grads[i] = readParams(tr, true)
				for k, b := range tr.cache {
					if want := !full; b.lastSelected != want {
						t.Fatalf("graph kind %d: last layer on the selected rows %v, want %v", k.kind, b.lastSelected, want)
					}
				}
			}
			for name, pair := range map[string][2][][]float32{"gradients": grads, "reference logprobs": refs, "values": vals, "logprobs": lps} {
				maxDiff, maxAbs := nestedDiff(pair[0], pair[1])
				if maxAbs == 0 || maxDiff > 1e-4*maxAbs {
					t.Fatalf("%s differ by %g (largest %g)", name, maxDiff, maxAbs)
				}
				t.Logf("%s: largest %g, largest difference %g", name, maxAbs, maxDiff)
			}
		})
	}
}

// TestSelectedCheaper: the last layer runs on the selected rows when few
// rows of long sequences are trained, and on every row when most are.
func TestSelectedCheaper(t *testing.T) {
	tr := newTrainer(t, "llama", testOptions())
	for _, c := range []struct {
		b, t, k int
		want    bool
	}{
		{2, 736, 32, true},   // self-play seat streams, 5% trained
		{4, 256, 96, true},   // 9%
		{4, 256, 480, false}, // 47%: K queries over all N rows cost more
		{1, 64, 64, false},   // every row selected
	} {
		if got := tr.selectedCheaper(graphKey{kind: kindTrain, b: c.b, t: c.t, k: c.k}); got != c.want {
			t.Errorf("b %d, t %d, k %d: selected rows cheaper %v, want %v", c.b, c.t, c.k, got, c.want)
		}
	}
}

// nestedDiff is the largest |a − b| over two equally shaped slices of
// slices, and the largest |b|.
func nestedDiff(a, b [][]float32) (maxDiff, maxAbs float64) {
	for i := range a {
		for j := range a[i] {
			x, y := float64(a[i][j]), float64(b[i][j])
			maxDiff = math.Max(maxDiff, math.Abs(x-y))
			maxAbs = math.Max(maxAbs, math.Abs(y))
		}
	}
	return maxDiff, maxAbs
}
