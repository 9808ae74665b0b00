// Package sealedbid is a small sealed-bid auction: every round each bidder
// privately values one item and all bid at once. It is the engine's own
// test of simultaneous moves and a minimal example of an environment.
package sealedbid

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Params of the auction.
type Params struct {
	Bidders int `json:"bidders"`
	Rounds  int `json:"rounds"`
	// Pricing is "first" (the winner pays its bid) or "second" (the winner
	// pays the second-highest bid).
	Pricing string `json:"pricing"`
	// MaxValue bounds values and bids (1..MaxValueLimit).
	MaxValue int `json:"max_value"`
}

// MaxValueLimit is the largest MaxValue: a bid of ten digits is already
// more than a model's reply needs, and with it every value, price, sum of
// surpluses over 100 rounds of 16 bidders and equilibrium bid stays far
// inside int64 (and exact in float64), so no reward can wrap around.
const MaxValueLimit = 1_000_000_000

// DefaultParams: three bidders, three rounds, first price, values 0..100.
func DefaultParams() Params { return Params{Bidders: 3, Rounds: 3, Pricing: "first", MaxValue: 100} }

// Validate checks p.
func (p Params) Validate() error {
	switch {
	case p.Bidders < 2 || p.Bidders > 16:
		return fmt.Errorf("sealedbid: bidders %d not in 2..16", p.Bidders)
	case p.Rounds < 1 || p.Rounds > 100:
		return fmt.Errorf("sealedbid: rounds %d not in 1..100", p.Rounds)
	case p.Pricing != "first" && p.Pricing != "second":
		return fmt.Errorf("sealedbid: pricing %q is neither first nor second", p.Pricing)
	case p.MaxValue < 1 || p.MaxValue > MaxValueLimit:
		return fmt.Errorf("sealedbid: max_value %d not in 1..%d", p.MaxValue, MaxValueLimit)
	}
	return nil
}

func parseParams(ep engine.Params) (Params, error) {
	p := DefaultParams()
	if err := engine.DecodeParams(ep, &p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// Game is the sealed-bid auction.
type Game struct{}

// New returns the game.
func New() Game { return Game{} }

// DefaultParams implements engine.ParamDefaulter.
func (Game) DefaultParams() engine.Params { return engine.ParamsOf(DefaultParams()) }

// ID implements engine.Game.
func (Game) ID() string { return "sealedbid_v1" }

// Description implements engine.Game.
func (Game) Description() string {
	return "sealed-bid auction: bidders value an item privately and bid at once each round"
}

// Seats implements engine.Game.
func (Game) Seats(ep engine.Params) ([]engine.SeatSpec, error) {
	p, err := parseParams(ep)
	if err != nil {
		return nil, err
	}
	seats := make([]engine.SeatSpec, p.Bidders)
	for i := range seats {
		seats[i] = engine.SeatSpec{Name: "bidder" + strconv.Itoa(i+1), Role: "bidder"}
	}
	return seats, nil
}

// RewardRange implements engine.Game: the mean surplus per round over
// MaxValue, negative when a bidder overpays.
func (Game) RewardRange() (float64, float64) { return -1, 1 }

// Scenario is what the seed dealt: each bidder's value per round.
type Scenario struct {
	Params Params  `json:"params"`
	Values [][]int `json:"values"` // [round][bidder]
	// TieBreak[r] orders bidders for ties in round r (first wins).
	TieBreak [][]int `json:"tie_break"`
}

// Round is the public result of one round (the Data of its observation).
type Round struct {
	Round  int   `json:"round"`
	Winner int   `json:"winner"`
	Price  int   `json:"price"`
	Bids   []int `json:"bids"`
}

// NewEpisode implements engine.Game.
func (Game) NewEpisode(seed uint64, ep engine.Params) (engine.Episode, error) {
	p, err := parseParams(ep)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ea1ed))
	sc := Scenario{Params: p}
	for range p.Rounds {
		vals := make([]int, p.Bidders)
		for i := range vals {
			vals[i] = rng.IntN(p.MaxValue + 1)
		}
		sc.Values = append(sc.Values, vals)
		sc.TieBreak = append(sc.TieBreak, rng.Perm(p.Bidders))
	}
	return &episode{sc: sc}, nil
}

type episode struct {
	sc Scenario
	// surplus per bidder, summed in float64 so that it cannot overflow
	// whatever the parameters (value − price of one round is exact).
	surplus []float64
	rounds  []Round
}

