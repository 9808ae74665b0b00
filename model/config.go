package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

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
	// RopeScaling, when set (Factor > 0), is Llama 3.x's RoPE scaling,
	// written as the rope_freqs.weight tensor. ConfigFromGGUF leaves it
	// unset: the tensor holds the factors, not the parameters.
	RopeScaling Llama3RopeScaling
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
	case c.RopeScaling.Factor != 0 && (c.RopeScaling.Factor < 1 || c.RopeScaling.HighFreqFactor <= c.RopeScaling.LowFreqFactor || c.RopeScaling.OriginalContext <= 0):
		return fmt.Errorf("model: rope scaling %+v is not a Llama 3 one", c.RopeScaling)
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
	Arch   string // "llama" (default), "qwen2" or "qwen3"; not with Shape
	Preset string // "tiny" (default), "base", "deep" or "small"; not with Shape
	// Shape, when set, is the name of a real model's shape (Shapes): the
	// architecture and every dimension come from it. It needs Tokenizer,
	// as a real vocabulary cannot be learnt from the built-in corpus.
	Shape string
	// Layers, when > 0, keeps only that many blocks (at most the shape's
	// or preset's), so that a test can use a real shape cheaply.
	Layers int
	Seed   uint64
	// ContextLength overrides the shape's or preset's context length when > 0.
	ContextLength int
	// Type is the storage type of the weight matrices: gguf.F32 (default,
	// what the trainer needs on CUDA), gguf.F16 or gguf.Q8_0 (ggml's
	// 8-bit blocks, the common type of released GGUFs). Norms and other
	// vectors are always F32.
	Type gguf.TensorType
	// Merges, when set, are the tokenizer's BPE merges (TrainBPE on a
	// corpus of one's own); the vocabulary size is then 256 + len(Merges)
	// + the special tokens, whatever the preset says. Empty: merges
	// learnt from the embedded corpus for the preset's vocabulary.
	Merges []string
	// Tokenizer, when set, is the vocabulary written instead of a
	// generated one: a real model's tokenizer (ReadHFTokenizer) with its
	// special tokens and chat template. With a preset, the vocabulary size
	// becomes the tokenizer's; with a shape, it must fit the shape's.
	Tokenizer *HFTokenizer
}

// ParseType reads a storage type of the weight matrices (Options.Type) by
// name, in any case: f32, f16 or q8_0.
func ParseType(name string) (gguf.TensorType, error) {
	switch strings.ToLower(name) {
	case "f32":
		return gguf.F32, nil
	case "f16":
		return gguf.F16, nil
	case "q8_0":
		return gguf.Q8_0, nil
	}
	return 0, fmt.Errorf("weight type %q: want f32, f16 or q8_0", name)
}

// Defaults fills unset fields.
func (o Options) Defaults() Options {
	if o.Shape != "" {
		return o
	}
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
	if o.Shape != "" {
		if o.Arch != "" || o.Preset != "" {
			return fmt.Errorf("model: shape %s sets the architecture and size; give no architecture or preset with it", o.Shape)
		}
		if _, err := FindShape(o.Shape); err != nil {
			return err
		}
		if o.Tokenizer == nil {
			return fmt.Errorf("model: shape %s needs the real model's tokenizer (tokenizer.json and tokenizer_config.json)", o.Shape)
		}
	} else {
		if !slices.Contains(Architectures, o.Arch) {
			return fmt.Errorf("model: unknown architecture %q (want one of %v)", o.Arch, Architectures)
		}
		if !slices.Contains(Presets, o.Preset) {
			return fmt.Errorf("model: unknown preset %q (want one of %v)", o.Preset, Presets)
		}
	}
	if o.ContextLength < 0 {
		return fmt.Errorf("model: negative context length %d", o.ContextLength)
	}
	if o.Layers < 0 {
		return fmt.Errorf("model: negative layer count %d", o.Layers)
	}
	if o.Type != gguf.F32 && o.Type != gguf.F16 && o.Type != gguf.Q8_0 {
		return fmt.Errorf("model: weight type %v not supported (F32, F16 or Q8_0)", o.Type)
	}
	if len(o.Merges) > 0 && o.Tokenizer != nil {
		return fmt.Errorf("model: give merges or a tokenizer, not both")
	}
	return nil
}

// Config returns the model shape the options describe.
func (o Options) Config() (Config, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return Config{}, err
	}
	var c Config
	if o.Shape != "" {
		s, err := FindShape(o.Shape)
		if err != nil {
			return c, err
		}
		c = s.Config()
	} else {
		var err error
		if c, err = PresetConfig(o.Arch, o.Preset); err != nil {
			return c, err
		}
	}
	if o.Layers > 0 {
		if o.Layers > c.BlockCount {
			return c, fmt.Errorf("model: %d layers is more than the %d of %s", o.Layers, c.BlockCount, cmp.Or(o.Shape, o.Preset))
		}
		c.BlockCount = o.Layers
	}
	if o.ContextLength > 0 {
		c.ContextLength = o.ContextLength
	}
	switch {
	case len(o.Merges) > 0:
		c.VocabSize = len(BPEVocab(o.Merges)) + len(specialTokens)
	case o.Tokenizer != nil && o.Shape != "":
		if n := o.Tokenizer.Size(); n > c.VocabSize {
			return c, fmt.Errorf("model: the tokenizer has %d tokens, more than the %d rows of shape %s", n, c.VocabSize, o.Shape)
		}
	case o.Tokenizer != nil:
		c.VocabSize = o.Tokenizer.Size()
	}
	if o.Type == gguf.Q8_0 {
		for _, t := range c.tensors() {
			if t.matrix && t.shape[0]%q8Block != 0 {
				return c, fmt.Errorf("model: Q8_0 needs rows of whole %d-element blocks; %s has rows of %d", q8Block, t.name, t.shape[0])
			}
		}
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
