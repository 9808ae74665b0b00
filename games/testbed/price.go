package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// PriceParams: the buyer values the item at Value and offers one of
// Offers; the seller's reservation price is drawn uniformly from
// Reservations and it sells iff the offer is at least the reservation.
// A sale pays the buyer (Value − offer) / Value, no sale 0.
//
// With Shifts each deal first draws a shift s uniformly from it and
// the reservations become Reservations + s, told in the brief: the best
// offer then depends on the deal, as a price game's does on its numbers.
//
// With Scales a deal also draws a scale k uniformly from it and the
// value, offers and reservations are multiplied by k: the same deal in
// other units, its best offer k times as large, written in other digits.
//
// Numeric replaces the menu by a number: any whole offer 0..Value,
// written in digits under a grammar (no Offers list), as the price
// games' offers are.
type PriceParams struct {
	Value        int   `json:"value"`
	Offers       []int `json:"offers,omitempty"`
	Reservations []int `json:"reservations"`
	Shifts       []int `json:"shifts,omitempty"`
	Scales       []int `json:"scales,omitempty"`
	Numeric      bool  `json:"numeric,omitempty"`
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
	case p.Numeric && len(p.Offers) > 0:
		return fmt.Errorf("testbed: a numeric price takes any offer 0..value: want no offers list (got %v)", p.Offers)
	case !p.Numeric && (len(p.Offers) < 2 || len(p.Offers) > 9):
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
	if len(p.Shifts) > 100 || len(p.Scales) > 100 {
		return fmt.Errorf("testbed: price has %d shifts and %d scales: want at most 100 each", len(p.Shifts), len(p.Scales))
	}
	for _, k := range p.Scales {
		if k < 1 || p.Value*k > 100000 {
			return fmt.Errorf("testbed: scale %d: want 1.. with value × scale ≤ 100000 (value %d)", k, p.Value)
		}
	}
	for _, s := range append([]int{0}, p.Shifts...) {
		for _, r := range p.Reservations {
			if r+s < 0 || r+s > p.Value {
				return fmt.Errorf("testbed: reservation %d shifted by %d: want 0..value (%d)", r, s, p.Value)
			}
		}
	}
	return nil
}

// Dealt is the deal whose reservations are shifted by s and then all
// of whose prices are multiplied by k (no Shifts, no Scales).
func (p PriceParams) Dealt(s, k int) PriceParams {
	q := p
	q.Shifts, q.Scales = nil, nil
	q.Value = p.Value * k
	q.Reservations = make([]int, len(p.Reservations))
	for i, r := range p.Reservations {
		q.Reservations[i] = (r + s) * k
	}
	if p.Offers != nil {
		q.Offers = make([]int, len(p.Offers))
		for i, o := range p.Offers {
			q.Offers[i] = o * k
		}
	}
	return q
}

// Candidates are the offers a buyer may make: Offers, or every whole
// number 0..Value when Numeric (so a numeric offer is its own index).
func (p PriceParams) Candidates() []int {
	if !p.Numeric {
		return p.Offers
	}
	c := make([]int, p.Value+1)
	for i := range c {
		c[i] = i
	}
	return c
}

// Moves are the replies, "OFFER n" for each candidate offer.
func (p PriceParams) Moves() []string {
	c := p.Candidates()
	m := make([]string, len(c))
	for i, o := range c {
		m[i] = "OFFER " + strconv.Itoa(o)
	}
	return m
}

// question asks for the offer: a menu of the moves, or for a numeric
// price a number of at most Value's digits under a grammar.
func (p PriceParams) question() engine.Question {
	if !p.Numeric {
		return menu(0, "Your offer?", p.Moves(), p)
	}
	digits := len(strconv.Itoa(p.Value))
	num := `"0" | [1-9]`
	if digits > 1 {
		num = fmt.Sprintf(`"0" | [1-9] [0-9]{0,%d}`, digits-1)
	}
	return engine.Question{
		Seat: 0, Text: fmt.Sprintf("Your offer? Reply OFFER n, n a whole number from 0 to %d.", p.Value), Data: p,
		Grammar: `root ::= "OFFER " (` + num + `)`,
		Default: "OFFER 0",
		Parse: func(text string) (any, error) {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(text)), "OFFER")))
			if err != nil || n < 0 || n > p.Value {
				return 0, fmt.Errorf("reply OFFER n with n a whole number from 0 to %d", p.Value)
			}
			return n, nil
		},
	}
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
	c := p.Candidates()
	e := make([]float64, len(c))
	for i, o := range c {
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

// Price is a price test bed: one buyer makes one offer to a seller whose
// acceptance rule and reservation distribution are known; the price
// games' problem in miniature, with its optimum computed analytically.
// The zero value is testbed_price_v1; PriceDeals and PriceNumber are its
// variants, the same game over other default parameters.
type Price struct{ variant int }

// The price test beds' variants: testbed_deals_v1 (the reservation range
// shifted per deal and told in the brief, so the best offer is a function
// of the deal's numbers) and testbed_number_v1 (the offer written as a
// number, digit by digit under a grammar: the price games' number
// tokenisation in isolation).
var (
	PriceDeals  = Price{variant: 1}
	PriceNumber = Price{variant: 2}
)

var priceBeds = [...]struct {
	id, description string
	defaults        func() PriceParams
}{
	{"testbed_price_v1", "test bed (known optimum): one offer to a seller who sells iff it reaches a uniformly drawn reservation price", DefaultPriceParams},
	{"testbed_deals_v1", "test bed (known optimum): the price test bed with the reservation range shifted per deal and told in the brief; the best offer depends on the deal", DefaultPriceDealsParams},
	{"testbed_number_v1", "test bed (known optimum): the price test bed with the offer written as a number 0..100 under a grammar instead of picked from a menu", DefaultPriceNumberParams},
}

// DefaultParams implements engine.ParamDefaulter.
func (g Price) DefaultParams() engine.Params { return engine.ParamsOf(priceBeds[g.variant].defaults()) }

// ID implements engine.Game.
func (g Price) ID() string { return priceBeds[g.variant].id }

// Description implements engine.Game.
func (g Price) Description() string { return priceBeds[g.variant].description }

// Seats implements engine.Game.
func (g Price) Seats(ep engine.Params) ([]engine.SeatSpec, error) {
	if _, err := g.decode(ep); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: "buyer", Role: "buyer"}}, nil
}

