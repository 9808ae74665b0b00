package negotiation

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/omar-selfplay/omar/engine"
)

// Game is the engine.Game of a two-seat game of the suite over scenarios S
// and terms T. The games differ only in what they deal, brief and score,
// so each game package's Game embeds one and fills the fields; the
// parameters are the suite's Params, with no game-specific ones.
type Game[S, T any] struct {
	// GameID is the versioned environment id (ID).
	GameID string
	// Summary is the one-line Description.
	Summary string
	// Names and Roles are the fixed seats, seat 0 first.
	Names, Roles [2]string
	// Curated returns the game's embedded evaluation scenarios; it is
	// only called for scenario_set "curated".
	Curated func() ([]S, error)
	// Sample deals a fresh scenario, Validate checks either kind.
	Sample   func(*rand.Rand) S
	Validate func(S) error
	// Episode builds the episode of a picked scenario.
	Episode func(S, Params) *Episode[T]
	// Valuation drives the scripted policies.
	Valuation ValuationFunc[T]
	// Restate, for a price game, returns s with every price multiplied
	// by anchor / s's public price and rounded by round (Params.AnchorPrice);
	// nil for a game without prices.
	Restate func(s S, anchor float64, round func(float64) float64) S
}

// ID implements engine.Game.
func (g Game[S, T]) ID() string { return g.GameID }

// Description implements engine.Game.
func (g Game[S, T]) Description() string { return g.Summary }

// Seats implements engine.Game.
func (g Game[S, T]) Seats(p engine.Params) ([]engine.SeatSpec, error) {
	if _, err := DecodeParams(p); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: g.Names[0], Role: g.Roles[0]}, {Name: g.Names[1], Role: g.Roles[1]}}, nil
}

// RewardRange implements engine.Game: every game of the suite pays 0..1.
func (g Game[S, T]) RewardRange() (float64, float64) { return 0, 1 }

// NewEpisode implements engine.Game.
func (g Game[S, T]) NewEpisode(seed uint64, p engine.Params) (engine.Episode, error) {
	q, err := DecodeParams(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.GameID, err)
	}
	var curated []S
	if q.ScenarioSet == "curated" {
		if curated, err = g.Curated(); err != nil {
			return nil, err
		}
	}
	s, err := Pick(q, seed, curated, g.Sample, g.Validate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.GameID, err)
	}
	if q.AnchorPrice > 0 {
		if s, err = g.restate(s, q.AnchorPrice); err != nil {
			return nil, fmt.Errorf("%s: %w", g.GameID, err)
		}
	}
	ep := g.Episode(s, q)
	if ep.values, err = valuations(g.Valuation, ep.SeatList, ep.Briefing); err != nil {
		return nil, fmt.Errorf("%s: %w", g.GameID, err)
	}
	if q.Hints {
		ep.appraise = appraisers(ep.values)
	}
	return ep, nil
}

// restate states s in units of anchor (Params.AnchorPrice): whole units,
// or cents where whole units would break the deal's order (a corridor
// narrower than a unit).
func (g Game[S, T]) restate(s S, anchor float64) (S, error) {
	if g.Restate == nil {
		return s, fmt.Errorf("anchor_price: this game has no prices to restate")
	}
	r := g.Restate(s, anchor, math.Round)
	if g.Validate(r) == nil {
		return r, nil
	}
	r = g.Restate(s, anchor, func(x float64) float64 { return math.Round(x*100) / 100 })
	if err := g.Validate(r); err != nil {
		return s, fmt.Errorf("anchor_price %v: the restated deal is invalid: %w", anchor, err)
	}
	return r, nil
}

// DefaultParams implements engine.ParamDefaulter: the suite's Params.
func (g Game[S, T]) DefaultParams() engine.Params { return engine.ParamsOf(DefaultParams()) }

// Policies implements engine.Game: strategic (default), naive, random.
func (g Game[S, T]) Policies() []engine.Policy { return Policies(g.Valuation) }

// DecodeParams reads and checks the suite's parameters over the defaults.
func DecodeParams(p engine.Params) (Params, error) {
	q := DefaultParams()
	if err := engine.DecodeParams(p, &q); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// TwoSeats are the seats of an episode with the given names and roles.
func TwoSeats(names, roles [2]string) []engine.Seat {
	return []engine.Seat{{Index: 0, Name: names[0], Role: roles[0]}, {Index: 1, Name: names[1], Role: roles[1]}}
}
