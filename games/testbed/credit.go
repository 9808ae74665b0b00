package testbed

import (
	"context"
	"fmt"
	"strconv"

	"github.com/omar-selfplay/omar/engine"
)

// CreditParams: the first turn's door i pays Doors[i]; the second turn
// offers Knocks replies that change nothing.
type CreditParams struct {
	Doors  []float64 `json:"doors"`
	Knocks int       `json:"knocks"`
}

// DefaultCreditParams: three doors, the best (1.0) second, and three
// irrelevant knocks.
func DefaultCreditParams() CreditParams {
	return CreditParams{Doors: []float64{0.2, 1, 0.5}, Knocks: 3}
}

// Validate checks p.
func (p CreditParams) Validate() error {
	if len(p.Doors) < 2 || len(p.Doors) > 9 {
		return fmt.Errorf("testbed: credit has %d doors: want 2..9", len(p.Doors))
	}
	if p.Knocks < 1 || p.Knocks > 9 {
		return fmt.Errorf("testbed: credit has %d knocks: want 1..9", p.Knocks)
	}
	return checkUnit("doors", p.Doors)
}

// DoorMoves are the first turn's replies, "DOOR 1" … "DOOR n".
func (p CreditParams) DoorMoves() []string { return numbered("DOOR", len(p.Doors)) }

// KnockMoves are the second turn's replies, "KNOCK 1" … "KNOCK n".
func (p CreditParams) KnockMoves() []string { return numbered("KNOCK", p.Knocks) }

// Optimum is the best door and its reward (every knock is as good).
func (p CreditParams) Optimum() (door int, reward float64) {
	i := argmax(p.Doors)
	return i, p.Doors[i]
}

func numbered(word string, n int) []string {
	m := make([]string, n)
	for i := range m {
		m[i] = word + " " + strconv.Itoa(i+1)
	}
	return m
}

// Credit is testbed_credit_v1: one seat, two turns; only the first
// turn's move decides the reward, so an estimator must credit the first
// turn and leave the second with no systematic signal.
type Credit struct{}

// DefaultParams implements engine.ParamDefaulter.
func (Credit) DefaultParams() engine.Params { return engine.ParamsOf(DefaultCreditParams()) }

// ID implements engine.Game.
func (Credit) ID() string { return "testbed_credit_v1" }

// Description implements engine.Game.
func (Credit) Description() string {
	return "test bed (known optimum): two turns, only the first turn's door decides the reward"
}

// Seats implements engine.Game.
func (Credit) Seats(ep engine.Params) ([]engine.SeatSpec, error) {
	if _, err := decodeCredit(ep); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: "player", Role: "player"}}, nil
}

// RewardRange implements engine.Game.
func (Credit) RewardRange() (float64, float64) { return 0, 1 }

func decodeCredit(ep engine.Params) (CreditParams, error) {
	p := DefaultCreditParams()
	if err := engine.DecodeParams(ep, &p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// NewEpisode implements engine.Game; every episode is the same problem.
func (Credit) NewEpisode(seed uint64, ep engine.Params) (engine.Episode, error) {
	p, err := decodeCredit(ep)
	if err != nil {
		return nil, err
	}
	return &creditEpisode{p: p}, nil
}

// CreditTurn is the Data of a credit notification.
type CreditTurn struct {
	Turn   int          `json:"turn"`
	Params CreditParams `json:"params"`
}

// Policies implements engine.Game: "optimal" opens the best door and
// knocks first.
func (Credit) Policies() []engine.Policy {
	return []engine.Policy{
		fixedPolicy("optimal", "opens the best door, then knocks first", func(t engine.Turn) (string, error) {
			var d CreditTurn
			if err := engine.DecodeData(t.Notification.Data, &d); err != nil {
				return "", err
			}
			if d.Turn == 2 {
				return d.Params.KnockMoves()[0], nil
			}
			door, _ := d.Params.Optimum()
			return d.Params.DoorMoves()[door], nil
		}),
		randomPolicy(),
	}
}

type creditEpisode struct {
	p           CreditParams
	door, knock int
}

func (e *creditEpisode) Seats() []engine.Seat {
	return []engine.Seat{{Index: 0, Name: "player", Role: "player"}}
}

func (e *creditEpisode) Scenario() any { return e.p }

func (e *creditEpisode) Run(ctx context.Context, rt *engine.Runtime) error {
	rt.Brief(0, "Open one door, then knock. Each door pays a fixed reward you are not told; the knock pays nothing.", nil)
	a, err := rt.Ask(ctx, menu(0, "Which door?", e.p.DoorMoves(), CreditTurn{Turn: 1, Params: e.p}))
	if err != nil {
		return err
	}
	e.door = a.Move.(int)
	rt.Broadcast(engine.Only(0), 0, "You opened door "+strconv.Itoa(e.door+1)+".", map[string]int{"door": e.door + 1})
	a, err = rt.Ask(ctx, menu(0, "How do you knock?", e.p.KnockMoves(), CreditTurn{Turn: 2, Params: e.p}))
	if err != nil {
		return err
	}
	e.knock = a.Move.(int)
	return nil
}

func (e *creditEpisode) Outcome() engine.Outcome {
	best, _ := e.p.Optimum()
	return engine.Outcome{
		Rewards: []float64{e.p.Doors[e.door]}, Result: "door_" + strconv.Itoa(e.door+1),
		Terms:   map[string]int{"door": e.door + 1, "knock": e.knock + 1},
		Metrics: map[string]float64{"optimal": b2f(e.door == best)},
	}
}
