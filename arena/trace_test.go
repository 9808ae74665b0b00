package arena

import (
	"context"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/selfplay"
)

// TestTrace: with Options.Trace a model player's traced replies reach the
// game as their ACT line (valid moves); without it the same replies are
// invalid moves, so a policy trained with the trace must be measured with
// it.
func TestTrace(t *testing.T) {
	be, err := scripted.New(scripted.Options{Rule: func(inference.Request) string {
		return "INFER: they want a low price\nACT: WALK\nANTICIPATE: they walk"
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := Player{Name: "traced", Version: "1", Kind: players.KindAdapter, Model: &selfplay.Player{Label: "s", Backend: be, Tokenizer: be}}
	for _, tc := range []struct {
		trace       string
		wantInvalid bool
	}{{"", true}, {selfplay.TraceToM, false}} {
		o := scriptedOptions(2, Env{Name: "craigslist", Params: map[string]any{"structured_only": true}})
		o.Trace, o.MaxTokens, o.Grammar = tc.trace, 64, false
		invalid, inferred := 0, 0
		rep, err := Evaluate(context.Background(), o, "", []Player{p}, []Player{scriptedPlayer("naive")}, Hooks{
			Episode: func(r Result) {
				invalid += r.Invalid
				if r.ToM != nil && r.ToM.InferAccuracy != nil && r.ToM.InferExact == nil {
					inferred++
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := invalid > 0; got != tc.wantInvalid {
			t.Errorf("trace %q: %d invalid replies, want invalid %v", tc.trace, invalid, tc.wantInvalid)
		}
		// The seller knows the buyer's target price: its INFER line is
		// scored (a price has no order of issues: no exact score).
		var md strings.Builder
		if err := rep.Markdown(&md); err != nil {
			t.Fatal(err)
		}
		traced := tc.trace != ""
		if got := inferred > 0; got != traced {
			t.Errorf("trace %q: %d results with an INFER score, want some %v", tc.trace, inferred, traced)
		}
		if got := strings.Contains(md.String(), "## Theory of mind"); got != traced {
			t.Errorf("trace %q: report has a theory-of-mind section %v, want %v", tc.trace, got, traced)
		}
	}
}
