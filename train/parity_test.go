package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// decodeAll runs llama_decode over tokens (flash attention off, F32 KV
// cache) with the adapter when not nil, and returns the per-token logprobs
// in the trainer's convention.
func decodeAll(t *testing.T, m *llamacpp.Model, tokens []int32, adapter *llamacpp.Adapter) []float32 {
	t.Helper()
	o := llamacpp.ContextOptions{}.Defaults()
	o.NCtx = max(256, (len(tokens)+255)/256*256)
	o.NBatch = o.NCtx
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
				_, lps, _, err := columns(tr.Evaluate(ctx, seqs))
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

// rewriteModel copies the model at src to dst with its metadata, passing
// each tensor (as F32 values) to add, which writes it, then lets finish
// add more.
func rewriteModel(t testing.TB, src, dst string, add func(w *gguf.Writer, ti gguf.TensorInfo, d []float32) error, finish func(w *gguf.Writer) error) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.Metadata {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		d, err := f.TensorFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := add(w, ti, d); err != nil {
			t.Fatal(err)
		}
	}
	if finish != nil {
		if err := finish(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// withRopeFreqs rewrites the model at src with a llama-3-style
// rope_freqs.weight (per-dimension divisors of the rotation frequencies).
func withRopeFreqs(t *testing.T, src, dst string, nRot int) {
	t.Helper()
	rewriteModel(t, src, dst, func(w *gguf.Writer, ti gguf.TensorInfo, d []float32) error {
		return w.AddTensor(ti.Name, ti.Shape, gguf.F32, d)
	}, func(w *gguf.Writer) error {
		freqs := make([]float32, nRot/2)
		for i := range freqs {
			freqs[i] = 1 + float32(i)*0.5 // low frequencies slowed down, as llama 3 does
		}
		return w.AddTensor("rope_freqs.weight", []uint64{uint64(nRot / 2)}, gguf.F32, freqs)
	})
}

// TestRopeFreqs: a llama model with rope frequency factors (llama 3.x)
// matches both the reference forward pass and llama_decode.
func TestRopeFreqs(t *testing.T) {
	src := tinyModel(t, "llama")
	path := filepath.Join(t.TempDir(), "llama3.gguf")
	withRopeFreqs(t, src, path, 16)
	tr, err := New(path, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.w.ropeFreqs == nil {
		t.Fatal("rope_freqs.weight was not loaded")
	}
	randomize(tr, 2, 0.05)
	seqs := randomSeqs(71, 2, 30, 60, tr.Vocab())
	_, lps, refLps, err := columns(tr.Evaluate(t.Context(), seqs))
	if err != nil {
		t.Fatal(err)
	}
	ref := loadRef(t, path, tr) // loads rope_freqs.weight with the other base tensors
	m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	plain := newTrainer(t, "llama", testOptions())
	_, _, plainLps, err := columns(plain.Evaluate(t.Context(), seqs))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		logits, _ := ref.forward(s.Tokens)
		if d := maskedDiff(t, lps[i], refLogprobs(logits, s.Tokens), s.Mask); d > 5e-5 {
			t.Errorf("seq %d: logprobs differ from the reference by %g", i, d)
		}
		if d := maskedDiff(t, refLps[i], decodeAll(t, m, s.Tokens, nil), s.Mask); d > 1e-4 {
			t.Errorf("seq %d: base logprobs differ from llama_decode by %g", i, d)
		}
		if d := maskedDiff(t, refLps[i], plainLps[i], s.Mask); d < 1e-3 {
			t.Errorf("seq %d: the frequency factors changed logprobs by only %g", i, d)
		}
	}
}
