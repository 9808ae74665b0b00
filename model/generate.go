package model

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/seeds"
)

// specialTokens follow the ordinary tokens, in this order.
var specialTokens = []string{EndOfText, IMStart, IMEnd}

// Vocabulary returns the tokens, token types and merges of a generated
// model with vocabSize tokens in all.
func Vocabulary(vocabSize int) (tokens []string, types []int32, merges []string, err error) {
	n := vocabSize - len(specialTokens)
	if n <= 256 {
		return nil, nil, nil, fmt.Errorf("model: vocabulary of %d is too small", vocabSize)
	}
	merges, err = corpusMerges(n)
	if err != nil {
		return nil, nil, nil, err
	}
	tokens, types = MergesVocabulary(merges)
	return tokens, types, merges, nil
}

// MergesVocabulary returns the tokens and token types of the vocabulary
// of merges: the byte tokens and merged tokens, then the special tokens.
func MergesVocabulary(merges []string) (tokens []string, types []int32) {
	tokens = append(BPEVocab(merges), specialTokens...)
	types = make([]int32, len(tokens))
	for i := range types {
		types[i] = TokenNormal
	}
	for i := range specialTokens {
		types[len(types)-1-i] = TokenControl
	}
	return tokens, types
}

// NewModelTokenizer returns the Go tokenizer of a generated model's
// vocabulary (the same one the GGUF carries).
func NewModelTokenizer(vocabSize int) (*Tokenizer, error) {
	_, _, merges, err := Vocabulary(vocabSize)
	if err != nil {
		return nil, err
	}
	return MergesTokenizer(merges)
}

// MergesTokenizer returns the Go tokenizer of a generated model whose
// vocabulary is made of merges (Options.Merges).
func MergesTokenizer(merges []string) (*Tokenizer, error) {
	tokens, types := MergesVocabulary(merges)
	t, err := NewTokenizer(tokens, types, merges)
	if err != nil {
		return nil, err
	}
	t.BOS, t.PAD = t.ID(EndOfText), t.ID(EndOfText)
	t.EOS, t.EOT = t.ID(IMEnd), t.ID(IMEnd)
	return t, nil
}

// tensorSpec describes one weight tensor and how it is initialised.
type tensorSpec struct {
	name   string
	shape  []uint64
	std    float64   // normal(0, std) when > 0
	ones   bool      // RMS norm weights start at 1
	matrix bool      // stored as Options.Type; vectors stay F32
	values []float32 // fixed contents (rope_freqs)
}

