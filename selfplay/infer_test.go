package selfplay

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/casino"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

// items are CaSiNo-like preferences: firewood ≻ water ≻ food.
var items = engine.Preferences{Issues: []engine.Issue{
	{Names: []string{"food"}, Value: 3}, {Names: []string{"water"}, Value: 4}, {Names: []string{"firewood"}, Value: 5},
}}

func TestInferAccuracy(t *testing.T) {
	price := engine.Preferences{Price: 800, Scale: 1000}
	ties := engine.Preferences{Issues: []engine.Issue{
		{Names: []string{"book"}, Value: 0}, {Names: []string{"hat"}, Value: 5}, {Names: []string{"ball"}, Value: 5},
	}}
	job := engine.Preferences{Issues: []engine.Issue{
		{Names: []string{"salary", "pay"}, Value: 40}, {Names: []string{"days off", "vacation"}, Value: 10},
	}}
	for _, tc := range []struct {
		name, line string
		p          engine.Preferences
		want       float64
	}{
		{"right order", "they need firewood most, then water, food least", items, 1},
		{"reversed", "food first, then water, then firewood", items, 0},
		{"top only", "firewood above all", items, 2.0 / 3},
		{"nothing named", "they seem friendly", items, 0},
		{"any case and plural", "FIREWOODs, Waters, foods", items, 1},
		{"whole words only", "firewoodish waterfall", items, 0},
		{"first mention counts", "water, firewood, water again, food", items, 2.0 / 3},
		{"tied values are not scored", "hat or ball, then book", ties, 1},
		{"an unnamed issue ties last", "ball, book", ties, .5},
		{"tied values, wrong", "book before hat", ties, 0},
		{"any name of an issue", "vacation matters more to them than pay", job, 0},
		{"canonical name", "they want a high salary; days off less", job, 1},
		{"price exact", "their target is about $800", price, 1},
		{"price off by 10% of the listing", "they'd pay 900 at most", price, .9},
		{"price with commas and decimals", "maybe 1,000.00", price, .8},
		{"price in thousands", "0.7k tops", price, .9},
		{"price far off floors at 0", "5000", price, 0},
		{"no number", "cheap", price, 0},
		{"both kinds: the mean", "firewood, water, food for 800", engine.Preferences{Issues: items.Issues, Price: 800, Scale: 1000}, 1},
		{"nothing to infer", "anything", engine.Preferences{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InferAccuracy(tc.line, tc.p); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("InferAccuracy(%q) = %v, want %v", tc.line, got, tc.want)
			}
		})
	}
}

func TestInferLine(t *testing.T) {
	for _, tc := range []struct {
		reply, want string
		ok          bool
	}{
		{"INFER: water first\nACT: x\nANTICIPATE: y", "water first", true},
		{"ACT: x\n  INFER:   late line  ", "late line", true},
		{"ACT: x", "", false},
		{"", "", false},
	} {
		if got, ok := inferLine(tc.reply); got != tc.want || ok != tc.ok {
			t.Errorf("inferLine(%q) = %q, %v; want %q, %v", tc.reply, got, ok, tc.want, tc.ok)
		}
	}
	// A turn without an INFER line scores 0 in a seat's mean.
	if got := inferAccuracy([]string{"INFER: firewood, water, food", "ACT: x"}, items); got != .5 {
		t.Errorf("mean over two turns, one untraced: got %v, want .5", got)
	}
}

// FuzzInferAccuracy: any reply parses without panicking, scores in [0, 1]
// and the same every time.
func FuzzInferAccuracy(f *testing.F) {
	for _, s := range []string{"INFER: firewood, water, food for $800", "INFER: 1,2,3,4k", "INFER: \x00\xff", "INFER: 9" + strings.Repeat("9", 400), "ACT: x", "INFER: .5k, 1e308"} {
		f.Add(s)
	}
	p := engine.Preferences{Issues: items.Issues, Price: 800, Scale: 1000}
	f.Fuzz(func(t *testing.T, reply string) {
		line, _ := inferLine(reply)
		got := InferAccuracy(line, p)
		if !(got >= 0 && got <= 1) {
			t.Fatalf("InferAccuracy(%q) = %v, want a score in [0, 1]", line, got)
		}
		if again := InferAccuracy(line, p); again != got {
			t.Fatalf("InferAccuracy(%q): %v then %v", line, got, again)
		}
		if v, ok := firstNumber(line); ok && (math.IsNaN(v) || v < 0) {
			t.Fatalf("firstNumber(%q) = %v", line, v)
		}
	})
}

// TestInferReward: with the trace a policy seat's INFER accuracy against
// the counterpart's priorities is recorded, and its reward is the game's
// plus weight × that accuracy (weight 0: the game's alone).
func TestInferReward(t *testing.T) {
	const line = "food, then water, then firewood"
	be, err := scripted.New(scripted.Options{Rule: func(inference.Request) string {
		return "INFER: " + line + "\nACT: WALK\nANTICIPATE: they walk too"
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []float64{0, .5} {
		opts := testOptions(func(o *Options) { o.Trace, o.MaxTokens, o.InferReward, o.BatchWindow = TraceToM, 64, w, 0 })
		r, err := NewRunner(casino.New(), &Player{Label: "p", Backend: be, Tokenizer: be}, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		var res []*EpisodeResult
		if _, err := r.Run(context.Background(), 0, 3, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range res {
			sc := e.Record.Scenario.(engine.PreferenceScenario)
			for _, tr := range e.Trajectories {
				n++
				game := e.Record.Outcome.Rewards[tr.Seat]
				p, _ := sc.Preferences(1 - tr.Seat)
				want := InferAccuracy(line, p)
				if tr.InferAccuracy == nil || math.Abs(*tr.InferAccuracy-want) > 1e-12 || math.Abs(tr.Reward-(game+w*want)) > 1e-12 {
					t.Errorf("seat %d: reward %v, accuracy %v; want %v + %v × %v", tr.Seat, tr.Reward, tr.InferAccuracy, game, w, want)
				}
			}
		}
		if n == 0 {
			t.Fatalf("weight %v: no trajectories", w)
		}
	}
	bad := testOptions(func(o *Options) { o.InferReward = 1 })
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "infer reward") {
		t.Errorf("infer reward without the trace: got %v, want an error", err)
	}
}
