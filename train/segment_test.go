package train

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSegmentedMatchesOneGraph runs the same scoring and training passes
// one layer per graph (with the output layer over chunks of rows) and as
// one graph, and compares logprobs, values, reference logprobs, every loss
// term and every parameter's gradient.
func TestSegmentedMatchesOneGraph(t *testing.T) {
	tests := []struct {
		name  string
		arch  string
		block int // Trainer.attnBlock
		rows  int // Trainer.segRows: output-layer chunks of rows
		group int // Trainer.groupRows: query rows per attention group
		kl    float32
		// grammar trains with LogprobsOver "grammar" and allowed sets.
		grammar bool
	}{
		{name: "llama", arch: "llama"},
		{name: "qwen3_blocks", arch: "qwen3", block: 16},
		{name: "qwen3_attention_groups", arch: "qwen3", block: 16, group: 16},
		{name: "qwen2_kl_chunks", arch: "qwen2", kl: 0.5, rows: 32},
		{name: "llama_grammar_chunks", arch: "llama", kl: 0.5, rows: 32, grammar: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			o.ValueCoef, o.KLCoef, o.EntropyCoef = 0.5, tt.kl, 0.01
			if tt.grammar {
				o.LogprobsOver = LogprobsOverGrammar
			}
			tr := newTrainer(t, tt.arch, o)
			tr.attnBlock, tr.segRows, tr.groupRows = tt.block, tt.rows, tt.group
			if tt.group > 0 {
				if n := len(tr.attnGroups(1, 96)); n < 3 {
					t.Fatalf("%d attention groups over 96 rows, want several", n)
				}
			}
			randomize(tr, 5, 0.05)
			ctx := context.Background()
			seqs := randomSeqs(31, 3, 30, 70, tr.Vocab())
			if tt.grammar {
				addAllowed(seqs, tr.Vocab(), 41)
			}

			type result struct {
				scores []Score
				acc    accumulated
				grads  [][]float32
			}
			runMode := func(mode int) result {
				tr.segmentMode = mode
				sc, err := tr.Evaluate(ctx, seqs)
				if err != nil {
					t.Fatal(err)
				}
				s := make([]Sequence, len(seqs))
				copy(s, seqs)
				r := rand.New(rand.NewPCG(3, 3))
				for i := range s {
					s[i].OldLogprobs = make([]float32, len(s[i].Tokens))
					s[i].OldValues = make([]float32, len(s[i].Tokens))
					s[i].RefLogprobs = sc[i].RefLogprobs
					for j, m := range s[i].Mask {
						if m {
							s[i].OldLogprobs[j] = sc[i].Logprobs[j] + float32(r.Float64()*0.6-0.3)
							s[i].OldValues[j] = sc[i].Values[j] + float32(r.Float64()*0.6-0.3)
						}
					}
				}
				idx := []int{0, 1, 2}
				tr.gbuf.Clear(0)
				acc, err := tr.accumulate(ctx, tr.ppo, s, idx, tr.tokenWeights(s, idx))
				if err != nil {
					t.Fatal(err)
				}
				g := readParams(tr, true)
				tr.gbuf.Clear(0)
				return result{sc, acc, g}
			}
			one, seg := runMode(-1), runMode(1)
			near := func(what string, got, want, tol float64) {
				t.Helper()
				if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
					t.Errorf("%s: got %g (segmented), want %g (one graph)", what, got, want)
				}
			}
			for i := range seqs {
				for j := range seqs[i].Tokens {
					near("logprob", float64(seg.scores[i].Logprobs[j]), float64(one.scores[i].Logprobs[j]), 2e-4)
					near("value", float64(seg.scores[i].Values[j]), float64(one.scores[i].Values[j]), 2e-4)
					near("ref logprob", float64(seg.scores[i].RefLogprobs[j]), float64(one.scores[i].RefLogprobs[j]), 2e-4)
				}
			}
			near("loss", seg.acc.loss, one.acc.loss, 1e-4)
			for k := range one.acc.terms {
				near(one.acc.terms[k].Name, seg.acc.terms[k].Value, one.acc.terms[k].Value, 1e-4)
			}
			var diff, norm float64
			for i := range one.grads {
				for j := range one.grads[i] {
					d := float64(seg.grads[i][j] - one.grads[i][j])
					diff += d * d
					norm += float64(one.grads[i][j]) * float64(one.grads[i][j])
				}
			}
			if norm == 0 {
				t.Fatal("zero gradient: the comparison would be empty")
			}
			if rel := math.Sqrt(diff / norm); rel > 1e-4 {
				t.Errorf("gradients: relative difference %g between segmented and one graph, want ≤ 1e-4", rel)
			} else {
				t.Logf("gradients: relative difference %.2g, |grad| %.4g", rel, math.Sqrt(norm))
			}
		})
	}
}
