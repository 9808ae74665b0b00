package model

import (
	"fmt"
	"slices"

	"github.com/omar-selfplay/omar/gguf"
)

// Architectures and presets Generate knows.
var (
	Architectures = []string{"llama", "qwen2", "qwen3"}
	Presets       = []string{"tiny", "base", "deep", "small"}
)

// Config is the shape of a generated model.
type Config struct {
	Arch              string
	VocabSize         int // ordinary + special tokens
	ContextLength     int
	EmbeddingLength   int
	BlockCount        int
	FeedForwardLength int
	HeadCount         int
	HeadCountKV       int
	HeadDim           int // key/value length per head
	RMSEpsilon        float32
	RopeFreqBase      float32
	// TiedEmbeddings omits the output tensor: llama.cpp then uses
	// token_embd for the output projection (as Qwen's small models do).
	TiedEmbeddings bool
	// QKVBias adds attn_q/attn_k/attn_v biases (qwen2).
	QKVBias bool
	// QKNorm adds per-head RMS norms of queries and keys (qwen3).
	QKNorm bool
}

// PresetConfig returns the configuration of a preset for an architecture.
//
//	tiny:  vocab 512,  n_embd 64,  2 layers, 4 heads, 2 KV heads, ff 128,  ctx 4096 (~0.1M params)
//	base:  vocab 1024, n_embd 128, 4 layers, 4 heads, 2 KV heads, ff 384,  ctx 4096 (~0.9M params;
//	       the shape of the built-in model, trained from scratch on omar's corpora)
//	deep:  base with 8 layers (~1.8M params; tried for the built-in model, no
//	       better than base: docs/models.md)
//	small: vocab 4096, n_embd 512, 8 layers, 8 heads, 4 KV heads, ff 1536, ctx 4096 (~27-29M params)
//
// llama keeps a separate output matrix; qwen2 and qwen3 tie it to the
// token embeddings.
func PresetConfig(arch, preset string) (Config, error) {
	var c Config
	switch preset {
	case "tiny":
		c = Config{VocabSize: 512, ContextLength: 4096, EmbeddingLength: 64, BlockCount: 2,
			FeedForwardLength: 128, HeadCount: 4, HeadCountKV: 2}
	case "base":
		c = Config{VocabSize: 1024, ContextLength: 4096, EmbeddingLength: 128, BlockCount: 4,
			FeedForwardLength: 384, HeadCount: 4, HeadCountKV: 2}
	case "deep":
		c = Config{VocabSize: 1024, ContextLength: 4096, EmbeddingLength: 128, BlockCount: 8,
			FeedForwardLength: 384, HeadCount: 4, HeadCountKV: 2}
	case "small":
		c = Config{VocabSize: 4096, ContextLength: 4096, EmbeddingLength: 512, BlockCount: 8,
			FeedForwardLength: 1536, HeadCount: 8, HeadCountKV: 4}
	default:
		return c, fmt.Errorf("model: unknown preset %q (want one of %v)", preset, Presets)
	}
	c.Arch = arch
	c.HeadDim = c.EmbeddingLength / c.HeadCount
	c.RMSEpsilon = 1e-6
	switch arch {
	case "llama":
		c.RopeFreqBase = 10000
	case "qwen2":
		c.RopeFreqBase = 1000000
		c.TiedEmbeddings, c.QKVBias = true, true
	case "qwen3":
		c.RopeFreqBase = 1000000
		c.TiedEmbeddings, c.QKNorm = true, true
	default:
		return c, fmt.Errorf("model: unknown architecture %q (want one of %v)", arch, Architectures)
	}
	return c, nil
}

// Validate checks that the shape is consistent.
func (c Config) Validate() error {
	switch {
	case !slices.Contains(Architectures, c.Arch):
		return fmt.Errorf("model: unknown architecture %q", c.Arch)
	case c.VocabSize < 256+len(specialTokens)+1:
		return fmt.Errorf("model: vocabulary of %d is too small (256 bytes + %d special tokens + merges)", c.VocabSize, len(specialTokens))
	case c.EmbeddingLength <= 0 || c.BlockCount <= 0 || c.FeedForwardLength <= 0 || c.ContextLength <= 0:
		return fmt.Errorf("model: sizes must be positive: %+v", c)
	case c.HeadCount <= 0 || c.HeadCountKV <= 0 || c.HeadCount%c.HeadCountKV != 0:
		return fmt.Errorf("model: %d heads cannot share %d KV heads", c.HeadCount, c.HeadCountKV)
	case c.HeadDim <= 0 || c.HeadDim%2 != 0:
		return fmt.Errorf("model: head dimension %d must be positive and even (RoPE)", c.HeadDim)
	case c.Arch == "qwen2" && c.HeadDim*c.HeadCount != c.EmbeddingLength:
		// llama.cpp's qwen2 sizes attn_output as [n_embd, n_embd].
		return fmt.Errorf("model: qwen2 needs head_dim × heads = n_embd, got %d × %d ≠ %d", c.HeadDim, c.HeadCount, c.EmbeddingLength)
	}
	return nil
}

