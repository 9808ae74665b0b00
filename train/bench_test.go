package train

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/model"
)

var (
	smallOnce sync.Once
	smallErr  error
)

// smallModel writes the "small" llama preset (~27M parameters) next to the
// tiny test models.
func smallModel(b *testing.B) string {
	tinyModel(b, "llama")
	p := filepath.Join(modelsDir, "small.gguf")
	smallOnce.Do(func() { smallErr = model.WriteFile(p, model.Options{Arch: "llama", Preset: "small", Seed: 7}) })
	if smallErr != nil {
		b.Fatal(smallErr)
	}
	return p
}

// BenchmarkPPOStep measures Step (1 epoch, one minibatch: forward+backward
// of the PPO loss, gradient clipping and AdamW; the sequences carry their
// reference logprobs, as in a self-play iteration after Evaluate) and
// reports sequence tokens per second. tiny: 8 sequences of 64–128 tokens;
// small: 2 sequences of 64–128 tokens.
func BenchmarkPPOStep(b *testing.B) {
	for _, preset := range []string{"tiny", "small"} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", preset, threads), func(b *testing.B) {
				o := testOptions()
				o.Threads = threads
				o.Epochs, o.MiniBatch = 1, 8
				o.BatchTokens = 1024
				path, n := tinyModel(b, "llama"), 8
				if preset == "small" {
					o.LoRARank = 8
					path, n = smallModel(b), 2
				}
				tr, err := New(path, o)
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				seqs := randomSeqs(5, n, 64, 128, tr.Vocab())
				ctx := context.Background()
				scores, err := tr.Evaluate(ctx, seqs)
				if err != nil {
					b.Fatal(err)
				}
				for i := range seqs {
					seqs[i].RefLogprobs = scores[i].RefLogprobs
				}
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
}

// BenchmarkEvaluate measures the no-grad scoring (policy and base passes)
// of 8 sequences of 64–128 tokens on the tiny model.
func BenchmarkEvaluate(b *testing.B) {
	o := testOptions()
	o.BatchTokens = 1024
	tr := newTrainer(b, "llama", o)
	seqs := randomSeqs(5, 8, 64, 128, tr.Vocab())
	ctx := context.Background()
	tokens := 0
	for b.Loop() {
		if _, _, _, err := columns(tr.Evaluate(ctx, seqs)); err != nil {
			b.Fatal(err)
		}
		for _, s := range seqs {
			tokens += len(s.Tokens)
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}
