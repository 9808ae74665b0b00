package llamacpp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// cContextParams mirrors struct llama_context_params (160 bytes, llama.h v0.5.0).
type cContextParams struct {
	nCtx              uint32
	nBatch            uint32
	nUBatch           uint32
	nSeqMax           uint32
	nRSSeq            uint32
	nOutputsMax       uint32
	nOutputsMaxPerSeq uint32
	nThreads          int32
	nThreadsBatch     int32
	ctxType           int32 // enum llama_context_type
	ropeScalingType   int32 // enum llama_rope_scaling_type
	poolingType       int32 // enum llama_pooling_type
	attentionType     int32 // enum llama_attention_type
	flashAttnType     int32 // enum llama_flash_attn_type
	ropeFreqBase      float32
	ropeFreqScale     float32
	yarnExtFactor     float32
	yarnAttnFactor    float32
	yarnBetaFast      float32
	yarnBetaSlow      float32
	yarnOrigCtx       uint32
	defragThold       float32
	cbEval            uintptr // ggml_backend_sched_eval_callback
	cbEvalUserData    uintptr
	typeK             int32 // enum ggml_type
	typeV             int32 // enum ggml_type
	abortCallback     uintptr
	abortCallbackData uintptr
	embeddings        bool
	offloadKQV        bool
	noPerf            bool
	opOffload         bool
	swaFull           bool
	kvUnified         bool
	_                 [2]byte
	samplers          uintptr // struct llama_sampler_seq_config *
	nSamplers         uintptr // size_t
	ctxOther          uintptr // struct llama_context *
}

// FlashAttention selects enum llama_flash_attn_type.
type FlashAttention int32

const (
	FlashAttentionAuto     FlashAttention = -1
	FlashAttentionDisabled FlashAttention = 0
	FlashAttentionEnabled  FlashAttention = 1
)

// KVType is the ggml type of the K or V cache (enum ggml_type).
type KVType int32

const (
	KVTypeF32  KVType = 0
	KVTypeF16  KVType = 1
	KVTypeQ8_0 KVType = 8
	KVTypeBF16 KVType = 30
)

var (
	// struct llama_context_params llama_context_default_params(void);
	llamaContextDefaultParams func() cContextParams
	// struct llama_context * llama_init_from_model(struct llama_model * model, struct llama_context_params params);
	llamaInitFromModel func(m uintptr, p cContextParams) uintptr
	// void llama_free(struct llama_context * ctx);
	llamaFree func(c uintptr)
	// uint32_t llama_n_ctx(const struct llama_context * ctx);
	llamaNCtx func(c uintptr) uint32
	// uint32_t llama_n_ctx_seq(const struct llama_context * ctx);
	llamaNCtxSeq func(c uintptr) uint32
	// uint32_t llama_n_batch(const struct llama_context * ctx);
	llamaNBatch func(c uintptr) uint32
	// uint32_t llama_n_ubatch(const struct llama_context * ctx);
	llamaNUBatch func(c uintptr) uint32
	// uint32_t llama_n_seq_max(const struct llama_context * ctx);
	llamaNSeqMax func(c uintptr) uint32
	// void llama_set_n_threads(struct llama_context * ctx, int32_t n_threads, int32_t n_threads_batch);
	llamaSetNThreads func(c uintptr, n, nBatch int32)
	// int32_t llama_decode(struct llama_context * ctx, struct llama_batch batch);
	llamaDecode func(c uintptr, b cBatch) int32
	// float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);
	llamaGetLogitsIth func(c uintptr, i int32) *float32
	// void llama_synchronize(struct llama_context * ctx);
	llamaSynchronize func(c uintptr)
	// size_t llama_max_parallel_sequences(void);
	llamaMaxParallelSequences func() uintptr
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaContextDefaultParams, "llama_context_default_params"},
			{&llamaInitFromModel, "llama_init_from_model"},
			{&llamaFree, "llama_free"},
			{&llamaNCtx, "llama_n_ctx"},
			{&llamaNCtxSeq, "llama_n_ctx_seq"},
			{&llamaNBatch, "llama_n_batch"},
			{&llamaNUBatch, "llama_n_ubatch"},
			{&llamaNSeqMax, "llama_n_seq_max"},
			{&llamaSetNThreads, "llama_set_n_threads"},
			{&llamaDecode, "llama_decode"},
			{&llamaGetLogitsIth, "llama_get_logits_ith"},
			{&llamaSynchronize, "llama_synchronize"},
			{&llamaMaxParallelSequences, "llama_max_parallel_sequences"},
		})
	})
}

