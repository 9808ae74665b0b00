package bc

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/loop"
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
		params := engine.Params(loop.BuiltinParams())
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
				l, err := expertLabels(ctx, g, rec, []int{seat}, "strategic")
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				replies, labels := l[seat].replies, l[seat].labels
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

// TestExpertLabelsWerewolf labels a team of a Werewolf game, whose votes
// are asked of every seat at once: every recorded action of the team's
// seats gets one label, in order.
func TestExpertLabelsWerewolf(t *testing.T) {
	ctx := context.Background()
	g, err := envs.Find("werewolf")
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint64(3) {
		cast, err := engine.ScriptedCast(g, []string{"heuristic"}, k)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := engine.Play(ctx, g, 40+k, nil, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var seats []int
		for _, s := range rec.Seats {
			if s.Role != "werewolf" {
				seats = append(seats, s.Index)
			}
		}
		l, err := expertLabels(ctx, g, rec, seats, "heuristic")
		if err != nil {
			t.Fatal(err)
		}
		for _, seat := range seats {
			var own []string
			for _, e := range rec.Events {
				if e.Kind == engine.KindAction && e.Seat == seat {
					own = append(own, e.Text)
				}
			}
			if !slices.Equal(l[seat].replies, own) || len(l[seat].labels) != len(own) {
				t.Errorf("game %d seat %d: replies %q (%d labels), the record's %q", k, seat, l[seat].replies, len(l[seat].labels), own)
			}
		}
	}
}

func TestSpread(t *testing.T) {
	xs := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, tc := range []struct {
		n    int
		want []int
	}{{0, xs}, {10, xs}, {12, xs}, {4, []int{0, 2, 5, 7}}, {1, []int{0}}} {
		if got := spread(xs, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("spread(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestDaggerOptions(t *testing.T) {
	ww, err := DaggerGameFor("werewolf")
	if err != nil || ww.Expert != "heuristic" || !slices.Equal(ww.Opponents, []string{"heuristic"}) {
		t.Errorf("werewolf: %+v, %v", ww, err)
	}
	if c, err := DaggerGameFor("craigslist"); err != nil || c.Expert != "strategic" || len(c.Opponents) != 2 {
		t.Errorf("craigslist: %+v, %v", c, err)
	}
	if _, err := DaggerGameFor("nosuchgame"); err == nil {
		t.Error("an unknown environment: no error")
	}
	good := DefaultBuild().Dagger
	good.Rounds = 1
	if err := good.Validate(); err != nil {
		t.Fatalf("the recipe's DAgger options with one round: %v", err)
	}
	for name, f := range map[string]func(*DaggerOptions){
		"no games": func(o *DaggerOptions) { o.Games = nil },
		"unknown expert": func(o *DaggerOptions) {
			o.Games = []DaggerGame{{Env: "casino", Expert: "oracle", Opponents: []string{"naive"}}}
		},
		"no opponents":      func(o *DaggerOptions) { o.Games = []DaggerGame{{Env: "casino", Expert: "strategic"}} },
		"zero steps":        func(o *DaggerOptions) { o.Steps = 0 },
		"lr 1":              func(o *DaggerOptions) { o.LR = 1 },
		"weight 0":          func(o *DaggerOptions) { o.Weight = 0 },
		"negative cap":      func(o *DaggerOptions) { o.MaxPerSeat = -1 },
		"negative rounds":   func(o *DaggerOptions) { o.Rounds = -1 },
		"too many episodes": func(o *DaggerOptions) { o.Episodes = loop.MaxCount + 1 },
	} {
		o := good
		f(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
