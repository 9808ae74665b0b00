package loop

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/selfplay"
)

// TestExpertLabels: the strategic script labelling a seat it played itself
// agrees with every reply (it is deterministic in the state it sees, and
// the replay hands it the same views); labelling the naive script's seat,
// it disagrees somewhere.
func TestExpertLabels(t *testing.T) {
	ctx := context.Background()
	for _, id := range envs.Negotiation {
		g, err := envs.Find(id)
		if err != nil {
			t.Fatal(err)
		}
		params := engine.Params(BuiltinParams())
		differ := 0
		for k := range uint64(8) {
			cast, err := engine.ScriptedCast(g, []string{"strategic", "naive"}, k)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := engine.Play(ctx, g, 100+k, params, cast, engine.DefaultOptions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for seat, name := range []string{"strategic", "naive"} {
				replies, labels, err := expertLabels(ctx, g, rec, seat, "strategic")
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				var own []string
				for _, e := range rec.Events {
					if e.Kind == engine.KindAction && e.Seat == seat {
						own = append(own, e.Text)
					}
				}
				if !slices.Equal(replies, own) || len(labels) != len(replies) {
					t.Fatalf("%s seat %d: replies %q labels %q, the record's %q", id, seat, replies, labels, own)
				}
				switch {
				case name == "strategic" && !slices.Equal(labels, replies):
					t.Errorf("%s episode %d: the strategic seat's replies %q, its own labels %q", id, k, replies, labels)
				case name == "naive" && !slices.Equal(labels, replies):
					differ++
				}
			}
		}
		if differ == 0 {
			t.Errorf("%s: the expert agrees with the naive seat in all 8 episodes", id)
		}
	}
}

// TestLabelledSequences checks the sequences built from a stream whose
// replies the expert would partly have given.
func TestLabelledSequences(t *testing.T) {
	// prompt 10 11, reply "a" = 20 99, prompt 12, reply "b" = 21 99,
	// prompt 13, reply "c" = 22 99 (99 ends a turn).
	tr := selfplay.Trajectory{
		Tokens: []int32{10, 11, 20, 99, 12, 21, 99, 13, 22, 99},
		Mask:   selfplay.Mask{false, false, true, true, false, true, true, false, true, true},
	}
	tok := map[string][]int32{"a": {20, 99}, "b": {21, 99}, "c": {22, 99}, "x": {30, 31, 99}, "y": {32, 99}}
	labelTokens := func(s string) ([]int32, error) {
		if v, ok := tok[s]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("no tokens for %q", s)
	}
	const p = 0.25
	type seq struct {
		tokens  []int32
		weights []float32
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   []seq
	}{
		{"all agree: the stream itself", []string{"a", "b", "c"}, []seq{
			{[]int32{10, 11, 20, 99, 12, 21, 99, 13, 22, 99}, []float32{p, p, 1, 1, p, 1, 1, p, 1, 1}},
		}},
		{"the second differs", []string{"a", "x", "c"}, []seq{
			{[]int32{10, 11, 20, 99, 12, 30, 31, 99}, []float32{p, p, 1, 1, p, 1, 1, 1}},
		}},
		{"first and last differ: the first reply is context only", []string{"y", "b", "x"}, []seq{
			{[]int32{10, 11, 32, 99}, []float32{p, p, 1, 1}},
			{[]int32{10, 11, 20, 99, 12, 21, 99, 13, 30, 31, 99}, []float32{p, p, 0, 0, p, 1, 1, p, 1, 1, 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := labelledSequences(tr, []string{"a", "b", "c"}, tc.labels, labelTokens, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d sequences, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if !slices.Equal(g.Tokens, w.tokens) || !slices.Equal(g.Weights, w.weights) {
					t.Errorf("sequence %d: tokens %v weights %v, want %v %v", i, g.Tokens, g.Weights, w.tokens, w.weights)
				}
				for j := range g.Mask {
					if g.Mask[j] != (g.Weights[j] > 0) {
						t.Errorf("sequence %d token %d: mask %v, weight %v", i, j, g.Mask[j], g.Weights[j])
					}
				}
			}
		})
	}
	if _, err := labelledSequences(tr, []string{"a", "b"}, []string{"a", "b"}, labelTokens, p); err == nil {
		t.Error("two replies for a stream of three: no error")
	}
}
