package negotiation

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

// numberRules bargain over one whole number 1..9; seat 1 may not accept 9.
type numberRules struct{}

func (numberRules) ParseTerms(_ int, text string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(text, "n="))
	if err != nil || n < 1 || n > 9 {
		return 0, fmt.Errorf("want n=1..9")
	}
	return n, nil
}

func (numberRules) CheckAccept(seat int, n int) error {
	if seat == 1 && n == 9 {
		return fmt.Errorf("9 is not acceptable to seat 1")
	}
	return nil
}
func (numberRules) Describe(_ int, n int) string      { return "n=" + strconv.Itoa(n) }
func (numberRules) TermsHelp(int) string              { return "PROPOSE: n=<1..9>" }
func (numberRules) TermsGrammar(int) (string, string) { return `"n=" [1-9]`, "" }

func script(texts ...string) engine.Agent {
	i := 0
	return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
		text := "REJECT"
		if i < len(texts) {
			text = texts[i]
		}
		i++
		return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
	})
}

func TestPlay(t *testing.T) {
	tests := []struct {
		name      string
		a, b      []string
		rounds    int
		want      Status
		wantDeal  int
		wantWalk  int
		wantTurns int
		invalid   [2]int
	}{
		{name: "accept the counterpart's offer", a: []string{"PROPOSE: n=3"}, b: []string{"ACCEPT"}, rounds: 3, want: StatusDeal, wantDeal: 3, wantWalk: -1, wantTurns: 2},
		{name: "a SAY-only turn keeps the offer", a: []string{"PROPOSE: n=4", "SAY: well?"}, b: []string{"SAY: hmm", "ACCEPT"}, rounds: 3, want: StatusDeal, wantDeal: 4, wantWalk: -1, wantTurns: 4},
		{name: "REJECT withdraws it", a: []string{"PROPOSE: n=4", "SAY: still there?"}, b: []string{"REJECT", "ACCEPT", "ACCEPT", "ACCEPT"}, rounds: 2, want: StatusNoDeal, wantWalk: -1, wantTurns: 4, invalid: [2]int{0, 3}},
		{name: "own offer cannot be accepted", a: []string{"PROPOSE: n=2", "ACCEPT", "PROPOSE: n=5"}, b: []string{"PROPOSE: n=6", "ACCEPT"}, rounds: 2, want: StatusDeal, wantDeal: 6, wantWalk: -1, wantTurns: 3},
		{name: "the latest proposal is the standing offer", a: []string{"PROPOSE: n=2", "PROPOSE: n=7"}, b: []string{"PROPOSE: n=6", "ACCEPT"}, rounds: 2, want: StatusDeal, wantDeal: 7, wantWalk: -1, wantTurns: 4},
		{name: "rule forbids accepting", a: []string{"PROPOSE: n=9"}, b: []string{"ACCEPT", "ACCEPT", "ACCEPT", "WALK"}, rounds: 2, want: StatusWalk, wantWalk: 1, wantTurns: 4, invalid: [2]int{0, 3}},
		{name: "walk", a: []string{"WALK"}, rounds: 2, want: StatusWalk, wantWalk: 0, wantTurns: 1},
		{name: "bad terms then a default", a: []string{"PROPOSE: n=0", "PROPOSE: 12", "PROPOSE: x"}, b: []string{"ACCEPT"}, rounds: 1, want: StatusNoDeal, wantWalk: -1, wantTurns: 2, invalid: [2]int{3, 1}},
	}
	for _, tt := range tests {
		for _, compact := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/compact=%v", tt.name, compact), func(t *testing.T) {
				seats := []engine.Seat{{Index: 0, Name: "A"}, {Index: 1, Name: "B"}}
				rt, err := engine.NewRuntime(seats, []engine.Agent{script(tt.a...), script(tt.b...)}, engine.DefaultOptions())
				if err != nil {
					t.Fatal(err)
				}
				res, err := Play(context.Background(), rt, numberRules{}, Options{Rounds: tt.rounds, Compact: compact}, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != tt.want || res.Walker != tt.wantWalk || res.Turns != tt.wantTurns || res.Invalid != tt.invalid {
					t.Fatalf("got status %s walker %d turns %d invalid %v; want %s %d %d %v", res.Status, res.Walker, res.Turns, res.Invalid, tt.want, tt.wantWalk, tt.wantTurns, tt.invalid)
				}
				if tt.want == StatusDeal && res.Deal.Terms != tt.wantDeal {
					t.Errorf("deal: got %d, want %d", res.Deal.Terms, tt.wantDeal)
				}
			})
		}
	}
}