// ContextOptions configure a context. Thread counts are explicit: left to
// llama.cpp they default to the machine's cores and busy-wait.
type ContextOptions struct {
	NCtx           int // total KV cells over all sequences (0: the model's training length)
	NBatch         int // most tokens per Decode
	NUBatch        int // physical batch (0: NBatch)
	NSeqMax        int // parallel sequences
	Threads        int // threads for single-token decoding
	ThreadsBatch   int // threads for prompt batches
	FlashAttention FlashAttention
	TypeK, TypeV   KVType
	// KVUnified shares one KV buffer across sequences (good when they share
	// a long prefix); otherwise each sequence gets NCtx/NSeqMax cells.
	KVUnified bool
	// NoPerf disables llama.cpp's timing counters.
	NoPerf bool
}

// Defaults returns a context for 1 sequence of 2048 tokens, half the CPUs
// as threads (at least 1, at most 8: more threads than free cores collapse,
// since llama.cpp's workers spin-wait), flash attention off and an F16 KV
// cache.
func (ContextOptions) Defaults() ContextOptions {
	th := max(1, min(8, runtime.GOMAXPROCS(0)/2))
	return ContextOptions{NCtx: 2048, NBatch: 512, NSeqMax: 1, Threads: th, ThreadsBatch: th,
		FlashAttention: FlashAttentionDisabled, TypeK: KVTypeF16, TypeV: KVTypeF16, NoPerf: true}
}

// Validate reports options that cannot work.
func (o ContextOptions) Validate() error {
	switch {
	case o.NCtx < 0:
		return fmt.Errorf("llamacpp: n_ctx %d < 0", o.NCtx)
	case o.NBatch < 1:
		return fmt.Errorf("llamacpp: n_batch %d < 1", o.NBatch)
	case o.NUBatch < 0 || o.NUBatch > o.NBatch:
		return fmt.Errorf("llamacpp: n_ubatch %d outside 0..n_batch (%d)", o.NUBatch, o.NBatch)
	case o.NSeqMax < 1:
		return fmt.Errorf("llamacpp: n_seq_max %d < 1", o.NSeqMax)
	case o.Threads < 1 || o.ThreadsBatch < 1:
		return fmt.Errorf("llamacpp: thread counts %d/%d must be ≥ 1 (set them explicitly)", o.Threads, o.ThreadsBatch)
	case o.FlashAttention < -1 || o.FlashAttention > 1:
		return fmt.Errorf("llamacpp: flash attention %d: want -1, 0 or 1", o.FlashAttention)
	}
	if Loaded() {
		if max := int(llamaMaxParallelSequences()); o.NSeqMax > max {
			return fmt.Errorf("llamacpp: n_seq_max %d > llama.cpp's limit %d", o.NSeqMax, max)
		}
	}
	return nil
}

// LlamaContext is an inference context: KV cache, compute buffers, logits. It is
// not safe for concurrent use: one goroutine owns it.
type LlamaContext struct {
	ptr     uintptr
	model   *Model
	nVocab  int
	unified bool // one KV stream for all sequences
}

