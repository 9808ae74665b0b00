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
				res, err := Play(context.Background(), rt, numberRules{}, Options{Rounds: tt.rounds, Compact: compact}, 0)
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
// phases, no echo of its own move, one short line per turn.
func TestPlayCompact(t *testing.T) {
	seats := []engine.Seat{{Index: 0, Name: "A"}, {Index: 1, Name: "B"}}
	a := script("PROPOSE: n=4", "SAY: well?", "PROPOSE: n=5")
	b := script("SAY: hmm", "REJECT", "PROPOSE: n=9")
	rt, err := engine.NewRuntime(seats, []engine.Agent{a, b}, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Play(context.Background(), rt, numberRules{}, Options{Rounds: 3, Compact: true}, 0); err != nil {
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