func (t tensorSpec) elements() uint64 {
	n := uint64(1)
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// logitStd is the standard deviation of the initial output logits. With
// about 2, sampling at temperature 1 spreads over many tokens but the
// distribution is far from uniform, and greedy decoding is not stuck on
// one token; a GPT-style 0.02 init would make every logit almost 0.
const logitStd = 2.0

// residualGain scales the matrices that write into the residual stream
// (attn_output, ffn_down). Larger block outputs dilute the current token's
// own embedding in the final hidden state; with tied embeddings that
// embedding otherwise dominates its own logit and greedy decoding of a
// random model repeats the input token.
const residualGain = 3.0

// tensors lists the model's tensors in file order, with ggml shapes
// ([n_in, n_out] for a matrix mapping n_in to n_out).
func (c Config) tensors() []tensorSpec {
	e, ff, v := uint64(c.EmbeddingLength), uint64(c.FeedForwardLength), uint64(c.VocabSize)
	q := uint64(c.HeadDim * c.HeadCount)
	kv := uint64(c.HeadDim * c.HeadCountKV)
	inv := func(n uint64) float64 { return 1 / math.Sqrt(float64(n)) }
	// The output projection sees RMS-normalised vectors, so std/sqrt(e)
	// per weight gives logits with std logitStd. A tied embedding matrix
	// plays both roles; the untied input embedding uses the same scale.
	ts := []tensorSpec{{name: "token_embd.weight", shape: []uint64{e, v}, std: logitStd * inv(e), matrix: true}}
	if c.RopeScaling.Factor > 0 {
		ts = append(ts, tensorSpec{name: "rope_freqs.weight", shape: []uint64{uint64(c.HeadDim / 2)},
			values: c.RopeScaling.Factors(c.HeadDim, float64(c.RopeFreqBase))})
	}
	for i := 0; i < c.BlockCount; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			tensorSpec{name: p + "attn_norm.weight", shape: []uint64{e}, ones: true},
			tensorSpec{name: p + "attn_q.weight", shape: []uint64{e, q}, std: inv(e), matrix: true},
			tensorSpec{name: p + "attn_k.weight", shape: []uint64{e, kv}, std: inv(e), matrix: true},
			tensorSpec{name: p + "attn_v.weight", shape: []uint64{e, kv}, std: inv(e), matrix: true},
		)
		if c.QKVBias {
			ts = append(ts,
				tensorSpec{name: p + "attn_q.bias", shape: []uint64{q}, std: 0.1},
				tensorSpec{name: p + "attn_k.bias", shape: []uint64{kv}, std: 0.1},
				tensorSpec{name: p + "attn_v.bias", shape: []uint64{kv}, std: 0.1},
			)
		}
		if c.QKNorm {
			ts = append(ts,
				tensorSpec{name: p + "attn_q_norm.weight", shape: []uint64{uint64(c.HeadDim)}, ones: true},
				tensorSpec{name: p + "attn_k_norm.weight", shape: []uint64{uint64(c.HeadDim)}, ones: true},
			)
		}
		ts = append(ts,
			tensorSpec{name: p + "attn_output.weight", shape: []uint64{q, e}, std: residualGain * inv(q), matrix: true},
			tensorSpec{name: p + "ffn_norm.weight", shape: []uint64{e}, ones: true},
			tensorSpec{name: p + "ffn_gate.weight", shape: []uint64{e, ff}, std: inv(e), matrix: true},
			tensorSpec{name: p + "ffn_up.weight", shape: []uint64{e, ff}, std: inv(e), matrix: true},
			tensorSpec{name: p + "ffn_down.weight", shape: []uint64{ff, e}, std: residualGain * inv(ff), matrix: true},
		)
	}
	ts = append(ts, tensorSpec{name: "output_norm.weight", shape: []uint64{e}, ones: true})
	if !c.TiedEmbeddings {
		ts = append(ts, tensorSpec{name: "output.weight", shape: []uint64{e, v}, std: logitStd * inv(e), matrix: true})
	}
	return ts
}

