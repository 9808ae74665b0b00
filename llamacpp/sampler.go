package llamacpp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/omar-selfplay/omar/inference/gbnf"
)

// TokenData mirrors llama_token_data { llama_token id; float logit; float p; }.
type TokenData struct {
	ID    int32
	Logit float32
	P     float32
}

// cTokenDataArray mirrors llama_token_data_array (32 bytes).
type cTokenDataArray struct {
	data     *TokenData
	size     uintptr
	selected int64
	sorted   bool
	_        [7]byte
}

var (
	// struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params);
	// (llama_sampler_chain_params is { bool no_perf; }, passed as its one byte)
	llamaSamplerChainInit func(noPerf bool) uintptr
	// void llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl);
	llamaSamplerChainAdd func(chain, s uintptr)
	// int32_t llama_sampler_chain_n(const struct llama_sampler * chain);
	llamaSamplerChainN func(chain uintptr) int32
	// struct llama_sampler * llama_sampler_init_greedy(void);
	llamaSamplerInitGreedy func() uintptr
	// struct llama_sampler * llama_sampler_init_dist(uint32_t seed);
	llamaSamplerInitDist func(seed uint32) uintptr
	// struct llama_sampler * llama_sampler_init_top_k(int32_t k);
	llamaSamplerInitTopK func(k int32) uintptr
	// struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep);
	llamaSamplerInitTopP func(p float32, minKeep uintptr) uintptr
	// struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep);
	llamaSamplerInitMinP func(p float32, minKeep uintptr) uintptr
	// struct llama_sampler * llama_sampler_init_temp(float t);
	llamaSamplerInitTemp func(t float32) uintptr
	// struct llama_sampler * llama_sampler_init_grammar(const struct llama_vocab * vocab,
	//                                                   const char * grammar_str, const char * grammar_root);
	llamaSamplerInitGrammar func(v uintptr, grammar, root *byte) uintptr
	// void llama_sampler_accept(struct llama_sampler * smpl, llama_token token);
	llamaSamplerAccept func(s uintptr, t int32)
	// void llama_sampler_apply(struct llama_sampler * smpl, llama_token_data_array * cur_p);
	llamaSamplerApply func(s uintptr, cur unsafe.Pointer)
	// void llama_sampler_reset(struct llama_sampler * smpl);
	llamaSamplerReset func(s uintptr)
	// struct llama_sampler * llama_sampler_clone(const struct llama_sampler * smpl);
	llamaSamplerClone func(s uintptr) uintptr
	// void llama_sampler_free(struct llama_sampler * smpl);
	llamaSamplerFree func(s uintptr)
	// const char * llama_sampler_name(const struct llama_sampler * smpl);
	llamaSamplerName func(s uintptr) *byte
	// llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx);
	llamaSamplerSample func(s, c uintptr, idx int32) int32
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaSamplerChainInit, "llama_sampler_chain_init"},
			{&llamaSamplerChainAdd, "llama_sampler_chain_add"},
			{&llamaSamplerChainN, "llama_sampler_chain_n"},
			{&llamaSamplerInitGreedy, "llama_sampler_init_greedy"},
			{&llamaSamplerInitDist, "llama_sampler_init_dist"},
			{&llamaSamplerInitTopK, "llama_sampler_init_top_k"},
			{&llamaSamplerInitTopP, "llama_sampler_init_top_p"},
			{&llamaSamplerInitMinP, "llama_sampler_init_min_p"},
			{&llamaSamplerInitTemp, "llama_sampler_init_temp"},
			{&llamaSamplerInitGrammar, "llama_sampler_init_grammar"},
			{&llamaSamplerAccept, "llama_sampler_accept"},
			{&llamaSamplerApply, "llama_sampler_apply"},
			{&llamaSamplerReset, "llama_sampler_reset"},
			{&llamaSamplerClone, "llama_sampler_clone"},
			{&llamaSamplerFree, "llama_sampler_free"},
			{&llamaSamplerName, "llama_sampler_name"},
			{&llamaSamplerSample, "llama_sampler_sample"},
		})
	})
}

// Sampler is a llama.cpp sampler or sampler chain. A sampler added to a
// chain belongs to the chain: close only the chain.
type Sampler struct {
	ptr     uintptr
	grammar *grammarView // a grammar sampler's state reader (grammar_state.go); nil: none
}

// NewSamplerChain returns an empty chain.
func NewSamplerChain() (*Sampler, error) {
	if !Loaded() {
		return nil, ErrNotLoaded
	}
	return &Sampler{ptr: llamaSamplerChainInit(true)}, nil
}

// NewGreedySampler picks the most likely candidate.
func NewGreedySampler() *Sampler { return &Sampler{ptr: llamaSamplerInitGreedy()} }

// NewDistSampler draws from the softmax of the candidates with its own
// seeded generator.
func NewDistSampler(seed uint32) *Sampler { return &Sampler{ptr: llamaSamplerInitDist(seed)} }

// NewTopKSampler keeps the k most likely candidates (k ≤ 0: all).
func NewTopKSampler(k int) *Sampler { return &Sampler{ptr: llamaSamplerInitTopK(int32(k))} }

// NewTopPSampler keeps the smallest set with cumulative probability ≥ p.
func NewTopPSampler(p float32, minKeep int) *Sampler {
	return &Sampler{ptr: llamaSamplerInitTopP(p, uintptr(minKeep))}
}

// NewMinPSampler drops candidates below p times the top probability.
func NewMinPSampler(p float32, minKeep int) *Sampler {
	return &Sampler{ptr: llamaSamplerInitMinP(p, uintptr(minKeep))}
}

