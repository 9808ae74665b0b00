package llama

import (
	"fmt"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/internal/sysmem"
	"github.com/omar-selfplay/omar/llamacpp"
)

// modelShape is what the context and memory checks need of a model,
// read from its GGUF header before llama.cpp loads it.
type modelShape struct {
	arch                  string
	ctxTrain              int
	layers, embd, ff      int
	heads, headsKV        int // the largest over the layers
	keyLen, valLen, vocab int
}

// readShape reads the shape keys of the model file (CheckModelFile has
// vetted their values).
func readShape(path string) (modelShape, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return modelShape{}, err
	}
	defer f.Close()
	var s modelShape
	if s.arch, err = f.String("general.architecture"); err != nil {
		return modelShape{}, err
	}
	get := func(key string) int {
		v, _ := f.Get(s.arch + "." + key)
		return largest(v)
	}
	s.ctxTrain, s.layers, s.embd, s.ff = get("context_length"), get("block_count"), get("embedding_length"), get("feed_forward_length")
	s.heads, s.headsKV = get("attention.head_count"), get("attention.head_count_kv")
	if s.headsKV == 0 {
		s.headsKV = s.heads
	}
	s.keyLen, s.valLen = get("attention.key_length"), get("attention.value_length")
	if s.keyLen == 0 && s.heads > 0 {
		s.keyLen = s.embd / s.heads
	}
	if s.valLen == 0 {
		s.valLen = s.keyLen
	}
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err == nil {
		s.vocab = len(toks)
	}
	return s, nil
}

// largest is an integer metadata value, or the largest of an integer
// array (per-layer values); 0 when absent or not an integer.
func largest(v any) int {
	n := 0
	switch x := v.(type) {
	case uint32:
		n = int(x)
	case int32:
		n = int(x)
	case uint64:
		n = int(min(x, 1<<40))
	case int64:
		n = int(x)
	case uint16:
		n = int(x)
	case uint8:
		n = int(x)
	case []uint32:
		for _, e := range x {
			n = max(n, int(e))
		}
	case []int32:
		for _, e := range x {
			n = max(n, int(e))
		}
	}
	return max(n, 0)
}

// kvBytesPerElement is the size of one cached K or V element; q8_0 packs
// 32 elements into 34 bytes.
func kvBytesPerElement(t llamacpp.KVType) float64 {
	switch t {
	case llamacpp.KVTypeF32:
		return 4
	case llamacpp.KVTypeQ8_0:
		return 34.0 / 32
	}
	return 2
}

// memoryEstimate is the bytes New's context needs beyond the weights.
type memoryEstimate struct {
	kv, compute int64
}

func (m memoryEstimate) total() int64 { return m.kv + m.compute }

// estimateMemory approximates llama.cpp's allocation for o: the KV cache
// (Parallel × Context cells × layers × (K + V widths)) and the compute
// buffers of one micro-batch: the attention scores without flash
// attention (batch × cells of a sequence × heads), the activations and
// the logits. It errs on the low side: a refusal is certain to be right.
func estimateMemory(o Options, s modelShape) memoryEstimate {
	cells := float64(o.Parallel) * float64(o.Context)
	kv := cells * float64(s.layers) * float64(s.headsKV*(s.keyLen+s.valLen)) * kvBytesPerElement(o.KVType)
	batch := float64(o.Batch)
	scores := 0.0
	if o.FlashAttention != llamacpp.FlashAttentionEnabled {
		scores = batch * float64(o.Context) * float64(s.heads) * 4
	}
	act := batch * float64(4*s.embd+2*s.ff) * 4
	logits := batch * float64(s.vocab) * 4
	return memoryEstimate{kv: int64(min(kv, 1<<62)), compute: int64(min(scores+act+logits, 1<<62))}
}

// checkShape bounds o by the model: the context by its training context
// (unless ContextBeyondTraining), the estimated memory by MemoryLimit or
// the memory available now. It runs before llama.cpp allocates anything,
// so an absurd request fails at once (and a signal meanwhile is seen by
// the caller as soon as New returns).
func checkShape(o Options, s modelShape, available func() (int64, string, error)) error {
	if s.ctxTrain > 0 && o.Context > s.ctxTrain && !o.ContextBeyondTraining {
		return fmt.Errorf("llama: context %d tokens exceeds %s's training context (%s.context_length = %d): lower the context, or allow it explicitly (ContextBeyondTraining)", o.Context, o.Model, s.arch, s.ctxTrain)
	}
	// llama.cpp stores a q8_0 cache row per head in blocks of 32, and
	// refuses (in its log only) a head that does not divide into them.
	if o.KVType == llamacpp.KVTypeQ8_0 && (s.keyLen%32 != 0 || s.valLen%32 != 0) {
		return fmt.Errorf("llama: kv cache q8_0 stores each attention head in blocks of 32 values, and %s's heads have %d (keys) and %d (values): use kv cache f16 (kv_cache: f16)", o.Model, s.keyLen, s.valLen)
	}
	if o.GPULayers != 0 {
		return nil
	}
	// Every context has its own KV cache and compute buffers.
	est := estimateMemory(o.perContext(), s)
	n := int64(o.contexts())
	est.kv, est.compute = min(est.kv, 1<<62/n)*n, min(est.compute, 1<<62/n)*n
	limit, source := o.MemoryLimit, "the memory limit"
	if limit == 0 {
		var err error
		if limit, source, err = available(); err != nil || limit <= 0 {
			return nil // unknown: let llama.cpp try
		}
	}
	if est.total() > limit {
		return fmt.Errorf("llama: %d sequences × %d tokens need about %s of KV cache and %s of compute buffers, more than the %s available (%s): lower the parallel sequences or the context",
			o.Parallel, o.Context, sysmem.ByteSize(est.kv), sysmem.ByteSize(est.compute), sysmem.ByteSize(limit), source)
	}
	return nil
}
