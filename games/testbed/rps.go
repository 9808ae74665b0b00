package testbed

import (
	"context"

	"github.com/omar-selfplay/omar/engine"
)

// RPSMoves are rock–paper–scissors' replies; move i beats move (i+2)%3.
var RPSMoves = []string{"ROCK", "PAPER", "SCISSORS"}

// RPSPayoff is the row player's reward for moves a against b: 1 for a
// win, −1 for a loss, 0 for a tie.
func RPSPayoff(a, b int) float64 {
	switch (a - b + 3) % 3 {
	case 1:
		return 1
	case 2:
		return -1
	}
	return 0
}

// Exploitability is what a best response earns against a player whose
// moves follow p (probabilities of ROCK, PAPER, SCISSORS, summing to 1):
// max over a of Σ_b p(b)·RPSPayoff(a, b). It is 0 exactly at the
// equilibrium (uniform play) and 1 against a pure strategy.
func Exploitability(p [3]float64) float64 {
	best := -1.0
	for a := range 3 {
		v := 0.0
		for b := range 3 {
			v += p[b] * RPSPayoff(a, b)
		}
		best = max(best, v)
	}
	return best
}

// RPS is testbed_rps_v1: one round of rock–paper–scissors, both seats
// moving at once. Zero-sum and symmetric: played by one model in both
// seats, self-play should stay near the uniform equilibrium (value 0)
// rather than collapse onto a move a best response would exploit.
type RPS struct{}

// ID implements engine.Game.
func (RPS) ID() string { return "testbed_rps_v1" }

// Description implements engine.Game.
func (RPS) Description() string {
	return "test bed (known equilibrium): one round of rock-paper-scissors, zero-sum, both seats at once"
}

// Seats implements engine.Game.
func (RPS) Seats(ep engine.Params) ([]engine.SeatSpec, error) {
	if err := decodeRPS(ep); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: "first", Role: "player"}, {Name: "second", Role: "player"}}, nil
}

// RewardRange implements engine.Game.
func (RPS) RewardRange() (float64, float64) { return -1, 1 }

// decodeRPS accepts no parameters (unknown keys are errors).
func decodeRPS(ep engine.Params) error {
	var p struct{}
	return engine.DecodeParams(ep, &p)
}

// NewEpisode implements engine.Game.
func (RPS) NewEpisode(seed uint64, ep engine.Params) (engine.Episode, error) {
	if err := decodeRPS(ep); err != nil {
		return nil, err
	}
	return &rpsEpisode{}, nil
}

// Policies implements engine.Game: "random" is the equilibrium itself;
// "rock" always plays ROCK (the collapse self-play must avoid).
func (RPS) Policies() []engine.Policy {
	return []engine.Policy{
		randomPolicy(),
		fixedPolicy("rock", "always plays ROCK", func(engine.Turn) (string, error) { return RPSMoves[0], nil }),
	}
}

type rpsEpisode struct {
	moves [2]int
}

func (e *rpsEpisode) Seats() []engine.Seat {
	return []engine.Seat{{Index: 0, Name: "first", Role: "player"}, {Index: 1, Name: "second", Role: "player"}}
}

func (e *rpsEpisode) Scenario() any { return map[string]string{"game": "rock-paper-scissors"} }

func (e *rpsEpisode) Run(ctx context.Context, rt *engine.Runtime) error {
	for i := range 2 {
		rt.Brief(i, "Rock-paper-scissors, one round, both players move at once. Rock beats scissors, scissors beats paper, paper beats rock. A win scores 1, a loss -1, a tie 0.", nil)
	}
	ans, err := rt.AskAll(ctx, []engine.Question{
		menu(0, "Your move?", RPSMoves, nil),
		menu(1, "Your move?", RPSMoves, nil),
	})
	if err != nil {
		return err
	}
	e.moves = [2]int{ans[0].Move.(int), ans[1].Move.(int)}
	rt.Broadcast(engine.Everyone(), -1, "Moves: "+RPSMoves[e.moves[0]]+" against "+RPSMoves[e.moves[1]]+".", map[string]string{"first": RPSMoves[e.moves[0]], "second": RPSMoves[e.moves[1]]})
	return nil
}

func (e *rpsEpisode) Outcome() engine.Outcome {
	r := RPSPayoff(e.moves[0], e.moves[1])
	result := "draw"
	switch {
	case r > 0:
		result = "first"
	case r < 0:
		result = "second"
	}
	// The metrics count each move over both seats: summed over an
	// iteration's episodes they are the policy's empirical move
	// distribution, whose exploitability the benchmark reports.
	m := map[string]float64{"rock": 0, "paper": 0, "scissors": 0}
	for _, mv := range e.moves {
		m[[]string{"rock", "paper", "scissors"}[mv]]++
	}
	return engine.Outcome{
		Rewards: []float64{r, -r}, Result: result,
		Terms:   map[string]string{"first": RPSMoves[e.moves[0]], "second": RPSMoves[e.moves[1]]},
		Metrics: m,
	}
}
