// Package llama is the embedded llama.cpp inference backend: one model, one
// llama context (or several, Options.Contexts), many sequences decoded
// together.
//
// One goroutine owns each context. Generate callers' requests join a shared
// decode loop between steps (continuous batching): every step is one
// llama_decode over all active sequences, each with its own sampler chain.
// A sequence slot keeps the tokens whose KV entries it holds, so a request
// whose prompt extends its key's previous prompt and reply decodes only the
// new tokens. Token ids are returned exactly as sampled, with the
// log-probability under the distribution they were drawn from and under the
// model's raw softmax.
package llama

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/omar-selfplay/omar/chattemplate"
	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/llamacpp"
)

// Options configure a Backend.
type Options struct {
	// LibDir holds the llama.cpp libraries (cmd/ resolves OMAR_LLAMA_LIB
	// and --llama-lib into it; see llamacpp.DefaultLibDir).
	LibDir string
	// Model is the GGUF file.
	Model string
	// Parallel is the number of sequence slots (n_seq_max): at most this
	// many requests decode at once, the rest wait for a free slot.
	Parallel int
	// Contexts is the number of llama contexts over the one loaded model,
	// each with its own decode loop and ⌈Parallel/Contexts⌉ of the slots
	// (0 and 1: one). A model too small for its matrix products to split
	// across threads leaves every core but one idle however many threads
	// a context has; a context per core uses them. Sessions of the
	// deterministic schedule go to context order mod Contexts, other
	// requests by their key, so a key's cache stays in one context and
	// the tokens remain a function of the callers' requests. The
	// transcripts depend on Contexts (the sequences decoded together
	// differ), not on the machine.
	Contexts int
	// Context is the number of tokens one sequence may hold (prompt and
	// reply); the KV cache has Parallel × Context cells.
	Context int
	// Batch is the most tokens one decode step takes (prompt chunks and
	// one token per generating sequence).
	Batch int
	// Threads and ThreadsBatch are set explicitly: llama.cpp's default
	// busy-waits on every core.
	Threads, ThreadsBatch int
	// GPULayers offloaded to a GPU backend (-1 all, 0 none).
	GPULayers int
	// FlashAttention: llamacpp.FlashAttentionAuto, …Disabled or …Enabled.
	FlashAttention llamacpp.FlashAttention
	// KVType is the K and V cache type (F16 by default; F32 for exact
	// agreement with a trainer's recomputation).
	KVType llamacpp.KVType
	// Adapter is an optional LoRA adapter applied from the start, with
	// AdapterScale.
	Adapter      string
	AdapterScale float32
	// ContextBeyondTraining allows a Context longer than the model's
	// training context (n_ctx_train). Positions beyond it were never
	// trained, and a mistyped context (2000000000) would allocate a KV
	// cache that the kernel kills the process for, so it is refused
	// unless set.
	ContextBeyondTraining bool
	// MemoryLimit is the most bytes the KV cache and compute buffers may
	// take (0: the memory available now, from /proc/meminfo and the
	// cgroup limit). New refuses options whose estimate exceeds it before
	// llama.cpp allocates anything. Not checked when layers are offloaded
	// to a GPU (GPULayers ≠ 0): that memory is the device's.
	MemoryLimit int64
	// GrammarCacheBytes bounds the allowed-token masks kept per grammar
	// state (grammar.go): a state met again costs no grammar pass over the
	// vocabulary. 0: 64 MiB; negative: no cache (llama.cpp masks every
	// step, as before). Tokens and log-probabilities are the same either
	// way.
	GrammarCacheBytes int64
	// ChatTemplate, when not empty, is a Jinja chat template used instead
	// of the GGUF's tokenizer.chat_template (see chat.go).
	ChatTemplate string

	// ignoreEOG keeps generating past end-of-generation tokens (benchmarks
	// need equal lengths).
	ignoreEOG bool
	// sampleWork overrides minSampleWork (tests force parallel draws).
	sampleWork int
}

