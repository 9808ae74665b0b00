package train

import (
	"context"
	"testing"
)

// BenchmarkPPOStep measures one PPO Step (1 epoch, one minibatch) on the
// tiny llama model: 8 sequences of 64–128 tokens, half of each trained.
// tokens/s counts every sequence token through forward+backward.
func BenchmarkPPOStep(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(map[int]string{1: "threads=1", 2: "threads=2"}[threads], func(b *testing.B) {
			o := testOptions()
			o.Threads = threads
			o.Epochs, o.MiniBatch = 1, 8
			o.BatchTokens = 1024
			tr := newTrainer(b, "llama", o)
			seqs := randomSeqs(5, 8, 64, 128, tr.Vocab())
			ctx := context.Background()
			tokens := 0
			for b.Loop() {
				st, err := tr.Step(ctx, seqs)
				if err != nil {
					b.Fatal(err)
				}
				tokens += st.Tokens
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkEvaluate measures the no-grad scoring pass (policy and base).
func BenchmarkEvaluate(b *testing.B) {
	o := testOptions()
	o.BatchTokens = 1024
	tr := newTrainer(b, "llama", o)
	seqs := randomSeqs(5, 8, 64, 128, tr.Vocab())
	ctx := context.Background()
	tokens := 0
	for b.Loop() {
		if _, _, _, err := tr.Evaluate(ctx, seqs); err != nil {
			b.Fatal(err)
		}
		for _, s := range seqs {
			tokens += len(s.Tokens)
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}