// Params is the number of weights (including norms and biases).
func (c Config) Params() int64 {
	var n int64
	for _, t := range c.tensors() {
		n += int64(t.elements())
	}
	return n
}

// Options selects what Generate writes.
type Options struct {
	Arch   string // "llama" (default), "qwen2" or "qwen3"
	Preset string // "tiny" (default) or "small"
	Seed   uint64
	// ContextLength overrides the preset's context length when > 0.
	ContextLength int
	// Type is the storage type of the weight matrices: gguf.F32 (default,
	// what the trainer needs on CUDA) or gguf.F16. Norms are always F32.
	Type gguf.TensorType
	// Merges, when set, are the tokenizer's BPE merges (TrainBPE on a
	// corpus of one's own); the vocabulary size is then 256 + len(Merges)
	// + the special tokens, whatever the preset says. Empty: merges
	// learnt from the embedded corpus for the preset's vocabulary.
	Merges []string
}

// Defaults fills unset fields.
func (o Options) Defaults() Options {
	if o.Arch == "" {
		o.Arch = "llama"
	}
	if o.Preset == "" {
		o.Preset = "tiny"
	}
	return o
}

// Validate checks the options (after Defaults).
func (o Options) Validate() error {
	if !slices.Contains(Architectures, o.Arch) {
		return fmt.Errorf("model: unknown architecture %q (want one of %v)", o.Arch, Architectures)
	}
	if !slices.Contains(Presets, o.Preset) {
		return fmt.Errorf("model: unknown preset %q (want one of %v)", o.Preset, Presets)
	}
	if o.ContextLength < 0 {
		return fmt.Errorf("model: negative context length %d", o.ContextLength)
	}
	if o.Type != gguf.F32 && o.Type != gguf.F16 {
		return fmt.Errorf("model: weight type %v not supported (F32 or F16)", o.Type)
	}
	return nil
}

// Config returns the model shape the options describe.
func (o Options) Config() (Config, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return Config{}, err
	}
	c, err := PresetConfig(o.Arch, o.Preset)
	if err != nil {
		return c, err
	}
	if o.ContextLength > 0 {
		c.ContextLength = o.ContextLength
	}
	if len(o.Merges) > 0 {
		c.VocabSize = len(BPEVocab(o.Merges)) + len(specialTokens)
	}
	return c, c.Validate()
}

// ConfigFromGGUF reads the shape of a llama, qwen2 or qwen3 model file —
// generated or real — from its metadata and tensors, for code (such as the
// trainer) that rebuilds the model's graph. Keys llama.cpp treats as
// optional get llama.cpp's defaults: head_count_kv = head_count,
// key_length = n_embd/head_count, rope.freq_base = 10000.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	var c Config
	var err error
	if c.Arch, err = f.String("general.architecture"); err != nil {
		return c, err
	}
	if !slices.Contains(Architectures, c.Arch) {
		return c, fmt.Errorf("model: architecture %q is not one of %v", c.Arch, Architectures)
	}
	a := c.Arch + "."
	required := func(key string) int {
		n, e := f.Uint(a + key)
		if e != nil && err == nil {
			err = e
		}
		return int(n)
	}
	c.ContextLength = required("context_length")
	c.EmbeddingLength = required("embedding_length")
	c.BlockCount = required("block_count")
	c.FeedForwardLength = required("feed_forward_length")
	c.HeadCount = required("attention.head_count")
	eps, e := f.Float(a + "attention.layer_norm_rms_epsilon")
	if e != nil && err == nil {
		err = e
	}
	if err != nil {
		return c, fmt.Errorf("model: %w", err)
	}
	c.RMSEpsilon = float32(eps)
	c.HeadCountKV = c.HeadCount
	if n, e := f.Uint(a + "attention.head_count_kv"); e == nil {
		c.HeadCountKV = int(n)
	}
	if c.HeadCount > 0 {
		c.HeadDim = c.EmbeddingLength / c.HeadCount
	}
	if n, e := f.Uint(a + "attention.key_length"); e == nil {
		c.HeadDim = int(n)
	}
	if n, e := f.Uint(a + "attention.value_length"); e == nil && int(n) != c.HeadDim {
		return c, fmt.Errorf("model: key length %d ≠ value length %d is not supported", c.HeadDim, n)
	}
	c.RopeFreqBase = 10000
	if x, e := f.Float(a + "rope.freq_base"); e == nil {
		c.RopeFreqBase = float32(x)
	}
	if toks, e := f.Strings("tokenizer.ggml.tokens"); e == nil {
		c.VocabSize = len(toks)
	} else if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Shape) == 2 {
		c.VocabSize = int(emb.Shape[1])
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TiedEmbeddings = !hasOutput
	_, c.QKVBias = f.Tensor("blk.0.attn_q.bias")
	_, c.QKNorm = f.Tensor("blk.0.attn_q_norm.weight")
	return c, c.Validate()
}
