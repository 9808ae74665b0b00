package selfplay

import (
	"context"
	"math"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/casino"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

func TestAnticipateScore(t *testing.T) {
	for _, tc := range []struct {
		name, line, actual string
		scale              float64
		exact, graded      float64
		ok                 bool
	}{
		{"same keyword", "WALK", "WALK", 0, 1, 1, true},
		{"keyword in prose", "they will ACCEPT my offer", "ACCEPT", 0, 1, 1, true},
		{"lower-case prose is no move", "they walk", "WALK", 0, 0, 0, false},
		{"empty line", "", "WALK", 0, 0, 0, false},
		{"other kind", "REJECT", "ACCEPT", 0, 0, 0, true},
		{"message ignored", "SAY: fine\nACCEPT", "ACCEPT", 0, 1, 1, true},
		{"price exact", "PROPOSE: price=120", "PROPOSE: price=120", 1000, 1, 1, true},
		{"price bare and $", "PROPOSE: $1200", "PROPOSE: price=1200", 1000, 1, 1, true},
		{"price off by a tenth of the scale", "they PROPOSE: price=900", "PROPOSE: price=800", 1000, 0, .9, true},
		{"price far off floors at 0", "PROPOSE: price=5000", "PROPOSE: price=800", 1000, 0, 0, true},
		{"price without a scale: the actual price", "PROPOSE: price=150", "PROPOSE: price=100", 0, 0, .5, true},
		{"price unreadable", "PROPOSE: cheap", "PROPOSE: price=100", 1000, 0, 0, true},
		{"propose without terms", "PROPOSE:", "PROPOSE: price=100", 1000, 0, 0, false},
		{"items exact", "PROPOSE: food=1 water=2 firewood=0", "PROPOSE: food=1 water=2 firewood=0", 0, 1, 1, true},
		{"items two of three", "PROPOSE: food=1 water=2 firewood=3", "PROPOSE: food=1 water=2 firewood=0", 0, 0, 2.0 / 3, true},
		{"items order and case free", "PROPOSE: Firewood = 0, WATER=2; food=1", "PROPOSE: food=1 water=2 firewood=0", 0, 1, 1, true},
		{"items an extra term", "PROPOSE: food=1 water=2 firewood=0 hat=1", "PROPOSE: food=1 water=2 firewood=0", 0, 0, 1, true},
		{"words compared case-blind", "PROPOSE: role=Manager salary=80,000", "PROPOSE: role=manager salary=80000", 0, 1, 1, true},
		{"other games: text", "  Rock ", "rock", 0, 1, 1, true},
		{"other games: another move", "paper", "rock", 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, g, ok := AnticipateScore(tc.line, tc.actual, tc.scale)
			if e != tc.exact || math.Abs(g-tc.graded) > 1e-9 || ok != tc.ok {
				t.Errorf("AnticipateScore(%q, %q, %v) = %v, %v, %v; want %v, %v, %v", tc.line, tc.actual, tc.scale, e, g, ok, tc.exact, tc.graded, tc.ok)
			}
		})
	}
}

// FuzzAnticipateScore: any line reads without panicking, scores in
// [0, 1] with exact 1 only where graded is, unread lines score 0, and
// the same every time.
func FuzzAnticipateScore(f *testing.F) {
	for _, s := range []string{"WALK", "they will ACCEPT", "PROPOSE: price=120", "PROPOSE: $1,200", "PROPOSE: food=1 water=2 firewood=0",
		"PROPOSE:", "PROPOSE: price=1e308", "PROPOSE: price=-5", "\x00\xff ACCEPT", "SAY: hi"} {
		f.Add(s)
	}
	actuals := []string{"PROPOSE: price=800", "PROPOSE: food=1 water=2 firewood=0", "ACCEPT", "rock"}
	f.Fuzz(func(t *testing.T, line string) {
		for _, actual := range actuals {
			e, g, ok := AnticipateScore(line, actual, 1000)
			if !(g >= 0 && g <= 1) || (e != 0 && e != 1) || (e == 1 && g != 1) || (!ok && (e != 0 || g != 0)) {
				t.Fatalf("AnticipateScore(%q, %q) = %v, %v, %v", line, actual, e, g, ok)
			}
			if e2, g2, ok2 := AnticipateScore(line, actual, 1000); e2 != e || g2 != g || ok2 != ok {
				t.Fatalf("AnticipateScore(%q, %q): not deterministic", line, actual)
			}
		}
	})
}

