package llama

import (
	"math"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/inference"
)

func TestTopLogprobs(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		n      int
		want   []int32
	}{
		{"largest first", []float32{0, 3, 1, 2}, 2, []int32{1, 3}},
		{"ties keep the lower id first", []float32{1, 2, 2, 0, 2}, 2, []int32{1, 2}},
		{"n beyond the vocabulary", []float32{1, 0}, 5, []int32{0, 1}},
		{"NaN is never a top token", []float32{float32(math.NaN()), 1, 0}, 2, []int32{1, 2}},
		{"negative infinity ranks last", []float32{float32(math.Inf(-1)), -5, -6}, 3, []int32{1, 2, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lse := 0.0
			for _, l := range tc.logits {
				if !math.IsNaN(float64(l)) {
					lse += math.Exp(float64(l))
				}
			}
			lse = math.Log(lse)
			got := topLogprobs(tc.logits, tc.n, lse)
			ids := make([]int32, len(got))
			for i, g := range got {
				ids[i] = g.Token
				if want := float32(float64(tc.logits[g.Token]) - lse); g.Logprob != want {
					t.Errorf("token %d: logprob %v, want %v", g.Token, g.Logprob, want)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("got tokens %v, want %v", ids, tc.want)
			}
		})
	}
}

// TestTopLogprobsGenerate checks that a generation asked for top
// logprobs lists, at every position, tokens in decreasing order whose
// entry for the sampled token equals its raw logprob, and that asking
// changes nothing else.
func TestTopLogprobsGenerate(t *testing.T) {
	b := newBackend(t, testOptions(t))
	req := inference.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 6, Sampling: inference.Sampling{Temperature: 0.9, Seed: 3}}
	plain, err := b.Generate(t.Context(), []inference.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	req.TopLogprobs = 4
	withTop, err := b.Generate(t.Context(), []inference.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	p, w := plain[0], withTop[0]
	if !slices.Equal(p.Tokens, w.Tokens) || !slices.Equal(p.RawLogprobs, w.RawLogprobs) || !slices.Equal(p.Logprobs, w.Logprobs) {
		t.Fatalf("top logprobs changed the generation: %v vs %v", p.Tokens, w.Tokens)
	}
	if p.TopLogprobs != nil {
		t.Errorf("got top logprobs %v without asking", p.TopLogprobs)
	}
	if len(w.TopLogprobs) != len(w.Tokens) {
		t.Fatalf("got %d top lists for %d tokens", len(w.TopLogprobs), len(w.Tokens))
	}
	for i, top := range w.TopLogprobs {
		if len(top) != 4 {
			t.Fatalf("position %d: %d entries, want 4", i, len(top))
		}
		for k := 1; k < len(top); k++ {
			if top[k].Logprob > top[k-1].Logprob {
				t.Errorf("position %d: entry %d (%v) above entry %d (%v)", i, k, top[k].Logprob, k-1, top[k-1].Logprob)
			}
		}
		for _, e := range top {
			if e.Token == w.Tokens[i] && e.Logprob != w.RawLogprobs[i] {
				t.Errorf("position %d: sampled token's top logprob %v, raw logprob %v", i, e.Logprob, w.RawLogprobs[i])
			}
		}
	}
}
