package negotiation

import (
	"context"
	"fmt"

	"github.com/omar-selfplay/omar/engine"
)

// Briefing is one seat's private instructions and the private information a
// scripted agent reads from them.
type Briefing struct {
	Text string
	Data any
}

// Episode is a two-seat bargaining episode over terms T: the games build
// one per NewEpisode and supply the scoring.
type Episode[T any] struct {
	SeatList []engine.Seat
	// Dealt is the scenario with its private fields (Episode.Scenario).
	Dealt    any
	Rules    Rules[T]
	Options  Options
	First    int
	Briefing [2]Briefing
	// Score turns the loop's result into the outcome.
	Score func(Result[T]) engine.Outcome
	// Given are numbers each seat may write without having read them:
	// what the game's rules imply (the quantities a pool allows, the
	// hours of a day). The fabricated-claims metric takes them as facts.
	Given [2][]float64
	// values are the seats' own valuations and appraise is Play's
	// (Params.Hints); Game.NewEpisode sets them.
	values   [2]Valuation[T]
	appraise func(seat int, t T) string
	out      engine.Outcome
}

// Seats implements engine.Episode.
func (e *Episode[T]) Seats() []engine.Seat { return e.SeatList }

// Scenario implements engine.Episode.
func (e *Episode[T]) Scenario() any { return e.Dealt }

// Run briefs both seats and plays the loop.
func (e *Episode[T]) Run(ctx context.Context, rt *engine.Runtime) error {
	for i, b := range e.Briefing {
		rt.Brief(i, b.Text, b.Data)
	}
	res, err := Play(ctx, rt, e.Rules, e.Options, e.First, e.appraise)
	if err != nil {
		return err
	}
	for seat, ts := range res.Offered {
		if v := e.values[seat]; v.Utility != nil {
			for _, t := range ts {
				if v.NoBetterThanNoDeal(t) {
					res.BelowFloor[seat]++
				}
			}
		}
	}
	res.Fabricated, res.ClaimsRead = Fabrications[T](rt.Log().All(), e.Given), true
	e.out = e.Score(res)
	return nil
}

// Outcome implements engine.Episode.
func (e *Episode[T]) Outcome() engine.Outcome { return e.out }

// Report holds the per-seat numbers of an episode's metrics.
type Report struct {
	Roles   [2]string
	Utility [2]float64
	Reward  [2]float64
	// Disclosed is 1 (or a fraction) when a seat's messages stated its
	// private numbers; negative when the seat has none to state.
	Disclosed [2]float64
	// Opening is each seat's first proposal relative to its target (see
	// each game's doc); only set where HasOpening.
	Opening    [2]float64
	HasOpening [2]bool
	// Offers are the values of each seat's proposals in order, in the
	// game's terms (each game's score says which): the concession curve.
	Offers [2][]float64
	// Extra are game-specific metrics, added as they are.
	Extra map[string]float64
}

// CurveLen is how many proposals of a seat the offer_<k>_ metrics follow.
const CurveLen = 4

// MaxOpening caps the opening_ metric. A price game's opening is a ratio
// to a target, unbounded above: one buyer opening at $999,999,999 against
// a $537 target (1,862,249) would swamp a mean over thousands of
// episodes. Ten times the target is absurd already (a Marketplace seller
// opening at 1.7× its minimum is ordinary); beyond that the number
// carries no more information.
const MaxOpening = 10

// Metrics flattens a result and report into Outcome.Metrics:
// agreement, walk_away, no_deal, rounds, turns and, per role,
// utility_, reward_, disclosure_, opening_ (when it proposed; in
// [0, MaxOpening]), walked_,
// proposals_, below_floor_, invalid_ and defaulted_; offer_1_ …
// offer_4_ (the first CurveLen proposals' values, those it made),
// commitment_ and fabricated_ (shares of its messages, when it wrote
// any); and rep.Extra.
func Metrics[T any](res Result[T], rep Report) map[string]float64 {
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	m := map[string]float64{
		"agreement": b(res.Status == StatusDeal),
		"walk_away": b(res.Status == StatusWalk),
		"no_deal":   b(res.Status == StatusNoDeal),
		"rounds":    float64(res.Rounds),
		"turns":     float64(res.Turns),
	}
	for i, role := range rep.Roles {
		m["utility_"+role] = rep.Utility[i]
		m["reward_"+role] = rep.Reward[i]
		if rep.Disclosed[i] >= 0 {
			m["disclosure_"+role] = rep.Disclosed[i]
		}
		if rep.HasOpening[i] {
			m["opening_"+role] = min(max(rep.Opening[i], 0), MaxOpening)
		}
		m["walked_"+role] = b(res.Walker == i)
		m["proposals_"+role] = float64(res.Proposals[i])
		m["below_floor_"+role] = float64(res.BelowFloor[i])
		m["invalid_"+role] = float64(res.Invalid[i])
		m["defaulted_"+role] = float64(res.Defaulted[i])
		for k, v := range rep.Offers[i][:min(len(rep.Offers[i]), CurveLen)] {
			m[fmt.Sprintf("offer_%d_%s", k+1, role)] = v
		}
		if r, ok := CommitmentRate(res.Said[i]); ok {
			m["commitment_"+role] = r
		}
		if n := len(res.Said[i]); res.ClaimsRead && n > 0 {
			m["fabricated_"+role] = float64(res.Fabricated[i]) / float64(n)
		}
	}
	for k, v := range rep.Extra {
		m[k] = v
	}
	return m
}

// Outcome assembles an engine outcome.
func Outcome[T any](res Result[T], rep Report, terms any) engine.Outcome {
	return engine.Outcome{
		Rewards: []float64{rep.Reward[0], rep.Reward[1]},
		Result:  string(res.Status),
		Terms:   terms,
		Metrics: Metrics(res, rep),
	}
}

// Curve is the values of proposals in order (Report.Offers).
func Curve[T any](offered []T, value func(T) float64) []float64 {
	out := make([]float64, len(offered))
	for i, t := range offered {
		out[i] = value(t)
	}
	return out
}