func TestInferExact(t *testing.T) {
	ties := engine.Preferences{Issues: []engine.Issue{
		{Names: []string{"book"}, Value: 0}, {Names: []string{"hat"}, Value: 5}, {Names: []string{"ball"}, Value: 5},
	}}
	for _, tc := range []struct {
		name, line string
		p          engine.Preferences
		want       float64
		ok         bool
	}{
		{"right order", "firewood, water, food", items, 1, true},
		{"least valued left unnamed", "firewood then water", items, 1, true},
		{"top only", "firewood above all", items, 0, true},
		{"one pair swapped", "water, firewood, food", items, 0, true},
		{"tied values in either order", "ball, hat, book", ties, 1, true},
		{"tied values, other order", "hat, ball, book", ties, 1, true},
		{"tie split by the last", "hat, book, ball", ties, 0, true},
		{"price only: no order", "800", engine.Preferences{Price: 800, Scale: 1000}, 0, false},
		{"all tied: no order", "hat", engine.Preferences{Issues: ties.Issues[1:]}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := InferExact(tc.line, tc.p); got != tc.want || ok != tc.ok {
				t.Errorf("InferExact(%q) = %v, %v; want %v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNextMoves(t *testing.T) {
	ev := func(kind engine.Kind, seat int, id, text string) engine.Event {
		return engine.Event{Kind: kind, Seat: seat, NotificationID: id, Text: text}
	}
	events := []engine.Event{
		ev(engine.KindNotification, 0, "a", ""), ev(engine.KindAction, 0, "a", "PROPOSE: price=1"), ev(engine.KindAck, 0, "a", ""),
		ev(engine.KindNotification, 1, "b", ""), ev(engine.KindAction, 1, "b", "bad"), ev(engine.KindValidationError, 1, "b", "no"),
		ev(engine.KindAction, 1, "b", "PROPOSE: price=2"), ev(engine.KindAck, 1, "b", ""),
		ev(engine.KindNotification, 0, "c", ""), ev(engine.KindAction, 0, "c", "x"), ev(engine.KindValidationError, 0, "c", "no"),
		ev(engine.KindAction, 0, "c", "WALK"), ev(engine.KindAck, 0, "c", ""),
		ev(engine.KindNotification, 1, "d", ""), ev(engine.KindDefault, 1, "d", ""),
	}
	got := nextMoves(events, 0, 1)
	if len(got) != 1 || got["a"] != "PROPOSE: price=2" {
		t.Errorf("nextMoves = %v, want a → PROPOSE: price=2 only (c is followed by a default)", got)
	}
}

// TestAnticipateEpisode: both seats propose the same split and anticipate
// it, so every scored turn matches exactly; the last turn has no
// following move and is not scored.
func TestAnticipateEpisode(t *testing.T) {
	const move = "PROPOSE: food=1 water=1 firewood=1"
	be, err := scripted.New(scripted.Options{Rule: func(inference.Request) string {
		return "INFER: firewood, water, food\nACT: " + move + "\nANTICIPATE: " + move
	}})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(func(o *Options) { o.Trace, o.MaxTokens, o.BatchWindow, o.Context = TraceToM, 200, 0, 16384 })
	r, err := NewRunner(casino.New(), &Player{Label: "p", Backend: be, Tokenizer: be}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res *EpisodeResult
	if _, err := r.Run(context.Background(), 0, 1, func(e *EpisodeResult) error { res = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(res.ToM) != 2 {
		t.Fatalf("ToM scores of %d seats, want 2", len(res.ToM))
	}
	for seat, s := range res.ToM {
		if s.AnticipateTurns == 0 || s.AnticipateExact == nil || *s.AnticipateExact != 1 || *s.Anticipate != 1 || s.AnticipateUnparsed != 0 {
			t.Errorf("seat %d: %+v, want every scored turn exact", seat, s)
		}
		if s.Infer == nil || s.InferExact == nil {
			t.Errorf("seat %d: INFER scores missing: %+v", seat, s)
		}
	}
	for _, tr := range res.Trajectories {
		if tr.AnticipateExact == nil || *tr.AnticipateExact != 1 || tr.InferExact == nil {
			t.Errorf("seat %d trajectory: anticipate exact %v, infer exact %v", tr.Seat, tr.AnticipateExact, tr.InferExact)
		}
	}
}