// Defaults returns options for CPU inference: 8 slots of 2048 tokens,
// DefaultThreads threads, F16 KV cache, flash attention off.
func (Options) Defaults() Options {
	return Options{
		LibDir:         llamacpp.DefaultLibDir(""),
		Parallel:       8,
		Context:        2048,
		Batch:          512,
		Threads:        DefaultThreads(),
		ThreadsBatch:   DefaultThreads(),
		FlashAttention: llamacpp.FlashAttentionDisabled,
		KVType:         llamacpp.KVTypeF16,
		AdapterScale:   1,
	}
}

// DefaultThreads is half the usable CPUs (at least 1, at most 8).
// llama.cpp's CPU workers spin-wait for each other at every graph node, so
// a thread that loses its core to another process stalls all of them: on a
// shared 2-core machine 2 threads decode 50× slower than 1. Half the cores
// leaves headroom; benchmark --threads on a dedicated machine.
func DefaultThreads() int { return max(1, min(8, runtime.GOMAXPROCS(0)/2)) }

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.Model == "" {
		errs = append(errs, errors.New("no model file"))
	}
	if o.LibDir == "" {
		errs = append(errs, errors.New("no llama.cpp library directory"))
	}
	if o.Parallel < 1 {
		errs = append(errs, fmt.Errorf("parallel %d < 1", o.Parallel))
	}
	if o.Contexts < 0 {
		errs = append(errs, fmt.Errorf("contexts %d < 0", o.Contexts))
	} else if o.Parallel >= 1 && o.Contexts > o.Parallel {
		errs = append(errs, fmt.Errorf("contexts %d > parallel %d: every context needs a sequence slot", o.Contexts, o.Parallel))
	}
	if o.Context < 8 {
		errs = append(errs, fmt.Errorf("context %d < 8 tokens", o.Context))
	}
	if o.Batch < 1 {
		errs = append(errs, fmt.Errorf("batch %d < 1", o.Batch))
	} else if o.Batch < o.Parallel {
		errs = append(errs, fmt.Errorf("batch %d < parallel %d: every generating sequence needs a token per step", o.Batch, o.Parallel))
	}
	if o.Threads < 1 || o.ThreadsBatch < 1 || o.Threads > cpuuse.MaxThreads() || o.ThreadsBatch > cpuuse.MaxThreads() {
		errs = append(errs, fmt.Errorf("threads %d/%d: set both in 1..%d (%d per core of this machine)", o.Threads, o.ThreadsBatch, cpuuse.MaxThreads(), cpuuse.ThreadsPerCore))
	}
	if o.KVType == llamacpp.KVTypeQ8_0 && o.FlashAttention == llamacpp.FlashAttentionDisabled {
		// llama.cpp quantizes the V cache only inside flash attention; it
		// refused the context with a line in its log and nothing else.
		errs = append(errs, errors.New("kv cache q8_0 needs flash attention: turn flash attention on (or auto), or use kv cache f16"))
	}
	if o.GPULayers < -1 {
		errs = append(errs, fmt.Errorf("gpu layers %d < -1", o.GPULayers))
	}
	if o.Adapter != "" && (o.AdapterScale == 0 || math.IsNaN(float64(o.AdapterScale)) || math.IsInf(float64(o.AdapterScale), 0)) {
		errs = append(errs, fmt.Errorf("adapter scale %v: want a finite, non-zero number", o.AdapterScale))
	}
	if o.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("memory limit %d < 0", o.MemoryLimit))
	}
	if o.ChatTemplate != "" {
		if _, err := chattemplate.Parse(o.ChatTemplate); err != nil {
			errs = append(errs, fmt.Errorf("chat template: %w", err))
		}
	}
	// n_ctx is a uint32 in llama.cpp: a product beyond it wraps.
	if o.Parallel > 0 && o.Context > 0 && int64(o.Parallel)*int64(o.Context) > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("parallel %d × context %d = %d KV cells: more than llama.cpp's 2³¹−1", o.Parallel, o.Context, int64(o.Parallel)*int64(o.Context)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("llama: options: %w", err)
	}
	return nil
}

// contexts is the number of llama contexts o asks for (at least 1).
func (o Options) contexts() int { return max(1, o.Contexts) }

// perContext is the options of each of o's contexts: its share of the
// slots.
func (o Options) perContext() Options {
	n := o.contexts()
	o.Contexts = 1
	o.Parallel = (o.Parallel + n - 1) / n
	return o
}
