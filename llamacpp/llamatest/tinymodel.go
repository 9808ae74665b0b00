// Package llamatest holds test helpers for code that runs llama.cpp: where
// the install script put the libraries (LibDir), random LoRA adapters that
// change the logits (RandomLoRA), and an older self-contained tiny-model
// writer (WriteModel) that predates package model.
//
// It does not import llamacpp, so the bindings' own tests can use it.
package llamatest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Config describes a tiny llama model.
type Config struct {
	Embd, Heads, HeadsKV, Layers, FF, Ctx int
	Merges                                int // BPE merges learnt from the built-in corpus
	Seed                                  uint64
	// Scale of the random weights; larger values give peakier distributions.
	Scale float32
}

// Tiny is the default test model (about 120K parameters).
func Tiny() Config {
	return Config{Embd: 64, Heads: 4, HeadsKV: 2, Layers: 2, FF: 128, Ctx: 1024, Merges: 96, Seed: 1, Scale: 0.3}
}

// Special tokens of the chatml-style vocabulary, appended after the byte
// tokens and merges.
var Specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// ChatTemplate is a chatml template that llama.cpp recognises.
const ChatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

const corpus = `the quick brown fox jumps over the lazy dog. i offer you three books and two hats.
the werewolf is among us; vote for the seer. i accept the deal. no deal, i walk away.
we should split the items: you take the ball and i take the books. what is your price?
my price is fifty dollars. the meeting at ten works for me. let us meet at three.`

// byteUnicode is GPT-2's byte → printable rune mapping.
func byteUnicode() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// vocab builds the token list, merges and token types.
func vocab(merges int) (tokens []string, mergeList []string, types []int32) {
	bu := byteUnicode()
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(bu[b]))
	}
	// Words as GPT-2 pre-tokenises them (leading space → Ġ).
	var words [][]string
	for _, w := range strings.Fields(corpus) {
		var syms []string
		for _, b := range []byte(" " + w) {
			syms = append(syms, string(bu[b]))
		}
		words = append(words, syms)
	}
	have := map[string]bool{}
	for _, t := range tokens {
		have[t] = true
	}
	for len(mergeList) < merges {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w); i++ {
				counts[[2]string{w[i], w[i+1]}]++
			}
		}
		var best [2]string
		bestN := 0
		keys := make([][2]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		// Sorted keys: ties break the same way on every run.
		slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
		for _, k := range keys {
			if counts[k] > bestN {
				best, bestN = k, counts[k]
			}
		}
		if bestN < 2 {
			break
		}
		merged := best[0] + best[1]
		mergeList = append(mergeList, best[0]+" "+best[1])
		if !have[merged] {
			tokens = append(tokens, merged)
			have[merged] = true
		}
		for wi, w := range words {
			var out []string
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, merged)
					i++
				} else {
					out = append(out, w[i])
				}
			}
			words[wi] = out
		}
	}
	types = make([]int32, len(tokens))
	for i := range types {
		types[i] = 1 // normal
	}
	for _, s := range Specials {
		tokens = append(tokens, s)
		types = append(types, 3) // control
	}
	return tokens, mergeList, types
}

// Vocab returns the number of tokens of a model written with c.
func (c Config) Vocab() int {
	t, _, _ := vocab(c.Merges)
	return len(t)
}

// SpecialID returns the id of a special token for a model written with c.
func (c Config) SpecialID(s string) int32 {
	return int32(c.Vocab() - len(Specials) + slices.Index(Specials, s))
}

// kv is one metadata entry.
type kv struct {
	key string
	val any // uint32, float32, bool, string, []string, []int32, []float32
}

type tensor struct {
	name string
	ne   []uint64
	data []float32
}

// WriteModel writes a llama GGUF (v3, F32 tensors, 32-byte alignment,
// byte-level BPE tokenizer, chatml template) to path.
//
// Deprecated: use model.WriteFile (the models `omar model init` writes);
// kept while other packages' tests still call it.
func WriteModel(path string, c Config) error {
	toks, merges, types := vocab(c.Merges)
	nv := len(toks)
	headDim := c.Embd / c.Heads
	eot := int32(nv - len(Specials) + 2)
	kvs := []kv{
		{"general.architecture", "llama"},
		{"general.name", "omar-tiny-test"},
		{"general.alignment", uint32(32)},
		{"llama.context_length", uint32(c.Ctx)},
		{"llama.embedding_length", uint32(c.Embd)},
		{"llama.block_count", uint32(c.Layers)},
		{"llama.feed_forward_length", uint32(c.FF)},
		{"llama.attention.head_count", uint32(c.Heads)},
		{"llama.attention.head_count_kv", uint32(c.HeadsKV)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.vocab_size", uint32(nv)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.tokens", toks},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(nv - len(Specials))},
		{"tokenizer.ggml.eos_token_id", uint32(eot)},
		{"tokenizer.ggml.padding_token_id", uint32(nv - len(Specials))},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.chat_template", ChatTemplate},
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x6f6d6172))
	randn := func(n int, scale float32) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64()) * scale
		}
		return d
	}
	ones := func(n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = 1
		}
		return d
	}
	s := c.Scale
	if s == 0 {
		s = 0.3
	}
	e, kvd := uint64(c.Embd), uint64(headDim*c.HeadsKV)
	ts := []tensor{
		{"token_embd.weight", []uint64{e, uint64(nv)}, randn(c.Embd*nv, 1)},
		{"output_norm.weight", []uint64{e}, ones(c.Embd)},
		{"output.weight", []uint64{e, uint64(nv)}, randn(c.Embd*nv, s)},
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		fs := s / float32(math.Sqrt(float64(c.Embd)))
		ts = append(ts,
			tensor{p + "attn_norm.weight", []uint64{e}, ones(c.Embd)},
			tensor{p + "attn_q.weight", []uint64{e, e}, randn(c.Embd*c.Embd, fs*4)},
			tensor{p + "attn_k.weight", []uint64{e, kvd}, randn(c.Embd*int(kvd), fs*4)},
			tensor{p + "attn_v.weight", []uint64{e, kvd}, randn(c.Embd*int(kvd), fs*4)},
			tensor{p + "attn_output.weight", []uint64{e, e}, randn(c.Embd*c.Embd, fs*4)},
			tensor{p + "ffn_norm.weight", []uint64{e}, ones(c.Embd)},
			tensor{p + "ffn_gate.weight", []uint64{e, uint64(c.FF)}, randn(c.Embd*c.FF, fs*4)},
			tensor{p + "ffn_up.weight", []uint64{e, uint64(c.FF)}, randn(c.Embd*c.FF, fs*4)},
			tensor{p + "ffn_down.weight", []uint64{uint64(c.FF), e}, randn(c.FF*c.Embd, fs*4)},
		)
	}
	return writeGGUF(path, kvs, ts)
}