func (e *episode) Seats() []engine.Seat {
	s := make([]engine.Seat, e.sc.Params.Bidders)
	for i := range s {
		s[i] = engine.Seat{Index: i, Name: "bidder" + strconv.Itoa(i+1), Role: "bidder"}
	}
	return s
}

func (e *episode) Scenario() any { return e.sc }

// ValueData is the private Data of a valuation observation.
type ValueData struct {
	Round int `json:"round"`
	Value int `json:"value"`
}

// BidRequest is the Data of a bid notification: what a bidder knows.
type BidRequest struct {
	ValueData
	Bidders  int    `json:"bidders"`
	Pricing  string `json:"pricing"`
	MaxValue int    `json:"max_value"`
}

// ParseBid parses "BID n" (case-insensitive, surrounding space allowed).
func ParseBid(text string, maxValue int) (int, error) {
	f := strings.Fields(text)
	if len(f) != 2 || !strings.EqualFold(f[0], "BID") {
		return 0, fmt.Errorf("reply with exactly `BID <amount>`, e.g. `BID 42`")
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 0 || n > maxValue {
		return 0, fmt.Errorf("the amount must be a whole number from 0 to %d", maxValue)
	}
	return n, nil
}

// Grammar is the GBNF of a bid from 0 to maxValue: the grammar admits
// exactly the bids the parser accepts, so constrained decoding never
// produces an invalid one.
func Grammar(maxValue int) string {
	alts := []string{}
	for _, pat := range rangePatterns(maxValue) {
		alts = append(alts, strings.Join(pat, " "))
	}
	return `root ::= "BID " (` + strings.Join(alts, " | ") + `)`
}

// rangePatterns returns digit patterns (one GBNF item per digit: a literal
// "d" or a class [a-b]) that together match the decimal numbers 0..max
// without leading zeros.
func rangePatterns(max int) [][]string {
	digits := strconv.Itoa(max)
	pats := [][]string{{"[0-9]"}} // one digit; narrowed below when max < 9
	if max < 9 {
		pats[0] = []string{fmt.Sprintf("[0-%d]", max)}
		return pats
	}
	// Every length shorter than max's: a nonzero lead then free digits.
	for n := 2; n < len(digits); n++ {
		pats = append(pats, append([]string{"[1-9]"}, repeat("[0-9]", n-1)...))
	}
	if len(digits) == 1 {
		return pats
	}
	// Same length as max: walk its digits; at each position take a
	// smaller digit (then anything) or the same digit and go on.
	for i := 0; i < len(digits); i++ {
		d := int(digits[i] - '0')
		lo := 0
		if i == 0 {
			lo = 1
		}
		prefix := []string{}
		for _, c := range digits[:i] {
			prefix = append(prefix, `"`+string(c)+`"`)
		}
		if d-1 >= lo {
			p := append(prefix, fmt.Sprintf("[%d-%d]", lo, d-1))
			pats = append(pats, append(p, repeat("[0-9]", len(digits)-i-1)...))
		}
	}
	full := []string{}
	for _, c := range digits {
		full = append(full, `"`+string(c)+`"`)
	}
	return append(pats, full)
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func (e *episode) Run(ctx context.Context, rt *engine.Runtime) error {
	p := e.sc.Params
	e.surplus = make([]float64, p.Bidders)
	for i := range p.Bidders {
		pays := map[string]string{"first": "its own bid", "second": "the second-highest bid"}[p.Pricing]
		rt.Brief(i, fmt.Sprintf("You are bidder %d of %d in a %s-price sealed-bid auction (%d round(s)). "+
			"Each round you learn your private value of the item (0..%d); all bidders bid at once. "+
			"The highest bid wins and pays %s; your score is your value minus the price when you win. "+
			"Reply `BID <amount>`.", i+1, p.Bidders, p.Pricing, p.Rounds, p.MaxValue, pays), nil)
	}
	for r := range p.Rounds {
		rt.Phase(fmt.Sprintf("Round %d of %d.", r+1, p.Rounds), map[string]int{"round": r + 1})
		qs := make([]engine.Question, p.Bidders)
		for i := range qs {
			v := e.sc.Values[r][i]
			rt.Broadcast(engine.Only(i), i, fmt.Sprintf("Your value for this round's item is %d.", v), ValueData{Round: r + 1, Value: v})
			qs[i] = engine.Question{
				Seat: i, Text: "Your sealed bid?", Grammar: Grammar(p.MaxValue), Default: "BID 0",
				Data:  BidRequest{ValueData: ValueData{Round: r + 1, Value: v}, Bidders: p.Bidders, Pricing: p.Pricing, MaxValue: p.MaxValue},
				Parse: func(text string) (any, error) { return ParseBid(text, p.MaxValue) },
			}
		}
		ans, err := rt.AskAll(ctx, qs)
		if err != nil {
			return err
		}
		bids := make([]int, p.Bidders)
		for i, a := range ans {
			bids[i] = a.Move.(int)
		}
		res := settle(bids, e.sc.TieBreak[r], p.Pricing)
		res.Round = r + 1
		e.win(res.Winner, e.sc.Values[r][res.Winner], res.Price)
		e.rounds = append(e.rounds, res)
		rt.Broadcast(engine.Everyone(), res.Winner, fmt.Sprintf("Round %d: bids %v; bidder %d wins and pays %d.", r+1, bids, res.Winner+1, res.Price), res)
	}
	return nil
}

// win credits the round's winner with its value less the price. Both are
// in 0..MaxValue, so the difference cannot overflow.
func (e *episode) win(seat, value, price int) {
	e.surplus[seat] += float64(value - price)
}

// settle picks the winner (highest bid, ties by order) and the price.
func settle(bids, order []int, pricing string) Round {
	winner := order[0]
	for _, i := range order {
		if bids[i] > bids[winner] {
			winner = i
		}
	}
	price := bids[winner]
	if pricing == "second" {
		price = 0
		for i, b := range bids {
			if i != winner && b > price {
				price = b
			}
		}
	}
	return Round{Winner: winner, Price: price, Bids: bids}
}

func (e *episode) Outcome() engine.Outcome {
	p := e.sc.Params
	o := engine.Outcome{Result: "settled", Rewards: make([]float64, p.Bidders), Terms: e.rounds, Metrics: map[string]float64{}}
	wins := 0.0
	for i, s := range e.surplus {
		o.Rewards[i] = s / (float64(p.MaxValue) * float64(p.Rounds))
	}
	for r, res := range e.rounds {
		best := 0
		for i, v := range e.sc.Values[r] {
			if v > e.sc.Values[r][best] {
				best = i
			}
		}
		if e.sc.Values[r][res.Winner] == e.sc.Values[r][best] {
			wins++
		}
	}
	o.Metrics["efficiency"] = wins / float64(len(e.rounds))
	return o
}

// Policies implements engine.Game: "shading" bids the equilibrium
// (value·(n−1)/n under first price, the value under second price);
// "random" bids uniformly.
func (Game) Policies() []engine.Policy {
	return []engine.Policy{
		{Name: "shading", Description: "bids the risk-neutral equilibrium of the pricing rule", New: func(s engine.Seat, seed uint64) engine.Agent {
			return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
				var req BidRequest
				if err := engine.DecodeData(t.Notification.Data, &req); err != nil {
					return engine.Action{}, err
				}
				bid := req.Value
				if req.Pricing == "first" && req.Bidders > 1 {
					bid = shade(req.Value, req.Bidders)
				}
				return engine.Action{NotificationID: t.Notification.ID, Text: "BID " + strconv.Itoa(bid)}, nil
			})
		}},
		{Name: "random", Description: "bids uniformly at random up to the maximum value", New: func(s engine.Seat, seed uint64) engine.Agent {
			rng := rand.New(rand.NewPCG(seed, 1))
			return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
				var req BidRequest
				if err := engine.DecodeData(t.Notification.Data, &req); err != nil {
					return engine.Action{}, err
				}
				if req.MaxValue < 0 || req.MaxValue > MaxValueLimit {
					return engine.Action{}, fmt.Errorf("sealedbid: max_value %d not in 0..%d", req.MaxValue, MaxValueLimit)
				}
				return engine.Action{NotificationID: t.Notification.ID, Text: "BID " + strconv.Itoa(rng.IntN(req.MaxValue+1))}, nil
			})
		}},
	}
}

// shade is floor(value·(n−1)/n) without forming value·(n−1), which could
// overflow for a value read from a notification.
func shade(value, n int) int {
	q, r := value/n, value%n
	return q*(n-1) + r*(n-1)/n
}
