package werewolf

import (
	"math/rand/v2"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
)

// ID is the versioned environment id.
const ID = "werewolf_v1"

// Game is the Werewolf environment definition.
type Game struct{}

// New returns the Werewolf game.
func New() *Game { return &Game{} }

// DefaultParams implements engine.ParamDefaulter: Defaults with the
// players they resolve to (roles are dealt from players, witch and guard).
func (*Game) DefaultParams() engine.Params {
	p := engine.ParamsOf(Defaults())
	p["players"], p["witch"], p["guard"] = 7, false, false
	return p
}

// ID implements engine.Game.
func (*Game) ID() string { return ID }

// Description implements engine.Game.
func (*Game) Description() string {
	return "Werewolf: hidden roles (werewolves, seer, doctor, optional witch and guard, villagers), a werewolf-only night channel, simultaneous night choices and day votes; team win ±1 discounted for early elimination"
}

// Seats implements engine.Game. Roles are dealt per episode, so the specs
// carry names only.
func (*Game) Seats(p engine.Params) ([]engine.SeatSpec, error) {
	params, err := DecodeParams(p)
	if err != nil {
		return nil, err
	}
	specs := make([]engine.SeatSpec, params.Players)
	for i := range specs {
		specs[i] = engine.SeatSpec{Name: SeatName(i)}
	}
	return specs, nil
}

// RewardRange implements engine.Game: team ±1, discounted toward 0, with
// shaping clipped into the same range.
func (*Game) RewardRange() (lo, hi float64) { return -1, 1 }

// NewEpisode implements engine.Game: it validates p and deals the roles
// from seed.
func (*Game) NewEpisode(seed uint64, p engine.Params) (engine.Episode, error) {
	params, err := DecodeParams(p)
	if err != nil {
		return nil, err
	}
	var deck []string
	for _, r := range roleOrder {
		for range params.Roles[r] {
			deck = append(deck, r)
		}
	}
	rng := rand.New(rand.NewPCG(seeds.Derive(seed, 1), 0x77657265776f6c66))
	rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
	return newEpisode(params, deck), nil
}

// Policies implements engine.Game: the heuristic policy (default) and
// uniformly random legal play.
func (*Game) Policies() []engine.Policy {
	return []engine.Policy{
		{
			Name:        "heuristic",
			Description: "the seer reveals found werewolves; villagers vote on seer claims and accusations; werewolves coordinate kills on the team channel, accuse villagers and counter-claim the seer when exposed",
			New:         func(s engine.Seat, seed uint64) engine.Agent { return newHeuristic(s, seed) },
		},
		{
			Name:        "random",
			Description: "uniformly random legal moves; speeches pass or accuse a random player",
			New:         func(s engine.Seat, seed uint64) engine.Agent { return newRandom(s, seed) },
		},
	}
}
