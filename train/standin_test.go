package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// qwen3Shape is Qwen3-0.6B's architecture (its config.json): 596M
// parameters with the tied 151,936 × 1,024 embedding.
var qwen3Shape = model.Config{
	Arch: "qwen3", VocabSize: 151936, ContextLength: 40960, EmbeddingLength: 1024,
	BlockCount: 28, FeedForwardLength: 3072, HeadCount: 16, HeadCountKV: 8, HeadDim: 128,
	RMSEpsilon: 1e-6, RopeFreqBase: 1e6, TiedEmbeddings: true, QKNorm: true,
}

var standinOnce struct {
	sync.Mutex
	paths map[int]string
}

// qwen3Standin writes (once per machine: the file is kept in the temporary
// directory, about 640 MB) the qwen3-0.6b stand-in: Qwen3-0.6B's exact
// shape in Q8_0 with random weights (norms F32, as in the real file) and a
// BPE vocabulary of synthetic merges of the same size, so that llama.cpp
// loads it too. Only benchmarks and measurements use it.
func qwen3Standin(tb testing.TB) string { return qwen3StandinLayers(tb, qwen3Shape.BlockCount) }

// qwen3StandinLayers is the stand-in with only its first layers: every
// layer, the embeddings and the output layer of the real shape, fewer of
// them, for measurements a loaded machine cannot run at full depth.
func qwen3StandinLayers(tb testing.TB, layers int) string {
	return qwen3StandinType(tb, layers, gguf.Q8_0)
}

// qwen3StandinType is the stand-in with its matrices in typ (Q8_0 or F32).
func qwen3StandinType(tb testing.TB, layers int, typ gguf.TensorType) string {
	tb.Helper()
	testLib(tb)
	standinOnce.Lock()
	defer standinOnce.Unlock()
	id := layers*100 + int(typ)
	if p, ok := standinOnce.paths[id]; ok {
		return p
	}
	dir := filepath.Join(os.TempDir(), "omar-standin")
	name := "qwen3-0.6b-q8_0.gguf"
	if layers != qwen3Shape.BlockCount || typ != gguf.Q8_0 {
		name = fmt.Sprintf("qwen3-0.6b-%dlayers-%s.gguf", layers, strings.ToLower(typ.String()))
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		c := qwen3Shape
		c.BlockCount = layers
		if err := writeStandin(c, typ, path+".tmp"); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			tb.Fatal(err)
		}
	}
	if standinOnce.paths == nil {
		standinOnce.paths = map[int]string{}
	}
	standinOnce.paths[id] = path
	return path
}

// standinMerges makes n distinct BPE merges: each joins an existing token
// and a byte token, so the vocabulary is 256 + n tokens.
func standinMerges(n int) []string {
	toks := model.BPEVocab(nil)
	seen := map[string]bool{}
	for _, t := range toks {
		seen[t] = true
	}
	merges := make([]string, 0, n)
	for i := 0; len(merges) < n; i++ {
		l, r := toks[i%len(toks)], toks[(i*131+7)%256]
		if seen[l+r] {
			continue
		}
		seen[l+r] = true
		toks = append(toks, l+r)
		merges = append(merges, l+" "+r)
	}
	return merges
}