// TestPlayCompact pins what each seat reads in compact mode: no round
// phases, no echo of its own move, one short line per turn; a reminder
// (Options.Remind) shows only with hints.
func TestPlayCompact(t *testing.T) {
	seats := []engine.Seat{{Index: 0, Name: "A"}, {Index: 1, Name: "B"}}
	a := script("PROPOSE: n=4", "SAY: well?", "PROPOSE: n=5")
	b := script("SAY: hmm", "REJECT", "PROPOSE: n=9")
	rt, err := engine.NewRuntime(seats, []engine.Agent{a, b}, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Play(context.Background(), rt, numberRules{}, Options{Rounds: 3, Compact: true, Remind: [2]string{"only with hints", "only with hints"}}, 0, nil); err != nil {
		t.Fatal(err)
	}
	want := [2]string{
		`Turn 1/3.
B says: hmm
Your offer stands. Turn 2/3.
B rejects your offer.
Turn 3/3. Your last turn.
B proposes: n=9`,
		`A proposes: n=4
Turn 1/3.
A says: well?
A's offer stands: n=4 Turn 2/3.
A proposes: n=5
Turn 3/3. The last turn: ACCEPT or no deal.`,
	}
	for seat := range 2 {
		var lines []string
		for _, e := range rt.Log().View(seat) {
			switch e.Kind {
			case engine.KindNotification, engine.KindObservation, engine.KindPhase:
				if e.Kind == engine.KindPhase && strings.HasPrefix(e.Text, "The turn limit") {
					continue
				}
				lines = append(lines, e.Text)
			}
		}
		if got := strings.Join(lines, "\n"); got != want[seat] {
			t.Errorf("seat %d reads:\n%s\nwant:\n%s", seat, got, want[seat])
		}
	}
}

// TestPlayCompactHints pins Params.Hints' appraisals: on every turn the
// other seat's offer stands and may be accepted, and not otherwise; and a
// seat's reminder opening each of its turn lines.
func TestPlayCompactHints(t *testing.T) {
	seats := []engine.Seat{{Index: 0, Name: "A"}, {Index: 1, Name: "B"}}
	a := script("PROPOSE: n=4", "PROPOSE: n=9", "PROPOSE: n=5")
	b := script("PROPOSE: n=1", "PROPOSE: n=9")
	rt, err := engine.NewRuntime(seats, []engine.Agent{a, b}, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cands := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	worth := [2]func(int) string{
		Appraiser(Valuation[int]{Candidates: cands, Utility: func(n int) float64 { return float64(n-1) / 8 }}),
		Appraiser(Valuation[int]{Candidates: cands, Utility: func(n int) float64 { return float64(9-n) / 8 }}),
	}
	appraise := func(seat, n int) string { return worth[seat](n) }
	if _, err := Play(context.Background(), rt, numberRules{}, Options{Rounds: 3, Compact: true, Hints: true, Remind: [2]string{"", "n runs 1–9."}}, 0, appraise); err != nil {
		t.Fatal(err)
	}
	want := [2]string{
		`Turn 1/3.
B proposes: n=1
Worth to you: no better than no deal. Turn 2/3.
B proposes: n=9
Worth to you: 100% of your best. Turn 3/3. Your last turn.
B rejects your offer.`,
		`A proposes: n=4
n runs 1–9. Worth to you: 63% of your best. Turn 1/3.
A proposes: n=9
n runs 1–9. You cannot accept it. Turn 2/3.
A proposes: n=5
n runs 1–9. Worth to you: 50% of your best. Turn 3/3. The last turn: ACCEPT or no deal.`,
	}
	for seat := range 2 {
		var lines []string
		for _, e := range rt.Log().View(seat) {
			if e.Kind == engine.KindNotification || e.Kind == engine.KindObservation {
				lines = append(lines, e.Text)
			}
		}
		if got := strings.Join(lines, "\n"); got != want[seat] {
			t.Errorf("seat %d reads:\n%s\nwant:\n%s", seat, got, want[seat])
		}
	}
}

func TestAppraiser(t *testing.T) {
	// A buyer's price valuation: utility 1 at 50, 0 at 90, best candidate 45.
	price := Appraiser(PriceValuation(45, 90, 90, 50))
	// A floor above zero, as CaSiNo's walk-away points make it.
	floor := Appraiser(Valuation[int]{Candidates: []int{0, 10}, Utility: func(n int) float64 { return float64(n) / 10 }, Floor: 0.5})
	tests := []struct {
		name, got, want string
	}{
		{"at the best candidate", price(45), "Worth to you: 100% of your best."},
		{"beyond it, capped", price(20), "Worth to you: 100% of your best."},
		{"at the target", price(50), "Worth to you: 89% of your best."},
		{"at the listing", price(90), "Worth to you: no better than no deal."},
		{"above the listing", price(120), "Worth to you: no better than no deal."},
		{"just above the listing, at least 1%", price(89.99), "Worth to you: 1% of your best."},
		{"at the floor", floor(5), "Worth to you: no better than no deal."},
		{"above the floor", floor(6), "Worth to you: 20% of your best."},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestDecodeParams(t *testing.T) {
	tests := []struct {
		in      engine.Params
		wantErr string
	}{
		{engine.Params{"compact": true, "hints": true}, ""},
		{engine.Params{"hints": true}, "hints"},
		{engine.Params{"rounds": 0}, "rounds 0"},
		{engine.Params{"scenario_set": "mine"}, "scenario_set"},
		{engine.Params{"scenario": -2}, "scenario -2"},
	}
	for _, tt := range tests {
		_, err := DecodeParams(tt.in)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%v: got error %v, want one naming %q", tt.in, err, tt.wantErr)
		}
	}
}
