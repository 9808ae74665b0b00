// Package testbed holds the known-optimum environments: tiny games whose
// best play and its value are computed exactly in code, so that a
// training run can be scored as a fraction of the optimum. They are
// instruments for checking the reinforcement-learning machinery (does a
// reward reach the gradient with the right sign, is credit assigned to
// the turn that earned it, does self-play stay at a mixed equilibrium),
// not games for users; docs/learning.md describes them and the benchmark
// that trains on them.
//
// Every move is one of a short menu of structured replies: the
// notification lists them (Legal) and its grammar admits exactly them, so
// a model under constrained decoding always makes a legal move and the
// only thing learnt is which.
package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Games returns the test beds, in catalogue order.
func Games() []engine.Game {
	return []engine.Game{Bandit{}, Credit{}, Price{}, PriceDeals, PriceNumber, RPS{}}
}

// menu is a question whose legal replies are exactly moves.
func menu(seat int, text string, moves []string, data any) engine.Question {
	alts := make([]string, len(moves))
	for i, m := range moves {
		alts[i] = fmt.Sprintf("%q", m)
	}
	return engine.Question{
		Seat: seat, Text: text, Legal: slices.Clone(moves), Data: data,
		Grammar: "root ::= " + strings.Join(alts, " | "),
		Default: moves[0],
		Parse:   func(text string) (any, error) { return parseMove(text, moves) },
	}
}

// parseMove returns the index of the move text names (case and
// surrounding space ignored).
func parseMove(text string, moves []string) (int, error) {
	s := strings.TrimSpace(text)
	for i, m := range moves {
		if strings.EqualFold(s, m) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("reply with exactly one of: %s", strings.Join(moves, " | "))
}

// argmax returns the index of the largest value (the first on ties).
func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// randomPolicy plays a uniformly random legal reply.
func randomPolicy() engine.Policy {
	return engine.Policy{Name: "random", Description: "plays a uniformly random legal reply", New: func(s engine.Seat, seed uint64) engine.Agent {
		rng := rand.New(rand.NewPCG(seed, 0x7e57))
		return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
			legal := t.Notification.Legal
			if len(legal) == 0 {
				return engine.Action{}, fmt.Errorf("testbed: notification %s lists no legal reply", t.Notification.ID)
			}
			return engine.Action{NotificationID: t.Notification.ID, Text: legal[rng.IntN(len(legal))]}, nil
		})
	}}
}

// fixedPolicy answers every notification with pick(turn).
func fixedPolicy(name, desc string, pick func(t engine.Turn) (string, error)) engine.Policy {
	return engine.Policy{Name: name, Description: desc, New: func(s engine.Seat, seed uint64) engine.Agent {
		return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
			text, err := pick(t)
			if err != nil {
				return engine.Action{}, err
			}
			return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
		})
	}}
}

// checkUnit reports the first value outside [0, 1] (the test beds'
// reward range).
func checkUnit(name string, v []float64) error {
	for i, x := range v {
		if !(x >= 0 && x <= 1) {
			return fmt.Errorf("testbed: %s[%d] = %v: want a number in [0, 1]", name, i, x)
		}
	}
	return nil
}
