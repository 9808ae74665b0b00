package testbed

import (
	"context"
	"fmt"
	"strconv"

	"github.com/omar-selfplay/omar/engine"
)

// BanditParams are the arms' rewards: choosing arm i pays Arms[i].
type BanditParams struct {
	Arms []float64 `json:"arms"`
}

// DefaultBanditParams: four arms, the best (1.0) third, so that a model
// biased towards the first or last reply does not start at the optimum.
func DefaultBanditParams() BanditParams { return BanditParams{Arms: []float64{0.3, 0.1, 1, 0.6}} }

// Validate checks p.
func (p BanditParams) Validate() error {
	if len(p.Arms) < 2 || len(p.Arms) > 9 {
		return fmt.Errorf("testbed: bandit has %d arms: want 2..9", len(p.Arms))
	}
	return checkUnit("arms", p.Arms)
}

// Moves are the replies: "ARM 1" … "ARM n".
func (p BanditParams) Moves() []string {
	m := make([]string, len(p.Arms))
	for i := range m {
		m[i] = "ARM " + strconv.Itoa(i+1)
	}
	return m
}

// Optimum is the best arm's index and reward: the most any policy earns.
func (p BanditParams) Optimum() (arm int, reward float64) {
	i := argmax(p.Arms)
	return i, p.Arms[i]
}

// Bandit is testbed_bandit_v1: one seat, one turn, a choice among a few
// arms whose rewards are fixed and known.
type Bandit struct{}

// DefaultParams implements engine.ParamDefaulter.
func (Bandit) DefaultParams() engine.Params { return engine.ParamsOf(DefaultBanditParams()) }

// ID implements engine.Game.
func (Bandit) ID() string { return "testbed_bandit_v1" }

// Description implements engine.Game.
func (Bandit) Description() string {
	return "test bed (known optimum): one turn, pick one of a few arms with fixed rewards"
}

// Seats implements engine.Game.
func (Bandit) Seats(ep engine.Params) ([]engine.SeatSpec, error) {
	if _, err := decodeBandit(ep); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: "player", Role: "player"}}, nil
}

// RewardRange implements engine.Game.
func (Bandit) RewardRange() (float64, float64) { return 0, 1 }

func decodeBandit(ep engine.Params) (BanditParams, error) {
	p := DefaultBanditParams()
	if err := engine.DecodeParams(ep, &p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// NewEpisode implements engine.Game. The bandit deals nothing: every
// episode is the same problem.
func (Bandit) NewEpisode(seed uint64, ep engine.Params) (engine.Episode, error) {
	p, err := decodeBandit(ep)
	if err != nil {
		return nil, err
	}
	return &banditEpisode{p: p}, nil
}

// Policies implements engine.Game: "optimal" pulls the best arm.
func (Bandit) Policies() []engine.Policy {
	return []engine.Policy{
		fixedPolicy("optimal", "pulls the best arm", func(t engine.Turn) (string, error) {
			var p BanditParams
			if err := engine.DecodeData(t.Notification.Data, &p); err != nil {
				return "", err
			}
			arm, _ := p.Optimum()
			return p.Moves()[arm], nil
		}),
		randomPolicy(),
	}
}

type banditEpisode struct {
	p   BanditParams
	arm int
}

func (e *banditEpisode) Seats() []engine.Seat {
	return []engine.Seat{{Index: 0, Name: "player", Role: "player"}}
}

func (e *banditEpisode) Scenario() any { return e.p }

func (e *banditEpisode) Run(ctx context.Context, rt *engine.Runtime) error {
	rt.Brief(0, "Pick one arm. Each arm pays a fixed reward you are not told; pick the one that pays most.", nil)
	// The notification's data carries the parameters for the scripted
	// "optimal" policy (the oracle the tests compare with); a model seat
	// is shown only the text and the legal replies.
	a, err := rt.Ask(ctx, menu(0, "Your arm?", e.p.Moves(), e.p))
	if err != nil {
		return err
	}
	e.arm = a.Move.(int)
	return nil
}

func (e *banditEpisode) Outcome() engine.Outcome {
	best, _ := e.p.Optimum()
	return engine.Outcome{
		Rewards: []float64{e.p.Arms[e.arm]}, Result: "arm_" + strconv.Itoa(e.arm+1),
		Terms:   map[string]int{"arm": e.arm + 1},
		Metrics: map[string]float64{"optimal": b2f(e.arm == best)},
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
