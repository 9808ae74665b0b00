package train

import (
	"context"
	"math"
	"slices"
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
			var grads [2][][]float32
			for i, outProd := range []bool{false, true} {
				o := testOptions()
				o.OutProdBackward = outProd
				o.KLCoef, o.EntropyCoef = 0.1, 0.01
				tr := newTrainer(t, arch, o)
				grads[i] = ppoGradients(t, tr)
				rewritten, widened, directed := 0, 0, 0
				for k, b := range tr.cache {
					if k.kind == kindTrain {
						rewritten += b.transposed
						widened += b.widened
						directed += b.directed
					}
				}
				// Every layer's scores computed in place of their copy.
				if !outProd && directed != tr.hp.nLayer {
					t.Fatalf("%d score copies computed in place, want %d", directed, tr.hp.nLayer)
				}
				// Every adapter's dB whose rows (the rank) are short and
				// whose columns fill ggml's vector step of 64 floats.
				wantWide := 0
				for _, l := range tr.loraIdx {
					if l.nOut >= 64 {
						wantWide++
					}
				}
				if !outProd && (wantWide == 0 || widened != wantWide) {
					t.Fatalf("%d gradient outer products widened, want %d", widened, wantWide)
				}
				// Per layer the input gradients of q, k, v, output,
				// gate, up and down (layer 0's q, k and v read the
				// embeddings, which need none), the output layer, and
				// three attention products per layer (dq, dk and ds),
				// and every adapter's dh (see loraProduct).
				if want := 7*tr.hp.nLayer - 3 + 1 + 3*tr.hp.nLayer + len(tr.loraIdx); !outProd && rewritten != want {
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

// ppoGradients randomizes tr's adapter and value head and returns the
// gradients of the PPO loss (with tr's options) over one minibatch of 3
// random sequences, their reference logprobs set.
func ppoGradients(t *testing.T, tr *Trainer) [][]float32 {
	t.Helper()
	randomize(tr, 5, 0.05)
	seqs := randomSeqs(17, 3, 20, 50, tr.Vocab())
	setRefLogprobs(t, tr, seqs)
	idx := []int{0, 1, 2}
	tr.gbuf.Clear(0)
	if _, err := tr.accumulate(context.Background(), tr.ppo, seqs, idx, tr.tokenWeights(seqs, idx)); err != nil {
		t.Fatal(err)
	}
	return readParams(tr, true)
}

// compareForms scores the policy and the reference and computes the PPO
// gradient of one minibatch of seqs(tr) with two forms of the trainer
// (form(tr, 0) and form(tr, 1) configure them; check inspects each after
// its passes): the numbers must agree to float rounding.
func compareForms(t *testing.T, arch string, seqs func(tr *Trainer) []Sequence, form, check func(tr *Trainer, i int)) {
	t.Helper()
	ctx := context.Background()
	var grads, refs, vals, lps [2][][]float32
	for i := range 2 {
		o := testOptions()
		o.KLCoef, o.EntropyCoef = 0.1, 0.01
		tr := newTrainer(t, arch, o)
		form(tr, i)
		randomize(tr, 5, 0.05)
		ss := seqs(tr)
		var err error
		if refs[i], err = tr.references(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if vals[i], lps[i], _, err = columns(tr.EvaluatePolicy(ctx, ss)); err != nil {
			t.Fatal(err)
		}
		for j := range ss {
			ss[j].RefLogprobs = refs[i][j]
		}
		idx := make([]int, len(ss))
		for j := range idx {
			idx[j] = j
		}
		tr.gbuf.Clear(0)
		if _, err := tr.accumulate(ctx, tr.ppo, ss, idx, tr.tokenWeights(ss, idx)); err != nil {
			t.Fatal(err)
		}
		grads[i] = readParams(tr, true)
		check(tr, i)
	}
	for name, pair := range map[string][2][][]float32{"gradients": grads, "reference logprobs": refs, "values": vals, "logprobs": lps} {
		maxDiff, maxAbs := nestedDiff(pair[0], pair[1])
		if maxAbs == 0 || maxDiff > 1e-4*maxAbs {
			t.Fatalf("%s differ by %g (largest %g)", name, maxDiff, maxAbs)
		}
		t.Logf("%s: largest %g, largest difference %g", name, maxAbs, maxDiff)
	}
}

// TestLastLayerSelectedMatchesFull: the last layer on the selected rows
// only (the default in LoRA mode) and on every row.
func TestLastLayerSelectedMatchesFull(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			compareForms(t, arch, func(tr *Trainer) []Sequence { return randomSeqs(17, 3, 20, 50, tr.Vocab()) },
				func(tr *Trainer, i int) { tr.fullLastLayer = i == 1 },
				func(tr *Trainer, i int) {
					for k, b := range tr.cache {
						if want := i == 0; b.lastSelected != want {
							t.Fatalf("graph kind %d: last layer on the selected rows %v, want %v", k.kind, b.lastSelected, want)
						}
					}
				})
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

func TestAttnBlocks(t *testing.T) {
	tr := newTrainer(t, "llama", testOptions())
	for _, c := range []struct {
		size, T int
		want    []int
	}{
		{0, 96, nil},                  // shorter than two default blocks
		{0, 128, []int{64, 128}},      // two
		{0, 224, []int{96, 192, 224}}, // three, the last shorter
		{0, 736, []int{96, 192, 288, 384, 480, 576, 672, 736}}, // self-play streams
		{128, 736, []int{160, 320, 480, 640, 736}},
		{32, 96, []int{32, 64, 96}},
		{32, 48, nil},
		{-1, 4096, nil}, // off
	} {
		tr.attnBlock = c.size
		got := tr.attnBlocks(c.T)
		if !slices.Equal(got, c.want) {
			t.Errorf("block %d, T %d: %v, want %v", c.size, c.T, got, c.want)
		}
	}
}

// TestBlockedAttentionMatchesFull: sequences long enough for several
// causal attention blocks, in blocks and as one T×T product; every block's
// dq, dk and ds run on mul_mat in the backward pass as the full one's do
// (dq by a view of the whole sequences' kᵀ, with gaps between its rows).
func TestBlockedAttentionMatchesFull(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			var rewritten [2]int
			extra := 0 // the blocks' attention products beyond one per layer
			compareForms(t, arch, func(tr *Trainer) []Sequence { return randomSeqs(23, 3, 70, 140, tr.Vocab()) },
				func(tr *Trainer, i int) { tr.attnBlock = []int{32, -1}[i] },
				func(tr *Trainer, i int) {
					for k, b := range tr.cache {
						if (b.blocks != nil) != (i == 0) {
							t.Fatalf("form %d, graph kind %d, t %d: blocks %v", i, k.kind, k.t, b.blocks)
						}
						if k.kind == kindTrain {
							rewritten[i] += b.transposed
							if i == 0 {
								layers := tr.hp.nLayer
								if b.lastSelected {
									layers--
								}
								// dq, dk and ds of every block.
								extra += 3 * (len(b.blocks) - 1) * layers
							}
						}
					}
				})
			if extra == 0 || rewritten[0]-rewritten[1] != extra {
				t.Errorf("backward nodes on mul_mat: %d with blocks, %d without; want %d more with", rewritten[0], rewritten[1], extra)
			}
		})
	}
}