// Generate builds a random model as a GGUF writer (call WriteTo or
// WriteFile on it). The same options give the same bytes.
func Generate(opts Options) (*gguf.Writer, error) {
	opts = opts.Defaults()
	c, err := opts.Config()
	if err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	set := func(k string, v any) {
		if err == nil {
			err = w.Set(k, v)
		}
	}
	a := c.Arch + "."
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	switch opts.Type {
	case gguf.F16:
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	case gguf.Q8_0:
		fileType = 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	}
	set("general.architecture", c.Arch)
	set("general.type", "model")
	if opts.Shape != "" {
		set("general.name", "omar-standin-"+opts.Shape)
		set("general.file_type", fileType)
		set("omar.shape", opts.Shape)
	} else {
		set("general.name", fmt.Sprintf("omar-%s-%s", opts.Preset, c.Arch))
		set("general.file_type", fileType)
		set("omar.preset", opts.Preset)
	}
	set("omar.seed", opts.Seed)
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
	switch {
	case err != nil:
	case opts.Tokenizer != nil:
		tok := *opts.Tokenizer
		if opts.Shape != "" {
			s, _ := FindShape(opts.Shape) // validated by Config
			tok.fillFromConfig(s)
		}
		err = tok.write(w, c.VocabSize)
	default:
		err = writeVocabulary(w, opts, c)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range c.tensors() {
		data := make([]float32, t.elements())
		switch {
		case t.values != nil:
			copy(data, t.values)
		case t.ones:
			for i := range data {
				data[i] = 1
			}
		case t.std > 0:
			rng := rand.New(rand.NewPCG(seeds.Derive(opts.Seed, nameHash(t.name)), 0x6f6d6172))
			for i := range data {
				data[i] = float32(rng.NormFloat64() * t.std)
			}
		}
		var err error
		switch {
		case !t.matrix:
			err = w.AddTensor(t.name, t.shape, gguf.F32, data)
		case opts.Type == gguf.Q8_0:
			err = w.AddTensorBytes(t.name, t.shape, gguf.Q8_0, quantizeQ8(data))
		default:
			err = w.AddTensor(t.name, t.shape, opts.Type, data)
		}
		if err != nil {
			return nil, err
		}
	}
	return w, nil
}

// writeVocabulary writes the generated byte-level BPE vocabulary (merges
// learnt from the built-in corpus, or opts.Merges) with the ChatML
// special tokens and template.
func writeVocabulary(w *gguf.Writer, opts Options, c Config) error {
	var tokens, merges []string
	var types []int32
	var err error
	if len(opts.Merges) > 0 {
		merges = opts.Merges
		tokens, types = MergesVocabulary(merges)
	} else if tokens, types, merges, err = Vocabulary(c.VocabSize); err != nil {
		return err
	}
	set := func(k string, v any) {
		if err == nil {
			err = w.Set(k, v)
		}
	}
	set("tokenizer.ggml.model", "gpt2")
	set("tokenizer.ggml.pre", PreTokenizer)
	set("tokenizer.ggml.tokens", tokens)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.merges", merges)
	id := func(s string) uint32 {
		for i := len(tokens) - 1; i >= 0; i-- {
			if tokens[i] == s {
				return uint32(i)
			}
		}
		panic("model: special token missing: " + s) // Vocabulary always appends them
	}
	set("tokenizer.ggml.bos_token_id", id(EndOfText))
	set("tokenizer.ggml.eos_token_id", id(IMEnd))
	set("tokenizer.ggml.eot_token_id", id(IMEnd))
	set("tokenizer.ggml.padding_token_id", id(EndOfText))
	set("tokenizer.ggml.add_bos_token", false)
	set("tokenizer.ggml.add_eos_token", false)
	set("tokenizer.chat_template", ChatTemplate)
	return err
}

// q8Block is the number of weights in one Q8_0 block.
const q8Block = 32

// quantizeQ8 encodes data as ggml's Q8_0 (quantize_row_q8_0_ref): per
// block of 32 weights an F16 scale d = max|x|/127 and 32 int8 values
// round(x/d).
func quantizeQ8(data []float32) []byte {
	out := make([]byte, 0, len(data)/q8Block*(2+q8Block))
	for b := 0; b+q8Block <= len(data); b += q8Block {
		blk := data[b : b+q8Block]
		var amax float32
		for _, x := range blk {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := gguf.Float32ToFloat16(d)
		out = append(out, byte(h), byte(h>>8))
		for _, x := range blk {
			out = append(out, byte(int8(math.Round(float64(x*id)))))
		}
	}
	return out
}

// nameHash gives each tensor its own random stream, so adding a tensor
// does not change the others.
func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// WriteFile generates a model and writes it to path.
func WriteFile(path string, opts Options) error {
	w, err := Generate(opts)
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// WriteTemp generates a model into name in a new temporary directory and
// returns its path and a function that removes the directory (a benchmark
// given no model measures one of these).
func WriteTemp(opts Options, name string) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "omar-model")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, name)
	if err := WriteFile(path, opts); err != nil {
		remove()
		return "", nil, err
	}
	return path, remove, nil
}
