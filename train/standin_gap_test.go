package train

import (
	"context"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// TestStandinLogprobGap measures the sampler–trainer logprob gap on the
// qwen3-0.6b stand-in (Q8_0; OMAR_STANDIN_GAP_LAYERS of its layers): the
// trainer's logprobs (one graph and segmented, which differ by float
// reordering alone) against llama_decode's on the same tokens, with the F32 KV
// cache of the parity tests and the F16 one the sampler uses by default,
// and against the trainer holding the weights dequantized to F32. Set
// OMAR_STANDIN_GAP to the sequence length to run it (minutes on two cores;
// docs/results/2026-12-07-training-memory.md).
func TestStandinLogprobGap(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("OMAR_STANDIN_GAP"))
	if err != nil || n < 2 {
		t.Skip("set OMAR_STANDIN_GAP=TOKENS to measure the gap on the qwen3-0.6b stand-in")
	}
	typ := gguf.Q8_0
	if os.Getenv("OMAR_STANDIN_GAP_F32") != "" {
		typ = gguf.F32 // the same weights unquantized: the architecture alone
	}
	path := qwen3StandinType(t, envInt("OMAR_STANDIN_GAP_LAYERS", qwen3Shape.BlockCount), typ)
	seq := standinSequence(n, qwen3Shape.VocabSize)
	seq.RefLogprobs = nil
	trainer := map[string][]float32{}
	for _, c := range []struct {
		name       string
		mode       int
		dequantize bool
	}{{"one_graph", -1, false}, {"segmented", 1, false}, {"dequantized", 1, true}} {
		o := Options{}.Defaults()
		o.Threads, o.DequantizeBase, o.BatchTokens = 1, c.dequantize, max(n, 2048)
		tr, err := New(path, o)
		if err != nil {
			t.Fatal(err)
		}
		tr.segmentMode = c.mode
		sc, err := tr.EvaluatePolicy(context.Background(), []Sequence{seq})
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		trainer[c.name] = sc[0].Logprobs
	}
	var d float64
	for i, on := range seq.Mask {
		if on {
			d = max(d, math.Abs(float64(trainer["one_graph"][i]-trainer["segmented"][i])))
		}
	}
	t.Logf("trainer one graph vs segmented (float reordering only): max |Δ logprob| %.3g", d)
	m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, kv := range []struct {
		name string
		typ  llamacpp.KVType
	}{{"kv_f32", llamacpp.KVTypeF32}, {"kv_f16", llamacpp.KVTypeF16}} {
		want := decodeWith(t, m, seq.Tokens, kv.typ)
		for _, name := range []string{"one_graph", "segmented", "dequantized"} {
			var sum, worst float64
			k, over := 0, 0
			for i, on := range seq.Mask {
				if !on {
					continue
				}
				d := math.Abs(float64(trainer[name][i] - want[i]))
				sum += d
				worst = max(worst, d)
				k++
				if d > 1e-3 {
					over++
				}
			}
			t.Logf("%s, trainer %s: mean |Δ logprob| %.3g, max %.3g, %d of %d trained positions over 1e-3", kv.name, name, sum/float64(k), worst, over, k)
		}
	}
}

// decodeWith is decodeAll with the KV cache in typ.
func decodeWith(t *testing.T, m *llamacpp.Model, tokens []int32, typ llamacpp.KVType) []float32 {
	t.Helper()
	o := llamacpp.ContextOptions{}.Defaults()
	o.NCtx = max(256, (len(tokens)+255)/256*256)
	o.NBatch = o.NCtx
	o.Threads, o.ThreadsBatch = 1, 1
	o.FlashAttention = llamacpp.FlashAttentionDisabled
	o.TypeK, o.TypeV = typ, typ
	c, err := llamacpp.NewLlamaContext(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