// NewTempSampler divides the logits by t (t ≤ 0 keeps only the maximum).
func NewTempSampler(t float32) *Sampler { return &Sampler{ptr: llamaSamplerInitTemp(t)} }

// ErrGrammar is returned for GBNF grammars llama.cpp cannot parse and for
// those gbnf.Check refuses (beyond its limits, left-recursive).
var ErrGrammar = errors.New("llamacpp: invalid GBNF grammar")

// NewGrammarSampler masks candidates that the GBNF grammar (start rule
// root) does not allow. It holds the parse state: accept every chosen token,
// and use one per sequence. The grammar is checked in Go first, within
// gbnf's default limits: llama.cpp's parser recurses without bound and a
// deep or explosive grammar kills the process.
func NewGrammarSampler(v *Vocab, grammar, root string) (*Sampler, error) {
	return NewGrammarSamplerLimits(v, grammar, root, gbnf.Limits{}.Defaults())
}

// NewGrammarSamplerLimits is NewGrammarSampler within lim.
func NewGrammarSamplerLimits(v *Vocab, grammar, root string, lim gbnf.Limits) (*Sampler, error) {
	if grammar == "" {
		return nil, fmt.Errorf("%w: empty grammar", ErrGrammar)
	}
	g, err := gbnf.Check(grammar, root, lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGrammar, err)
	}
	s, err := initGrammar(v, grammar, root)
	if err != nil {
		return nil, err
	}
	s.grammar = newGrammarView(s, v, grammar, root, g)
	return s, nil
}

// initGrammar calls llama_sampler_init_grammar on an unchecked grammar.
func initGrammar(v *Vocab, grammar, root string) (*Sampler, error) {
	g, r := cString(grammar), cString(root)
	p := llamaSamplerInitGrammar(v.ptr, &g[0], &r[0])
	runtime.KeepAlive(g)
	runtime.KeepAlive(r)
	if p == 0 {
		return nil, fmt.Errorf("%w (root rule %q; the log has the parse error)", ErrGrammar, root)
	}
	return &Sampler{ptr: p}, nil
}

// Add appends s to the chain, which takes ownership of it.
func (c *Sampler) Add(s *Sampler) {
	llamaSamplerChainAdd(c.ptr, s.ptr)
	s.ptr = 0 // owned by the chain now; closing s is a no-op
}

// Len is the number of samplers in a chain.
func (c *Sampler) Len() int { return int(llamaSamplerChainN(c.ptr)) }

// Name is the sampler's name ("chain", "dist", "grammar", …).
func (s *Sampler) Name() string { return goString(llamaSamplerName(s.ptr)) }

// Accept tells the sampler (all of a chain) that token was chosen. For a
// grammar sampler the token must be one the grammar allows (one it did not
// mask): llama.cpp aborts the process otherwise.
func (s *Sampler) Accept(token int32) { llamaSamplerAccept(s.ptr, token) }

// Reset restores the initial state (grammar position, RNG stays).
func (s *Sampler) Reset() { llamaSamplerReset(s.ptr) }

// Clone copies the sampler with its state.
func (s *Sampler) Clone() *Sampler { return &Sampler{ptr: llamaSamplerClone(s.ptr)} }

// Sample applies the sampler to the logits of batch index idx of ctx,
// accepts the chosen token and returns it.
func (s *Sampler) Sample(ctx *LlamaContext, idx int) int32 {
	return llamaSamplerSample(s.ptr, ctx.ptr, int32(idx))
}

// Close frees the sampler. Safe to call twice.
func (s *Sampler) Close() error {
	if s == nil || s.ptr == 0 {
		return nil
	}
	llamaSamplerFree(s.ptr)
	s.ptr = 0
	return nil
}

// Candidates is a reusable candidate array (llama_token_data_array) in Go
// memory, for applying samplers one stage at a time.
type Candidates struct {
	buf []TokenData
	arr cTokenDataArray
}

// NewCandidates allocates room for n tokens.
func NewCandidates(n int) *Candidates { return &Candidates{buf: make([]TokenData, n)} }

// Fill loads the logits as candidates (ids 0..len-1), unsorted, none selected.
func (c *Candidates) Fill(logits []float32) {
	if cap(c.buf) < len(logits) {
		c.buf = make([]TokenData, len(logits))
	}
	c.buf = c.buf[:len(logits)]
	for i, l := range logits {
		c.buf[i] = TokenData{ID: int32(i), Logit: l}
	}
	c.arr = cTokenDataArray{data: &c.buf[0], size: uintptr(len(c.buf)), selected: -1}
}

// Apply runs sampler s over the candidates (filters shrink or reorder
// them, masks set logits to -inf, a final sampler selects one).
func (c *Candidates) Apply(s *Sampler) {
	llamaSamplerApply(s.ptr, unsafe.Pointer(&c.arr))
	runtime.KeepAlive(c.buf)
}

// Data returns the current candidates (a view, valid until the next Fill).
func (c *Candidates) Data() []TokenData {
	// Samplers may move the data pointer (into their own storage) or shrink
	// the size; always view what the struct says now.
	if c.arr.data == nil {
		return nil
	}
	return unsafe.Slice(c.arr.data, int(c.arr.size))
}

// Selected returns the selected candidate; ok is false when no sampler has
// selected one.
func (c *Candidates) Selected() (TokenData, bool) {
	d := c.Data()
	if c.arr.selected < 0 || int(c.arr.selected) >= len(d) {
		return TokenData{}, false
	}
	return d[c.arr.selected], true
}

// Sorted reports whether the candidates are sorted by descending logit.
func (c *Candidates) Sorted() bool { return c.arr.sorted }
