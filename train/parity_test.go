package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// decodeAll runs llama_decode over tokens (flash attention off, F32 KV
// cache) with the adapter when not nil, and returns the per-token logprobs
// in the trainer's convention.
func decodeAll(t *testing.T, m *llamacpp.Model, tokens []int32, adapter *llamacpp.Adapter) []float32 {
	t.Helper()
	o := llamacpp.ContextOptions{}.Defaults()
	o.NCtx, o.NBatch = 256, 256
	o.Threads, o.ThreadsBatch = 1, 1
	o.FlashAttention = llamacpp.FlashAttentionDisabled
	o.TypeK, o.TypeV = llamacpp.KVTypeF32, llamacpp.KVTypeF32
	c, err := llamacpp.NewLlamaContext(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if adapter != nil {
		if err := c.SetAdapters([]*llamacpp.Adapter{adapter}, []float32{1}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := llamacpp.NewBatch(len(tokens), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, tok := range tokens {
		if _, err := b.Add(tok, int32(i), 0, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	logits := make([][]float32, len(tokens))
	for i := range tokens {
		l, err := c.Logits(i)
		if err != nil {
			t.Fatal(err)
		}
		logits[i] = append([]float32(nil), l...)
	}
	return refLogprobs(logits, tokens)
}

// TestParityWithLlamaDecode: the training graph's logprobs equal those of
// llama.cpp's own forward pass, for every architecture, with the fresh
// adapter (B = 0) and with an adapter trained by a few SFT steps, exported
// by SaveAdapter and loaded with llama_adapter_lora_init.
func TestParityWithLlamaDecode(t *testing.T) {
	for _, arch := range model.Architectures {
		t.Run(arch, func(t *testing.T) {
			path := tinyModel(t, arch)
			o := testOptions()
			o.LR = 1e-2
			if arch == "qwen3" {
				o.LoRAModules = []string{"attn_v", "ffn_down", "attn_q"} // a subset, in any order
			}
			tr := newTrainer(t, arch, o)
			m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			seqs := randomSeqs(51, 3, 30, 60, tr.Vocab())
			ctx := context.Background()

			check := func(name string, adapter *llamacpp.Adapter) []float32 {
				_, lps, _, err := tr.Evaluate(ctx, seqs)
				if err != nil {
					t.Fatal(err)
				}
				var worst float64
				for i, s := range seqs {
					want := decodeAll(t, m, s.Tokens, adapter)
					worst = math.Max(worst, maskedDiff(t, lps[i], want, s.Mask))
				}
				t.Logf("%s: max |Δ logprob| = %.3g", name, worst)
				if worst > 1e-4 {
					t.Errorf("%s: logprobs differ from llama_decode by up to %g", name, worst)
				}
				return lps[0]
			}
			before := check("fresh adapter", nil)

			for range 5 {
				if _, err := tr.SFTStep(ctx, seqs); err != nil {
					t.Fatal(err)
				}
			}
			apath := filepath.Join(t.TempDir(), "adapter.gguf")
			if err := tr.SaveAdapter(apath); err != nil {
				t.Fatal(err)
			}
			ad, err := llamacpp.LoadAdapter(m, apath)
			if err != nil {
				t.Fatal(err)
			}
			defer ad.Close()
			after := check("trained adapter", ad)
			if d := maxAbsDiff(before, after); d < 1e-2 {
				t.Errorf("training changed logprobs by only %g; the adapter check is vacuous", d)
			}
		})
	}
}
