package llama

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/inference"
)

// TestContextsEqualSeparateBackends checks the routing of sessions and
// that the contexts do not disturb each other: over two contexts, the
// sessions opened with orders 0 … 5 get exactly the tokens and logprobs
// that two separate backends of half the slots give them, one playing the
// even orders and the other the odd ones, whichever session dawdles.
func TestContextsEqualSeparateBackends(t *testing.T) {
	ctx := context.Background()
	lora := writeLoRA(t, 3)
	o := testOptions(t)
	orders := []int{0, 1, 2, 3, 4, 5}

	o.Contexts = 2
	b := newBackend(t, o)
	if err := b.LoadAdapter(ctx, "other", lora, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.Adapters(); !slices.Equal(got, []string{"other"}) {
		t.Errorf("adapters %v", got)
	}
	if s := b.Session(3); s.Scheduler() != inference.Scheduler(b) {
		t.Errorf("a session's scheduler is not the backend that opened it")
	} else {
		s.Close()
	}
	together := playSessions(t, b, orders, true)

	one := testOptions(t)
	one.Parallel /= 2
	for part := range 2 {
		sb := newBackend(t, one)
		if err := sb.LoadAdapter(ctx, "other", lora, 1); err != nil {
			t.Fatal(err)
		}
		var mine []int
		for _, k := range orders {
			if k%2 == part {
				mine = append(mine, k)
			}
		}
		alone := playSessions(t, sb, mine, false)
		for _, k := range mine {
			if len(alone[k]) != len(together[k]) || len(alone[k]) == 0 {
				t.Fatalf("session %d: %d responses alone, %d together", k, len(alone[k]), len(together[k]))
			}
			for turn := range alone[k] {
				a, g := alone[k][turn], together[k][turn]
				if !slices.Equal(a.Tokens, g.Tokens) || !slices.Equal(a.Logprobs, g.Logprobs) {
					t.Errorf("session %d turn %d: %v %v on two contexts, %v %v on one backend", k, turn, g.Tokens, g.Logprobs, a.Tokens, a.Logprobs)
				}
			}
		}
	}
}

// TestContextsRouteKeys checks requests outside sessions: a key's next
// request finds its prefix cached (its context decodes it again), the
// adapter swaps in every context, and the counters add up.
func TestContextsRouteKeys(t *testing.T) {
	ctx := context.Background()
	o := testOptions(t)
	o.Contexts = 2
	b := newBackend(t, o)
	if got := b.ContextPerSequence(); got != o.Context {
		t.Errorf("context per sequence %d, want %d", got, o.Context)
	}
	// Keys that hash to both contexts.
	var keys []string
	seen := map[int]bool{}
	for i := 0; len(seen) < 2 || len(keys) < 4; i++ {
		k := fmt.Sprintf("seat%d", i)
		seen[keyContext(k, 2)] = true
		keys = append(keys, k)
	}
	reqs := func(turn int, prev []inference.Response) []inference.Request {
		rs := make([]inference.Request, len(keys))
		for i, k := range keys {
			p := prompt(t, b, "the price is "+k)
			if prev != nil {
				p = append(append(p, prev[i].Tokens...), prompt(t, b, "and?")...)
			}
			rs[i] = inference.Request{Key: k, Prompt: p, MaxTokens: 4, Sampling: inference.Sampling{Temperature: 1, Seed: uint64(turn*10 + i)}}
		}
		return rs
	}
	first := gen(t, b, reqs(0, nil)...)
	second := gen(t, b, reqs(1, first)...)
	generated := 0
	for i, r := range second {
		if r.ReusedTokens == 0 {
			t.Errorf("key %s: its prefix was not reused (%d tokens decoded again)", keys[i], len(r.Tokens))
		}
		generated += len(r.Tokens) + len(first[i].Tokens)
	}
	if st := b.Stats(); st.GeneratedTokens != int64(generated) || st.ReusedTokens == 0 {
		t.Errorf("stats %+v: generated %d, want %d", st, st.GeneratedTokens, generated)
	}

	v, err := b.SetAdapter(ctx, writeLoRA(t, 4), 1)
	if err != nil || v != 1 || b.PolicyVersion() != 1 {
		t.Fatalf("SetAdapter: version %d (%d), %v", v, b.PolicyVersion(), err)
	}
	for i, r := range gen(t, b, reqs(2, nil)...) {
		if r.PolicyVersion != 1 {
			t.Errorf("key %s: policy version %d after the swap", keys[i], r.PolicyVersion)
		}
	}
	b.Release("seat")

	last := reqs(3, nil)
	b.Close()
	if _, err := b.Generate(ctx, last); !errors.Is(err, ErrClosed) {
		t.Errorf("Generate after Close: %v", err)
	}
	if _, err := b.Tokenize("x", false, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Tokenize after Close: %v", err)
	}
}

// TestContextsSwapAdapters swaps adapters in both contexts many times
// while they decode: llama.cpp registers every loaded adapter in a set of
// the model's, so the contexts' loads and frees must not overlap (they
// corrupted the C heap before llamacpp serialised them).
func TestContextsSwapAdapters(t *testing.T) {
	ctx := context.Background()
	o := testOptions(t)
	o.Contexts = 2
	b := newBackend(t, o)
	loras := []string{writeLoRA(t, 5), writeLoRA(t, 6)}
	p := prompt(t, b, "swap")
	for i := range 40 {
		if _, err := b.SetAdapter(ctx, loras[i%2], 1); err != nil {
			t.Fatal(err)
		}
		if err := b.LoadAdapter(ctx, "other", loras[(i+1)%2], 1); err != nil {
			t.Fatal(err)
		}
		reqs := make([]inference.Request, 4)
		for k := range reqs {
			reqs[k] = inference.Request{Key: fmt.Sprintf("k%d", k), Prompt: p, MaxTokens: 2, Sampling: inference.Sampling{Temperature: 1, Seed: uint64(i)}}
			if k%2 == 1 {
				reqs[k].Adapter = "other"
			}
		}
		gen(t, b, reqs...)
	}
	if v := b.PolicyVersion(); v != 40 {
		t.Errorf("policy version %d after 40 swaps", v)
	}
}

// BenchmarkContexts decodes 8 sessions of 3 turns × 32 tokens each on
// the tiny model over one and over two contexts (one thread each): on a
// model this small a second thread does not help a context, a second
// context uses a second core.
func BenchmarkContexts(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("contexts=%d", n), func(b *testing.B) {
			o := testOptions(b)
			o.Parallel, o.Contexts, o.Context = 8, n, 512
			be := newBackend(b, o)
			p := prompt(b, be, "the bidding opens at")
			tokens := 0
			b.ResetTimer()
			for i := range b.N {
				var wg sync.WaitGroup
				var mu sync.Mutex
				for k := range 8 {
					s := be.Session(k)
					wg.Go(func() {
						defer s.Close()
						toks := slices.Clone(p)
						for turn := range 3 {
							req := inference.Request{Key: fmt.Sprintf("b%d/%d", i, k), Prompt: slices.Clone(toks), MaxTokens: 32,
								Sampling: inference.Sampling{Temperature: 1, Seed: uint64(100*k + turn)}}
							rs, errs := s.GenerateEach([]context.Context{context.Background()}, []inference.Request{req})
							if errs[0] != nil {
								b.Error(errs[0])
								return
							}
							toks = append(toks, rs[0].Tokens...)
							mu.Lock()
							tokens += len(rs[0].Tokens)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