// RewardRange implements engine.Game.
func (Price) RewardRange() (float64, float64) { return 0, 1 }

// decode decodes ep over the variant's defaults.
func (g Price) decode(ep engine.Params) (PriceParams, error) {
	p := priceBeds[g.variant].defaults()
	if err := engine.DecodeParams(ep, &p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// PriceScenario is what the seed dealt: the deal (Params, its
// reservations already shifted) and the seller's reservation price.
type PriceScenario struct {
	Params      PriceParams `json:"params"`
	Shift       int         `json:"shift,omitempty"`
	Scale       int         `json:"scale,omitempty"`
	Reservation int         `json:"reservation"`
}

// NewEpisode implements engine.Game.
func (g Price) NewEpisode(seed uint64, ep engine.Params) (engine.Episode, error) {
	p, err := g.decode(ep)
	if err != nil {
		return nil, err
	}
	return &priceEpisode{sc: dealPrice(seed, p)}, nil
}

// dealPrice draws a deal's shift and scale (when p has Shifts, Scales)
// and then the reservation; without them the draws are those of a fixed
// deal.
func dealPrice(seed uint64, p PriceParams) PriceScenario {
	rng := rand.New(rand.NewPCG(seed, 0x9a1ce))
	sc := PriceScenario{}
	if len(p.Shifts) > 0 {
		sc.Shift = p.Shifts[rng.IntN(len(p.Shifts))]
	}
	k := 1
	if len(p.Scales) > 0 {
		k = p.Scales[rng.IntN(len(p.Scales))]
		sc.Scale = k
	}
	sc.Params = p.Dealt(sc.Shift, k)
	sc.Reservation = sc.Params.Reservations[rng.IntN(len(sc.Params.Reservations))]
	return sc
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
		{Name: "random", Description: "makes a uniformly random offer", New: func(s engine.Seat, seed uint64) engine.Agent {
			rng := rand.New(rand.NewPCG(seed, 0x7e57))
			return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
				var p PriceParams
				if err := engine.DecodeData(t.Notification.Data, &p); err != nil {
					return engine.Action{}, err
				}
				m := p.Moves()
				return engine.Action{NotificationID: t.Notification.ID, Text: m[rng.IntN(len(m))]}, nil
			})
		}},
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
	a, err := rt.Ask(ctx, p.question())
	if err != nil {
		return err
	}
	e.offer = a.Move.(int)
	return nil
}

func (e *priceEpisode) Outcome() engine.Outcome {
	p := e.sc.Params
	offer := p.Candidates()[e.offer]
	r := p.Reward(offer, e.sc.Reservation)
	result := "no_deal"
	if offer >= e.sc.Reservation {
		result = "deal"
	}
	exp := p.Expected()
	best := argmax(exp)
	return engine.Outcome{
		Rewards: []float64{r}, Result: result,
		Terms: map[string]int{"offer": offer, "reservation": e.sc.Reservation},
		// "optimum" is this deal's: with Shifts it varies by deal.
		Metrics: map[string]float64{"optimal": b2f(e.offer == best), "expected": exp[e.offer], "optimum": exp[best]},
	}
}

// DefaultPriceDealsParams: value 10, offers 1..9, reservations uniform on
// {4, 5, 6} shifted by −2, −1, 0 or +1: the best offer is the top of the
// deal's range (4, 5, 6 or 7, worth 0.6, 0.5, 0.4 and 0.3), the
// runner-up earns 69–83% of it.
func DefaultPriceDealsParams() PriceParams {
	return PriceParams{Value: 10, Offers: []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, Reservations: []int{4, 5, 6}, Shifts: []int{-2, -1, 0, 1}}
}

// DefaultPriceNumberParams: value 100, any whole offer 0..100, the
// reservation uniform on 40..60. The best offer is 60, worth 0.4; 58–62
// earn at least 95% of it, a round 50 earns 65%.
func DefaultPriceNumberParams() PriceParams {
	r := make([]int, 21)
	for i := range r {
		r[i] = 40 + i
	}
	return PriceParams{Value: 100, Reservations: r, Numeric: true}
}

// MeanOptimum is the mean over the shifts and scales of each deal's
// optimal expected reward: what a policy that plays every deal's best
// offer earns.
func (p PriceParams) MeanOptimum() float64 {
	shifts, scales := p.Shifts, p.Scales
	if len(shifts) == 0 {
		shifts = []int{0}
	}
	if len(scales) == 0 {
		scales = []int{1}
	}
	sum := 0.0
	for _, s := range shifts {
		for _, k := range scales {
			_, r := p.Dealt(s, k).Optimum()
			sum += r
		}
	}
	return sum / float64(len(shifts)*len(scales))
}
