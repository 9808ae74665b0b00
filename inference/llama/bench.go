package llama

import (
	"context"
	"fmt"
	"io"
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

// WriteDecodeHeader and WriteRow print BenchDecode's results as a table,
// which scripts/gpu-check.sh reads (the ratio is the fourth column). Fixed
// widths rather than a tabwriter: rows print as they finish.
func WriteDecodeHeader(w io.Writer) {
	fmt.Fprintf(w, "%8s %14s %12s %7s %14s %12s %13s\n", "parallel", "backend tok/s", "raw tok/s", "ratio", "backend tokens", "raw tokens", "decode share")
}

// WriteRow prints d as a row of WriteDecodeHeader's table.
func (d DecodeBench) WriteRow(w io.Writer) {
	fmt.Fprintf(w, "%8d %14.0f %12.0f %7.3f %14d %12d %13.3f\n", d.Parallel, d.BackendRate(), d.RawRate(), d.Ratio(), d.BackendTokens, d.RawTokens, d.BackendDecodeShare)
}

// BenchDecode measures generation throughput with parallel concurrent
// requests of promptTokens each, generating newTokens each (end-of-
// generation tokens do not stop them, so both sides produce the same
// number), through the Backend and through a raw loop over the same model
// and batch shape: one llama_decode per step, next token by argmax in Go,
// no sampler chains or logprobs. Both include the prompt decode. Each side
// runs benchRounds times, alternating, and reports its fastest round.
// Every prompt goes into the first llama_decode (n_batch is set to hold
// them all).
func BenchDecode(ctx context.Context, o Options, parallel, promptTokens, newTokens int) (DecodeBench, error) {
	o.Batch = max(parallel*promptTokens, parallel)
	return benchDecode(ctx, o, parallel, 0, promptTokens, newTokens)
}

// BenchDecodeChunked is BenchDecode with the caller's o.Batch kept: both
// sides decode the prompts in chunks of at most o.Batch tokens, the raw
// loop filling each decode as the backend does (one token for every
// generating sequence first, then prompt chunks in sequence order). It is
// the reference for a workload whose prompts do not fit one decode, such
// as a rollout, where llama.cpp's cost per prompt token depends on the
// size of the decode. Each sequence already holds prefixTokens in its KV
// cache, decoded before the clock starts (a rollout's later turns append
// to a cached conversation, and a prompt token's attention costs more the
// deeper it sits).
func BenchDecodeChunked(ctx context.Context, o Options, parallel, prefixTokens, promptTokens, newTokens int) (DecodeBench, error) {
	if o.Batch < parallel {
		return DecodeBench{}, fmt.Errorf("llama: bench: batch %d < parallel %d", o.Batch, parallel)
	}
	if prefixTokens < 0 {
		return DecodeBench{}, fmt.Errorf("llama: bench: prefix %d < 0", prefixTokens)
	}
	return benchDecode(ctx, o, parallel, prefixTokens, promptTokens, newTokens)
}

func benchDecode(ctx context.Context, o Options, parallel, prefixTokens, promptTokens, newTokens int) (DecodeBench, error) {
	res := DecodeBench{Parallel: parallel, PromptTokens: promptTokens, NewTokens: newTokens}
	o.Parallel = parallel
	o.Context = max(o.Context, prefixTokens+promptTokens+newTokens+1)
	o.ignoreEOG = true
	o.Contexts = 1 // the raw loop it is compared with has one
	b, err := New(o)
	if err != nil {
		return res, err
	}
	defer b.Close()
	prompts := benchPrompts(parallel, prefixTokens+promptTokens, int(b.vocab.NTokens()))

	// Warm up (first decode allocates compute buffers).
	if _, err := b.Generate(ctx, []inference.Request{{Prompt: prompts[0][prefixTokens:], MaxTokens: 2}}); err != nil {
		return res, err
	}
	bb := &benchBackend{b: b, prompts: prompts, prefixTokens: prefixTokens, newTokens: newTokens}
	raw, err := newRawDecode(b, o, prompts, prefixTokens)
	if err != nil {
		return res, err
	}
	defer raw.Close()
	if _, _, err := raw.run(2); err != nil {
		return res, err
	}
	// Alternate the two and keep each one's best round: on a shared
	// machine the noise is one-sided (other work only slows a round down).
	for range benchRounds {
		n, el, share, err := bb.run(ctx)
		if err != nil {
			return res, err
		}
		if res.BackendTime == 0 || el < res.BackendTime {
			res.BackendTokens, res.BackendTime, res.BackendDecodeShare = n, el, share
		}
		n, el, err = raw.run(newTokens)
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

// benchPrompts are parallel prompts of n tokens each.
func benchPrompts(parallel, n, nv int) [][]int32 {
	prompts := make([][]int32, parallel)
	for i := range prompts {
		p := make([]int32, n)
		for k := range p {
			// Deterministic, distinct per sequence; avoids special tokens
			// only by accident of the ids, which does not matter here.
			p[k] = int32((i*7919 + k*104729 + 13) % nv)
		}
		prompts[i] = p
	}
	return prompts
}

// benchBackend is the Backend side of the bench: one Generate call per
// round with every sequence.
type benchBackend struct {
	b                       *Backend
	prompts                 [][]int32
	prefixTokens, newTokens int
	round                   int
}

// run is one round: the tokens generated, the time taken, and the share
// of the backend's step time spent in llama_decode.
func (bb *benchBackend) run(ctx context.Context) (int64, time.Duration, float64, error) {
	bb.round++
	b, parallel := bb.b, len(bb.prompts)
	if bb.prefixTokens > 0 {
		// The cached conversation: decoded under the round's keys
		// before the clock starts, then reused by the timed call.
		pre := make([]inference.Request, parallel)
		for i := range pre {
			pre[i] = inference.Request{Key: fmt.Sprintf("bench%d/%d", bb.round, i), Prompt: bb.prompts[i][:bb.prefixTokens], MaxTokens: 1}
		}
		if _, err := b.Generate(ctx, pre); err != nil {
			return 0, 0, 0, err
		}
	}
	st0 := b.Stats()
	// One call with every sequence: they start in the same step, like
	// the raw loop's batch (concurrent callers would join step by step).
	reqs := make([]inference.Request, parallel)
	for i := range reqs {
		// A new key per round: the prompt is decoded again, as in the
		// raw loop.
		reqs[i] = inference.Request{
			Key: fmt.Sprintf("bench%d/%d", bb.round, i), Prompt: bb.prompts[i], MaxTokens: bb.newTokens,
			Sampling: inference.Sampling{Temperature: 1, Seed: uint64(i)},
		}
	}
	start := time.Now()
	_, err := b.Generate(ctx, reqs)
	el := time.Since(start)
	if err != nil {
		return 0, el, 0, err
	}
	st := b.Stats()
	share := float64(st.DecodeTime-st0.DecodeTime) / float64(st.StepTime-st0.StepTime)
	return st.GeneratedTokens - st0.GeneratedTokens, el, share, nil
}

// rawDecode is the raw side of the bench: a second context with the same
// options on the same model, one llama_decode per step, next token by
// argmax in Go.
type rawDecode struct {
	lctx         *llamacpp.LlamaContext
	batch        *llamacpp.Batch
	nBatch       int
	prompts      [][]int32
	prefixTokens int
}

func newRawDecode(b *Backend, o Options, prompts [][]int32, prefixTokens int) (*rawDecode, error) {
	parallel := len(prompts)
	co := llamacpp.ContextOptions{}.Defaults()
	co.NCtx, co.NSeqMax, co.NBatch = o.Context*parallel, parallel, o.Batch
	co.Threads, co.ThreadsBatch = o.Threads, o.ThreadsBatch
	co.FlashAttention, co.TypeK, co.TypeV = o.FlashAttention, o.KVType, o.KVType
	lctx, err := llamacpp.NewLlamaContext(b.model, co)
	if err != nil {
		return nil, err
	}
	batch, err := llamacpp.NewBatch(o.Batch, 1)
	if err != nil {
		lctx.Close()
		return nil, err
	}
	return &rawDecode{lctx: lctx, batch: batch, nBatch: o.Batch, prompts: prompts, prefixTokens: prefixTokens}, nil
}

func (r *rawDecode) Close() {
	r.batch.Close()
	r.lctx.Close()
}

// prefill decodes every sequence's prefix, in chunks of n_batch.
func (r *rawDecode) prefill() error {
	batch, prefix := r.batch, r.prefixTokens
	for i, p := range r.prompts {
		for k := 0; k < prefix; {
			batch.Clear()
			for ; k < prefix && batch.Len() < r.nBatch; k++ {
				_, _ = batch.Add(p[k], int32(k), int32(i), k == prefix-1 || batch.Len() == r.nBatch-1)
			}
			if err := r.lctx.Decode(batch); err != nil {
				return err
			}
		}
	}
	return nil
}

// run decodes every sequence's prompt and n tokens: each decode takes one
// token of every generating sequence, then prompt chunks in sequence
// order up to n_batch (with one decode for all prompts when they fit,
// the plain batched loop). The prefixes are decoded first, off the clock.
func (r *rawDecode) run(n int) (int64, time.Duration, error) {
	r.lctx.Memory().Clear(false)
	if err := r.prefill(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	parallel := len(r.prompts)
	s := rawRound{
		n: n, end: len(r.prompts[0]),
		fed:  make([]int, parallel),
		got:  make([]int, parallel),
		next: make([]int32, parallel),
		idx:  make([]int, parallel),
	}
	for i := range s.fed {
		s.fed[i] = r.prefixTokens
	}
	var count int64
	for {
		r.fill(&s)
		if r.batch.Len() == 0 {
			return count, time.Since(start), nil
		}
		if err := r.lctx.Decode(r.batch); err != nil {
			return count, 0, err
		}
		for i := range parallel {
			if s.idx[i] < 0 {
				continue
			}
			l, err := r.lctx.Logits(s.idx[i])
			if err != nil {
				return count, 0, err
			}
			best := 0
			for v := range l {
				if l[v] > l[best] {
					best = v
				}
			}
			s.next[i] = int32(best)
			s.got[i]++
			count++
		}
	}
}

// rawRound is one run's progress, per sequence.
type rawRound struct {
	n    int     // tokens to generate
	end  int     // prompt length, prefix included
	fed  []int   // prompt tokens decoded
	got  []int   // tokens generated
	next []int32 // the token to decode next, once generating
	idx  []int   // batch index of the logits wanted this step, or -1
}

// fill builds one step's batch: the next token of every generating
// sequence, then prompt tokens in sequence order while n_batch allows.
func (r *rawDecode) fill(s *rawRound) {
	batch, end := r.batch, s.end
	batch.Clear()
	budget := r.nBatch
	for i := range s.idx {
		s.idx[i] = -1
		if s.fed[i] == end && s.got[i] > 0 && s.got[i] < s.n && budget > 0 {
			s.idx[i], _ = batch.Add(s.next[i], int32(end+s.got[i]-1), int32(i), true)
			budget--
		}
	}
	for i, p := range r.prompts {
		for s.fed[i] < end && budget > 0 {
			k := s.fed[i]
			j, _ := batch.Add(p[k], int32(k), int32(i), k == end-1)
			if k == end-1 {
				s.idx[i] = j
			}
			s.fed[i]++
			budget--
		}
	}
}
