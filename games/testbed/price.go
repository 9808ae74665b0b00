package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/omar-selfplay/omar/engine"
)

// PriceParams: the buyer values the item at Value and offers one of
// Offers; the seller's reservation price is drawn uniformly from
// Reservations and it sells iff the offer is at least the reservation.
// A sale pays the buyer (Value − offer) / Value, no sale 0.
type PriceParams struct {
	Value        int   `json:"value"`
	Offers       []int `json:"offers"`
	Reservations []int `json:"reservations"`
}

// DefaultPriceParams: value 10, offers 3..7, reservation uniform on
// {4, 5, 6}. The expected rewards of the offers are 0, 0.2, 0.333, 0.4
// and 0.3: the optimum, 6, is neither the cheapest offer that can sell
// nor the one that always sells, and the runner-up earns 83% of it.
func DefaultPriceParams() PriceParams {
	return PriceParams{Value: 10, Offers: []int{3, 4, 5, 6, 7}, Reservations: []int{4, 5, 6}}
}

// Validate checks p.
func (p PriceParams) Validate() error {
	switch {
	case p.Value < 1 || p.Value > 1000:
		return fmt.Errorf("testbed: price value %d: want 1..1000", p.Value)
	case len(p.Offers) < 2 || len(p.Offers) > 9:
		return fmt.Errorf("testbed: price has %d offers: want 2..9", len(p.Offers))
	case len(p.Reservations) < 1 || len(p.Reservations) > 100:
		return fmt.Errorf("testbed: price has %d reservations: want 1..100", len(p.Reservations))
	}
	for _, o := range p.Offers {
		if o < 0 || o > p.Value {
			return fmt.Errorf("testbed: offer %d: want 0..value (%d)", o, p.Value)
		}
	}
	if s := slices.Clone(p.Offers); len(slices.Compact(slices.Sorted(slices.Values(s)))) != len(p.Offers) {
		return fmt.Errorf("testbed: offers %v repeat a price", p.Offers)
	}
	for _, r := range p.Reservations {
		if r < 0 || r > p.Value {
			return fmt.Errorf("testbed: reservation %d: want 0..value (%d)", r, p.Value)
		}
	}
	return nil
}

// Moves are the replies, "OFFER n" for each offer.
func (p PriceParams) Moves() []string {
	m := make([]string, len(p.Offers))
	for i, o := range p.Offers {
		m[i] = "OFFER " + strconv.Itoa(o)
	}
	return m
}

// Reward is the buyer's reward for offer against reservation.
func (p PriceParams) Reward(offer, reservation int) float64 {
	if offer < reservation {
		return 0
	}
	return float64(p.Value-offer) / float64(p.Value)
}

// Expected is each offer's expected reward over the reservation
// distribution: P(reservation ≤ offer) · (Value − offer) / Value.
func (p PriceParams) Expected() []float64 {
	e := make([]float64, len(p.Offers))
	for i, o := range p.Offers {
		for _, r := range p.Reservations {
			e[i] += p.Reward(o, r)
		}
		e[i] /= float64(len(p.Reservations))
	}
	return e
}

// Optimum is the offer (its index) with the highest expected reward, and
// that reward.
func (p PriceParams) Optimum() (offer int, reward float64) {
	e := p.Expected()
	i := argmax(e)
	return i, e[i]
}

// Price is testbed_price_v1: one buyer makes one offer to a seller whose
// acceptance rule and reservation distribution are known; the price
// games' problem in miniature, with its optimum computed analytically.
type Price struct{}

// DefaultParams implements engine.ParamDefaulter.
func (Price) DefaultParams() engine.Params { return engine.ParamsOf(DefaultPriceParams()) }

// ID implements engine.Game.
func (Price) ID() string { return "testbed_price_v1" }

// Description implements engine.Game.
func (Price) Description() string {
	return "test bed (known optimum): one offer to a seller who sells iff it reaches a uniformly drawn reservation price"
}

// Seats implements engine.Game.
func (Price) Seats(ep engine.Params) ([]engine.SeatSpec, error) {
	if _, err := decodePrice(ep); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: "buyer", Role: "buyer"}}, nil
}

// RewardRange implements engine.Game.
func (Price) RewardRange() (float64, float64) { return 0, 1 }

func decodePrice(ep engine.Params) (PriceParams, error) {
	p := DefaultPriceParams()
	if err := engine.DecodeParams(ep, &p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// PriceScenario is what the seed dealt: the seller's reservation price.
type PriceScenario struct {
	Params      PriceParams `json:"params"`
	Reservation int         `json:"reservation"`
}

// NewEpisode implements engine.Game.
func (Price) NewEpisode(seed uint64, ep engine.Params) (engine.Episode, error) {
	p, err := decodePrice(ep)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x9a1ce))
	return &priceEpisode{sc: PriceScenario{Params: p, Reservation: p.Reservations[rng.IntN(len(p.Reservations))]}}, nil
}

// Policies implements engine.Game: "optimal" makes the offer of highest
// expected reward.
func (Price) Policies() []engine.Policy {
	return []engine.Policy{
		fixedPolicy("optimal", "makes the offer of highest expected reward", func(t engine.Turn) (string, error) {
			var p PriceParams
			if err := engine.DecodeData(t.Notification.Data, &p); err != nil {
				return "", err
			}
			i, _ := p.Optimum()
			return p.Moves()[i], nil
		}),
		randomPolicy(),
	}
}

type priceEpisode struct {
	sc    PriceScenario
	offer int
}

func (e *priceEpisode) Seats() []engine.Seat {
	return []engine.Seat{{Index: 0, Name: "buyer", Role: "buyer"}}
}

func (e *priceEpisode) Scenario() any { return e.sc }

func (e *priceEpisode) Run(ctx context.Context, rt *engine.Runtime) error {
	p := e.sc.Params
	rt.Brief(0, fmt.Sprintf("You are the buyer; the item is worth %d to you. Make one offer. The seller sells iff your offer is at least its secret reservation price, drawn uniformly from %v. "+
		"A sale scores (%d - offer) / %d, no sale 0.", p.Value, p.Reservations, p.Value, p.Value), nil)
	a, err := rt.Ask(ctx, menu(0, "Your offer?", p.Moves(), p))
	if err != nil {
		return err
	}
	e.offer = a.Move.(int)
	return nil
}

func (e *priceEpisode) Outcome() engine.Outcome {
	p := e.sc.Params
	offer := p.Offers[e.offer]
	r := p.Reward(offer, e.sc.Reservation)
	result := "no_deal"
	if offer >= e.sc.Reservation {
		result = "deal"
	}
	best, _ := p.Optimum()
	return engine.Outcome{
		Rewards: []float64{r}, Result: result,
		Terms:   map[string]int{"offer": offer, "reservation": e.sc.Reservation},
		Metrics: map[string]float64{"optimal": b2f(e.offer == best), "expected": p.Expected()[e.offer]},
	}
}