// LoRAConfig describes a random LoRA adapter for a model written with a
// Config.
type LoRAConfig struct {
	Rank  int
	Alpha float32
	Seed  uint64
	Scale float32 // of the random A and B (B is not zero, so it changes logits)
	// Targets are the per-layer weights to adapt (default attn_q, attn_v, ffn_up).
	Targets []string
}

// WriteLoRA writes a LoRA adapter GGUF for the model of c.
//
// Deprecated: use RandomLoRA with model.WriteLoRA.
func WriteLoRA(path string, c Config, l LoRAConfig) error {
	if l.Rank < 1 {
		return fmt.Errorf("llamatest: lora rank %d < 1", l.Rank)
	}
	if len(l.Targets) == 0 {
		l.Targets = []string{"attn_q", "attn_v", "ffn_up"}
	}
	headDim := c.Embd / c.Heads
	dims := map[string][2]int{ // n_in, n_out
		"attn_q": {c.Embd, c.Embd}, "attn_k": {c.Embd, headDim * c.HeadsKV}, "attn_v": {c.Embd, headDim * c.HeadsKV},
		"attn_output": {c.Embd, c.Embd}, "ffn_gate": {c.Embd, c.FF}, "ffn_up": {c.Embd, c.FF}, "ffn_down": {c.FF, c.Embd},
	}
	r := rand.New(rand.NewPCG(l.Seed, 0x6c6f7261))
	randn := func(n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64()) * l.Scale
		}
		return d
	}
	kvs := []kv{
		{"general.architecture", "llama"},
		{"general.type", "adapter"},
		{"general.alignment", uint32(32)},
		{"adapter.type", "lora"},
		{"adapter.lora.alpha", l.Alpha},
	}
	var ts []tensor
	for layer := 0; layer < c.Layers; layer++ {
		for _, t := range l.Targets {
			d, ok := dims[t]
			if !ok {
				return fmt.Errorf("llamatest: unknown lora target %q", t)
			}
			name := fmt.Sprintf("blk.%d.%s.weight", layer, t)
			ts = append(ts,
				tensor{name + ".lora_a", []uint64{uint64(d[0]), uint64(l.Rank)}, randn(d[0] * l.Rank)},
				tensor{name + ".lora_b", []uint64{uint64(l.Rank), uint64(d[1])}, randn(l.Rank * d[1])},
			)
		}
	}
	return writeGGUF(path, kvs, ts)
}

func writeGGUF(path string, kvs []kv, ts []tensor) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := &countWriter{w: bufio.NewWriter(f)}
	le := binary.LittleEndian
	put := func(v any) { _ = binary.Write(w, le, v) }
	str := func(s string) { put(uint64(len(s))); _, _ = io.WriteString(w, s) }
	put(uint32(0x46554747))
	put(uint32(3))
	put(uint64(len(ts)))
	put(uint64(len(kvs)))
	for _, e := range kvs {
		str(e.key)
		switch v := e.val.(type) {
		case uint32:
			put(uint32(4))
			put(v)
		case float32:
			put(uint32(6))
			put(v)
		case bool:
			put(uint32(7))
			put(v)
		case string:
			put(uint32(8))
			str(v)
		case []string:
			put(uint32(9))
			put(uint32(8))
			put(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []int32:
			put(uint32(9))
			put(uint32(5))
			put(uint64(len(v)))
			put(v)
		default:
			return fmt.Errorf("llamatest: unsupported metadata type %T", v)
		}
	}
	off := uint64(0)
	for _, t := range ts {
		str(t.name)
		put(uint32(len(t.ne)))
		for _, d := range t.ne {
			put(d)
		}
		put(uint32(0)) // F32
		put(off)
		off += align(uint64(len(t.data))*4, 32)
	}
	pad := func() { _, _ = w.Write(make([]byte, align(w.n, 32)-w.n)) }
	pad()
	for _, t := range ts {
		put(t.data)
		pad()
	}
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

func align(n, a uint64) uint64 { return (n + a - 1) / a * a }

type countWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// LibDir returns lib/llama/cpu of the repository that contains the working
// directory (tests run in their package directory), or "" when the install
// script has not put the libraries there.
func LibDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	// file is <repo>/llamacpp/llamatest/tinymodel.go.
	dir := filepath.Join(filepath.Dir(file), "..", "..", "lib", "llama", "cpu")
	matches, _ := filepath.Glob(filepath.Join(dir, "libllama*.so"))
	if len(matches) == 0 {
		return ""
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	return abs
}
