package selfplay

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

func TestTraceGrammar(t *testing.T) {
	g := traceGrammar("root ::= move\nmove ::= \"BID \" [0-9]+\n")
	for _, want := range []string{`root ::= "INFER: " tom-line "\nACT: " tom-act "\nANTICIPATE: " tom-line`, "tom-act ::= move", `move ::= "BID " [0-9]+`} {
		if !strings.Contains(g, want) {
			t.Errorf("grammar lacks %q:\n%s", want, g)
		}
	}
	if strings.Count(g, "root ::=") != 1 {
		t.Errorf("two roots:\n%s", g)
	}
	if traceGrammar("") != "" {
		t.Errorf("no grammar must stay none")
	}
	for _, tc := range []struct{ in, want string }{
		{"INFER: low\nACT: BID 3\nANTICIPATE: BID 2", "BID 3"},
		{"ACT: WALK", "WALK"},
	} {
		if got, err := traceAction(tc.in); err != nil || got != tc.want {
			t.Errorf("traceAction(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := traceAction("BID 3"); err == nil {
		t.Errorf("a reply without ACT gave a move")
	}
}

// TestTraceToM: with the theory-of-mind trace the engine receives only
// the ACT line, the stream keeps the whole trace as the model's tokens,
// and a reply without an ACT line is an invalid move (retried), not an
// error.
func TestTraceToM(t *testing.T) {
	be, err := scripted.New(scripted.Options{Rule: func(req inference.Request) string {
		if req.Sampling.Seed%5 == 0 {
			return "no trace at all"
		}
		return "INFER: they value it low\nACT: BID " + strconv.Itoa(int(req.Sampling.Seed%9)) + "\nANTICIPATE: BID 1"
	}})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(func(o *Options) { o.Trace, o.MaxTokens, o.BatchWindow = TraceToM, 64, 0 })
	r, err := NewRunner(sealedbid.New(), &Player{Label: "p", Backend: be, Tokenizer: be}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, 6, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
		t.Fatal(err)
	}
	acts, rejected := 0, 0
	for _, e := range res {
		for _, ev := range e.Record.Events {
			switch ev.Kind {
			case engine.KindAction:
				acts++
				if strings.Contains(ev.Text, "INFER") || strings.Contains(ev.Text, "ANTICIPATE") {
					t.Errorf("the engine received the trace: %q", ev.Text)
				}
			case engine.KindValidationError:
				rejected++
			}
		}
		for _, tr := range e.Trajectories {
			text, _ := be.Detokenize(tr.Tokens)
			if !strings.Contains(text, "INFER: they value it low") || !strings.Contains(text, "ANTICIPATE: BID 1") {
				t.Errorf("the stream lacks the trace")
			}
			if tr.InferAccuracy != nil {
				t.Errorf("sealed bid knows no preferences, yet INFER accuracy %v", *tr.InferAccuracy)
			}
		}
	}
	if acts == 0 || rejected == 0 {
		t.Errorf("%d actions, %d rejected: want both (some replies have no ACT line)", acts, rejected)
	}
}