// NewLlamaContext creates a context for m.
func NewLlamaContext(m *Model, o ContextOptions) (*LlamaContext, error) {
	if !Loaded() {
		return nil, ErrNotLoaded
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p := llamaContextDefaultParams()
	p.nCtx = uint32(o.NCtx)
	p.nBatch = uint32(o.NBatch)
	p.nUBatch = uint32(o.NUBatch)
	if o.NUBatch == 0 {
		p.nUBatch = uint32(o.NBatch)
	}
	p.nSeqMax = uint32(o.NSeqMax)
	p.nThreads = int32(o.Threads)
	p.nThreadsBatch = int32(o.ThreadsBatch)
	p.flashAttnType = int32(o.FlashAttention)
	p.typeK = int32(o.TypeK)
	p.typeV = int32(o.TypeV)
	p.kvUnified = o.KVUnified
	p.noPerf = o.NoPerf
	ptr := llamaInitFromModel(m.ptr, p)
	if ptr == 0 {
		return nil, fmt.Errorf("llamacpp: create context (n_ctx %d, n_seq_max %d, n_batch %d) failed: see the log (out of memory, or options the model does not support)", o.NCtx, o.NSeqMax, o.NBatch)
	}
	// llama.cpp makes the cache unified anyway for a single sequence.
	c := &LlamaContext{ptr: ptr, model: m, nVocab: m.Vocab().NTokens(), unified: o.KVUnified || o.NSeqMax == 1}
	llamaSetNThreads(ptr, p.nThreads, p.nThreadsBatch)
	return c, nil
}

// Close frees the context. Safe to call twice.
func (c *LlamaContext) Close() error {
	if c == nil || c.ptr == 0 {
		return nil
	}
	llamaFree(c.ptr)
	c.ptr = 0
	return nil
}

// Model is the model the context was made from.
func (c *LlamaContext) Model() *Model { return c.model }

// NCtx is the total number of KV cells.
func (c *LlamaContext) NCtx() int { return int(llamaNCtx(c.ptr)) }

// NCtxSeq is the number of KV cells one sequence may use.
func (c *LlamaContext) NCtxSeq() int { return int(llamaNCtxSeq(c.ptr)) }

// NBatch is the most tokens one Decode accepts.
func (c *LlamaContext) NBatch() int { return int(llamaNBatch(c.ptr)) }

// NUBatch is the physical batch size.
func (c *LlamaContext) NUBatch() int { return int(llamaNUBatch(c.ptr)) }

// NSeqMax is the number of parallel sequences.
func (c *LlamaContext) NSeqMax() int { return int(llamaNSeqMax(c.ptr)) }

// SetThreads sets the thread counts for single-token and batch decoding.
func (c *LlamaContext) SetThreads(n, nBatch int) { llamaSetNThreads(c.ptr, int32(n), int32(nBatch)) }

// Decode errors, translated from llama_decode's status codes.
var (
	// ErrNoKVSlot: the KV cache has no room for the batch (status 1).
	ErrNoKVSlot = errors.New("llamacpp: decode: no KV cache slot for the batch (context full)")
	// ErrAborted: the abort callback stopped the decode (status 2).
	ErrAborted = errors.New("llamacpp: decode aborted")
	// ErrInvalidBatch: the batch was rejected (status -1), for example a
	// sequence id ≥ n_seq_max or a position that does not follow the cache.
	ErrInvalidBatch = errors.New("llamacpp: decode: invalid batch")
)

// Decode runs the model over the batch. On ErrNoKVSlot and ErrInvalidBatch
// the KV cache is unchanged.
func (c *LlamaContext) Decode(b *Batch) error {
	if b.Len() == 0 {
		return nil
	}
	switch rc := llamaDecode(c.ptr, b.c); {
	case rc == 0:
		return nil
	case rc == 1:
		return ErrNoKVSlot
	case rc == 2:
		return ErrAborted
	case rc == -1:
		return ErrInvalidBatch
	default:
		return fmt.Errorf("llamacpp: decode failed with status %d", rc)
	}
}

// Logits returns the logits of the i-th token of the last batch (one with
// the logits flag set; -1 is the last output). The slice points into the
// context's memory: it is valid until the next Decode or Close; copy it to
// keep it.
func (c *LlamaContext) Logits(i int) ([]float32, error) {
	p := llamaGetLogitsIth(c.ptr, int32(i))
	if p == nil {
		return nil, fmt.Errorf("llamacpp: no logits for batch index %d (was its logits flag set?)", i)
	}
	return unsafe.Slice(p, c.nVocab), nil
}

// Synchronize waits for queued backend work (only needed for timings).
func (c *LlamaContext) Synchronize() { llamaSynchronize(c.ptr) }
