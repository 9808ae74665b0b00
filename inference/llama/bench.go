package llama

import (
	"context"
	"fmt"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// DecodeBench is the result of BenchDecode for one parallelism.
type DecodeBench struct {
	Parallel      int
	PromptTokens  int // per sequence
	NewTokens     int // per sequence
	BackendTokens int64
	BackendTime   time.Duration
	RawTokens     int64
	RawTime       time.Duration
	// BackendDecodeShare is the fraction of the backend's step time spent
	// inside llama_decode (the rest: batching, sampling, bookkeeping).
	BackendDecodeShare float64
}

// BackendRate is the backend's generated tokens per second.
func (d DecodeBench) BackendRate() float64 {
	return float64(d.BackendTokens) / d.BackendTime.Seconds()
}

// RawRate is the raw llama_decode loop's generated tokens per second.
func (d DecodeBench) RawRate() float64 { return float64(d.RawTokens) / d.RawTime.Seconds() }

// Ratio is BackendRate / RawRate: the cost of batching, sampling and
// bookkeeping over bare decoding (1 = free).
func (d DecodeBench) Ratio() float64 { return d.BackendRate() / d.RawRate() }

// BenchDecode measures generation throughput with parallel concurrent
// requests of promptTokens each, generating newTokens each (end-of-
// generation tokens do not stop them, so both sides produce the same
// number), through the Backend and through a raw loop over the same model
// and batch shape: one llama_decode per step, next token by argmax in Go,
// no sampler chains or logprobs. Both include the prompt decode. Each side
// runs benchRounds times, alternating, and reports its fastest round.
func BenchDecode(ctx context.Context, o Options, parallel, promptTokens, newTokens int) (DecodeBench, error) {
	res := DecodeBench{Parallel: parallel, PromptTokens: promptTokens, NewTokens: newTokens}
	o.Parallel = parallel
	o.Context = max(o.Context, promptTokens+newTokens+1)
	o.Batch = max(parallel*promptTokens, parallel)
	o.ignoreEOG = true
	b, err := New(o)
	if err != nil {
		return res, err
	}
	defer b.Close()
	nv := int32(b.vocab.NTokens())
	prompts := make([][]int32, parallel)
	for i := range prompts {
		p := make([]int32, promptTokens)
		for k := range p {
			// Deterministic, distinct per sequence; avoids special tokens
			// only by accident of the ids, which does not matter here.
			p[k] = int32((i*7919 + k*104729 + 13) % int(nv))
		}
		prompts[i] = p
	}

	// Warm up (first decode allocates compute buffers).
	if _, err := b.Generate(ctx, []inference.Request{{Prompt: prompts[0], MaxTokens: 2}}); err != nil {
		return res, err
	}
	round := 0
	var share float64
	backend := func() (int64, time.Duration, error) {
		round++
		st0 := b.Stats()
		before := st0.GeneratedTokens
		// One call with every sequence: they start in the same step, like
		// the raw loop's batch (concurrent callers would join step by step).
		reqs := make([]inference.Request, parallel)
		for i := range reqs {
			// A new key per round: the prompt is decoded again, as in the
			// raw loop.
			reqs[i] = inference.Request{
				Key: fmt.Sprintf("bench%d/%d", round, i), Prompt: prompts[i], MaxTokens: newTokens,
				Sampling: inference.Sampling{Temperature: 1, Seed: uint64(i)},
			}
		}
		start := time.Now()
		_, err := b.Generate(ctx, reqs)
		el := time.Since(start)
		if err != nil {
			return 0, el, err
		}
		st := b.Stats()
		share = float64(st.DecodeTime-st0.DecodeTime) / float64(st.StepTime-st0.StepTime)
		return st.GeneratedTokens - before, el, nil
	}

	// The raw loop: a second context with the same options on the same model.
	co := llamacpp.ContextOptions{}.Defaults()
	co.NCtx, co.NSeqMax, co.NBatch = o.Context*parallel, parallel, o.Batch
	co.Threads, co.ThreadsBatch = o.Threads, o.ThreadsBatch
	co.FlashAttention, co.TypeK, co.TypeV = o.FlashAttention, o.KVType, o.KVType
	lctx, err := llamacpp.NewLlamaContext(b.model, co)
	if err != nil {
		return res, err
	}
	defer lctx.Close()
	batch, err := llamacpp.NewBatch(o.Batch, 1)
	if err != nil {
		return res, err
	}
	defer batch.Close()
	raw := func(n int) (int64, error) {
		lctx.Memory().Clear(false)
		batch.Clear()
		idx := make([]int, parallel)
		for i, p := range prompts {
			for k, t := range p {
				j, _ := batch.Add(t, int32(k), int32(i), k == len(p)-1)
				idx[i] = j
			}
		}
		var count int64
		for step := range n {
			if err := lctx.Decode(batch); err != nil {
				return count, err
			}
			next := make([]int32, parallel)
			for i := range parallel {
				l, err := lctx.Logits(idx[i])
				if err != nil {
					return count, err
				}
				best := 0
				for v := range l {
					if l[v] > l[best] {
						best = v
					}
				}
				next[i] = int32(best)
				count++
			}
			if step == n-1 {
				break
			}
			batch.Clear()
			for i := range parallel {
				idx[i], _ = batch.Add(next[i], int32(promptTokens+step), int32(i), true)
			}
		}
		return count, nil
	}
	if _, err := raw(2); err != nil {
		return res, err
	}
	// Alternate the two and keep each one's best round: on a shared
	// machine the noise is one-sided (other work only slows a round down).
	for range benchRounds {
		n, el, err := backend()
		if err != nil {
			return res, err
		}
		if res.BackendTime == 0 || el < res.BackendTime {
			res.BackendTokens, res.BackendTime, res.BackendDecodeShare = n, el, share
		}
		start := time.Now()
		n, err = raw(newTokens)
		el = time.Since(start)
		if err != nil {
			return res, err
		}
		if res.RawTime == 0 || el < res.RawTime {
			res.RawTokens, res.RawTime = n, el
		}
	}
	return res, nil
}

// benchRounds is how many times BenchDecode runs each side.
const benchRounds = 3