// writeStandin writes a random model of shape c with its matrices in typ
// (Q8_0 or F32).
func writeStandin(c model.Config, typ gguf.TensorType, path string) error {
	merges := standinMerges(c.VocabSize - 256 - 3)
	tokens, types := model.MergesVocabulary(merges)
	if len(tokens) != c.VocabSize {
		return fmt.Errorf("stand-in vocabulary of %d tokens, want %d", len(tokens), c.VocabSize)
	}
	w := gguf.NewWriter()
	a := c.Arch + "."
	var err error
	set := func(k string, v any) {
		if err == nil {
			err = w.Set(k, v)
		}
	}
	set("general.architecture", c.Arch)
	set("general.type", "model")
	set("general.name", "omar-standin-qwen3-0.6b")
	fileType := uint32(7) // LLAMA_FTYPE_MOSTLY_Q8_0
	if typ == gguf.F32 {
		fileType = 0
	}
	set("general.file_type", fileType)
	set(a+"vocab_size", uint32(c.VocabSize))
	set(a+"context_length", uint32(c.ContextLength))
	set(a+"embedding_length", uint32(c.EmbeddingLength))
	set(a+"block_count", uint32(c.BlockCount))
	set(a+"feed_forward_length", uint32(c.FeedForwardLength))
	set(a+"attention.head_count", uint32(c.HeadCount))
	set(a+"attention.head_count_kv", uint32(c.HeadCountKV))
	set(a+"attention.key_length", uint32(c.HeadDim))
	set(a+"attention.value_length", uint32(c.HeadDim))
	set(a+"attention.layer_norm_rms_epsilon", c.RMSEpsilon)
	set(a+"rope.dimension_count", uint32(c.HeadDim))
	set(a+"rope.freq_base", c.RopeFreqBase)
	set("tokenizer.ggml.model", "gpt2")
	set("tokenizer.ggml.pre", model.PreTokenizer)
	set("tokenizer.ggml.tokens", tokens)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.merges", merges)
	set("tokenizer.ggml.bos_token_id", uint32(c.VocabSize-3))
	set("tokenizer.ggml.eos_token_id", uint32(c.VocabSize-1))
	set("tokenizer.ggml.eot_token_id", uint32(c.VocabSize-1))
	set("tokenizer.ggml.padding_token_id", uint32(c.VocabSize-3))
	set("tokenizer.ggml.add_bos_token", false)
	set("tokenizer.ggml.add_eos_token", false)
	set("tokenizer.chat_template", model.ChatTemplate)
	if err != nil {
		return err
	}
	e, ff, v := uint64(c.EmbeddingLength), uint64(c.FeedForwardLength), uint64(c.VocabSize)
	q, kv, hd := uint64(c.HeadDim*c.HeadCount), uint64(c.HeadDim*c.HeadCountKV), uint64(c.HeadDim)
	inv := func(n uint64) float64 { return 1 / math.Sqrt(float64(n)) }
	rng := rand.New(rand.NewPCG(7, 7))
	matrix := func(name string, nIn, nOut uint64, std float64) error {
		data := make([]float32, nIn*nOut)
		for i := range data {
			data[i] = float32(rng.NormFloat64() * std)
		}
		if typ == gguf.F32 {
			return w.AddTensor(name, []uint64{nIn, nOut}, gguf.F32, data)
		}
		raw, err := llamacpp.Quantize(llamacpp.Type(typ), data, int(nIn))
		if err != nil {
			return err
		}
		return w.AddTensorBytes(name, []uint64{nIn, nOut}, typ, raw)
	}
	ones := func(name string, n uint64) error {
		data := make([]float32, n)
		for i := range data {
			data[i] = 1
		}
		return w.AddTensor(name, []uint64{n}, gguf.F32, data)
	}
	// The generator's scales (model/generate.go): logits of std 2, the
	// residual writers ×3.
	if err := matrix("token_embd.weight", e, v, 2*inv(e)); err != nil {
		return err
	}
	for i := range c.BlockCount {
		p := fmt.Sprintf("blk.%d.", i)
		for _, f := range []func() error{
			func() error { return ones(p+"attn_norm.weight", e) },
			func() error { return matrix(p+"attn_q.weight", e, q, inv(e)) },
			func() error { return matrix(p+"attn_k.weight", e, kv, inv(e)) },
			func() error { return matrix(p+"attn_v.weight", e, kv, inv(e)) },
			func() error { return ones(p+"attn_q_norm.weight", hd) },
			func() error { return ones(p+"attn_k_norm.weight", hd) },
			func() error { return matrix(p+"attn_output.weight", q, e, 3*inv(q)) },
			func() error { return ones(p+"ffn_norm.weight", e) },
			func() error { return matrix(p+"ffn_gate.weight", e, ff, inv(e)) },
			func() error { return matrix(p+"ffn_up.weight", e, ff, inv(e)) },
			func() error { return matrix(p+"ffn_down.weight", ff, e, 3*inv(ff)) },
		} {
			if err := f(); err != nil {
				return err
			}
		}
	}
	if err := ones("output_norm.weight", e); err != nil {
		return err
	}
	return w.WriteFile(path)
}
