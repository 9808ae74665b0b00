// Package marketplace is Marketplace bargaining (marketplace_v1): a buyer's
// delegate (the seat being trained) and a seller haggle over one item. The
// item and the seller's asking price are public; the buyer's reservation
// p_b (the most it will pay) and the seller's reservation p_s (the least it
// will take) are private, with p_s < p_b always. A deal at price p pays the
// buyer clip((p_b−p)/(p_b−p_s)) and the seller clip((p−p_s)/(p_b−p_s)).
// No deal, walk-away and timeout give both 0.
package marketplace

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// ID is the versioned environment id.
const ID = "marketplace_v1"

var roles = [2]string{"buyer", "seller"}
var names = [2]string{"Buyer", "Seller"}

// Scenario is one item with both reservation prices.
type Scenario struct {
	ID          string  `yaml:"id" json:"id"`
	Item        string  `yaml:"item" json:"item"`
	Description string  `yaml:"description" json:"description"`
	Asking      float64 `yaml:"asking" json:"asking"`                           // public
	BuyerMax    float64 `yaml:"buyer_max" json:"buyer_max"`                     // p_b, private to the buyer
	SellerMin   float64 `yaml:"seller_min" json:"seller_min"`                   // p_s, private to the seller
	Principal   string  `yaml:"principal,omitempty" json:"principal,omitempty"` // whom the buyer's delegate works for
}

// Preferences implements engine.PreferenceScenario: the buyer's most
// (p_b) and the seller's least (p_s), judged against the asking price.
func (s Scenario) Preferences(seat int) (engine.Preferences, bool) {
	switch seat {
	case 0:
		return engine.Preferences{Price: s.BuyerMax, Scale: s.Asking}, true
	case 1:
		return engine.Preferences{Price: s.SellerMin, Scale: s.Asking}, true
	}
	return engine.Preferences{}, false
}

// Validate checks 0 < p_s < p_b ≤ asking.
func (s Scenario) Validate() error {
	if s.Item == "" {
		return fmt.Errorf("scenario has no item")
	}
	if !(s.SellerMin > 0 && s.SellerMin < s.BuyerMax) {
		return fmt.Errorf("seller_min %v, buyer_max %v: want 0 < p_s < p_b", s.SellerMin, s.BuyerMax)
	}
	if s.Asking < s.BuyerMax {
		return fmt.Errorf("asking %v below buyer_max %v: the seller would be asking less than the buyer would pay", s.Asking, s.BuyerMax)
	}
	return nil
}

type item struct {
	name, description string
	value             float64
}

var bank = []item{
	{"used e-reader", "6-inch screen, backlight, a few scratches on the case", 80},
	{"espresso grinder", "conical burrs, 40 grind settings, two years old", 140},
	{"mid-century side table", "teak veneer, restored last year", 180},
	{"noise-cancelling headphones", "over-ear, carrying case, battery like new", 160},
	{"camping tent for four", "used three times, all pegs included", 120},
	{"vintage film camera", "35 mm rangefinder, light meter works", 220},
	{"electric guitar amplifier", "40 W combo, clean and drive channels", 190},
	{"children's car seat", "group 1/2/3, never in an accident", 90},
	{"robot vacuum", "maps rooms, spare brushes included", 210},
	{"hand-made ceramic dinner set", "six plates, six bowls, dishwasher safe", 150},
}

var principals = []string{"a student furnishing a first flat", "a parent shopping for the family", "a collector", "a small café owner", "a retiree"}

// Sample deals a scenario: p_s at 50–85% of the item's value, p_b 10–60%
// above p_s, and an asking price 5–30% above p_b, all rounded; it retries
// until p_s < p_b ≤ asking after rounding.
func Sample(rng *rand.Rand) Scenario {
	for {
		it := bank[rng.IntN(len(bank))]
		v := it.value * (0.8 + 0.4*rng.Float64())
		ps := negotiation.RoundPrice(v * (0.5 + 0.35*rng.Float64()))
		pb := negotiation.RoundPrice(ps * (1.1 + 0.5*rng.Float64()))
		ask := negotiation.RoundPrice(pb * (1.05 + 0.25*rng.Float64()))
		s := Scenario{Item: it.name, Description: it.description, Asking: ask, BuyerMax: pb, SellerMin: ps,
			Principal: principals[rng.IntN(len(principals))]}
		if s.Validate() == nil {
			return s
		}
	}
}

//go:embed scenarios.yaml
var curatedYAML []byte

// Curated returns the embedded evaluation scenarios.
func Curated() ([]Scenario, error) { return negotiation.LoadScenarios[Scenario](curatedYAML) }

// Game is Marketplace bargaining.
type Game struct {
	negotiation.Game[Scenario, float64]
}

// New returns the game.
func New() *Game {
	return &Game{negotiation.Game[Scenario, float64]{
		GameID:    ID,
		Summary:   "Marketplace: a buyer's delegate and a seller with private reservation prices (p_s < p_b) bargain; price-corridor reward",
		Names:     names,
		Roles:     roles,
		Curated:   Curated,
		Sample:    Sample,
		Validate:  Scenario.Validate,
		Episode:   newEpisode,
		Valuation: valuation,
		Restate:   restate,
	}}
}

// restate is s in units where the asking price is anchor.
func restate(s Scenario, anchor float64, round func(float64) float64) Scenario {
	f := anchor / s.Asking
	s.Asking, s.BuyerMax, s.SellerMin = anchor, round(s.BuyerMax*f), round(s.SellerMin*f)
	return s
}

func newEpisode(s Scenario, q negotiation.Params) *negotiation.Episode[float64] {
	seats := negotiation.TwoSeats(names, roles)
	ep := &negotiation.Episode[float64]{
		SeatList: seats, Dealt: s, Rules: negotiation.PriceRules{Seats: seats, Scale: s.Asking}, Options: q.Options(),
	}
	ep.Briefing[0] = negotiation.Briefing{Text: briefing(s, 0, q), Data: Private{Seat: 0, Asking: s.Asking, Reservation: s.BuyerMax}}
	ep.Briefing[1] = negotiation.Briefing{Text: briefing(s, 1, q), Data: Private{Seat: 1, Asking: s.Asking, Reservation: s.SellerMin}}
	ep.Score = func(res negotiation.Result[float64]) engine.Outcome { return score(s, res) }
	return ep
}

// Private is a seat's information (its briefing's Data).
type Private struct {
	Seat        int     `json:"seat"`
	Asking      float64 `json:"asking"`
	Reservation float64 `json:"reservation"`
}

// Terms are the deal terms of an agreement.
type Terms = negotiation.PriceTerms

// Rewards are the corridor rewards (buyer, seller) of a deal at price.
func (s Scenario) Rewards(price float64) (buyer, seller float64) {
	return negotiation.Corridor(price, s.SellerMin, s.BuyerMax)
}

func score(s Scenario, res negotiation.Result[float64]) engine.Outcome {
	rep := negotiation.Report{Roles: roles}
	res0 := [2]float64{s.BuyerMax, s.SellerMin}
	for i := range 2 {
		if o := res.Openings[i]; o != nil {
			rep.Opening[i], rep.HasOpening[i] = *o/res0[i], true
		}
		if negotiation.MentionsNumber(res.Said[i], res0[i]) {
			rep.Disclosed[i] = 1
		}
		rep.Offers[i] = negotiation.Curve(res.Offered[i], func(p float64) float64 { return negotiation.NormPrice(p, s.SellerMin, s.BuyerMax) })
	}
	return negotiation.PriceOutcome(res, rep, s.Rewards)
}

// Rescore recomputes both rewards from a record's scenario, result and
// terms alone.
func Rescore(s Scenario, result string, t *Terms) ([2]float64, error) {
	return negotiation.RescorePrice(result, t, s.Rewards)
}

func briefing(s Scenario, seat int, q negotiation.Params) string {
	if q.Compact {
		return compactBriefing(s, seat, q)
	}
	var b strings.Builder
	price := func(p float64) string { return "$" + negotiation.FormatPrice(p) }
	if seat == 0 {
		who := "your principal"
		if s.Principal != "" {
			who = "your principal, " + s.Principal
		}
		fmt.Fprintf(&b, "You are a buying agent negotiating on behalf of %s.\n", who)
	} else {
		b.WriteString("You are selling an item on an online marketplace.\n")
	}
	asker := "The seller's"
	if seat == 1 {
		asker = "Your"
	}
	fmt.Fprintf(&b, "The item: %s (%s). %s public asking price is %s.\n", s.Item, s.Description, asker, price(s.Asking))
	if seat == 0 {
		fmt.Fprintf(&b, "Private: your principal will pay at most %s (the seller does not know this).\n", price(s.BuyerMax))
		b.WriteString("The seller has a private lowest price that you do not know.\n")
		b.WriteString("Your reward is 1 if you buy at the seller's lowest acceptable price, falls linearly with the price, and is 0 at or above your maximum.\n")
	} else {
		fmt.Fprintf(&b, "Private: you will not take less than %s (the buyer does not know this).\n", price(s.SellerMin))
		b.WriteString("The buyer has a private maximum price that you do not know.\n")
		b.WriteString("Your reward is 0 at or below your lowest price, rises linearly with the price, and is 1 at the buyer's maximum or above.\n")
	}
	fmt.Fprintf(&b, "No deal — walking away or running out of turns — gives you 0. Each side has %d turns; the buyer moves first.\n\n", q.Rounds)
	b.WriteString(negotiation.MoveFormat("PROPOSE: price=<amount>", "offer to trade at this price in dollars, e.g. price=120.", q.StructuredOnly))
	ex := negotiation.FormatPrice(negotiation.RoundPrice(s.Asking * 0.85))
	if q.StructuredOnly {
		fmt.Fprintf(&b, "Example:\nPROPOSE: price=%s\n", ex)
	} else {
		say := "I can pay cash today."
		if seat == 1 {
			say = "It is in great shape, and I have had other offers."
		}
		fmt.Fprintf(&b, "Example:\nSAY: %s\nPROPOSE: price=%s\n", say, ex)
	}
	return b.String()
}

func valuation(seat engine.Seat, view []engine.Event) (negotiation.Valuation[float64], error) {
	pr, err := negotiation.Private[Private](view)
	if err != nil {
		return negotiation.Valuation[float64]{}, err
	}
	var v negotiation.Valuation[float64]
	if pr.Seat == 0 {
		// Utility 0 at the buyer's maximum, 1 at half of it (its anchor).
		v = negotiation.PriceValuation(pr.Reservation/2, pr.Reservation, pr.Reservation, pr.Reservation/2)
		v.Disclosure = fmt.Sprintf("I can go up to $%s at most.", negotiation.FormatPrice(pr.Reservation))
	} else {
		// Utility 0 at the seller's minimum, 1 at the asking price.
		v = negotiation.PriceValuation(pr.Reservation, pr.Asking, pr.Reservation, pr.Asking)
		v.Disclosure = fmt.Sprintf("I cannot go below $%s.", negotiation.FormatPrice(pr.Reservation))
	}
	return v, nil
}

// compactBriefing is the briefing of Params.Compact: the rules first, the
// item, the asking price and the seat's private limit last.
func compactBriefing(s Scenario, seat int, q negotiation.Params) string {
	var b strings.Builder
	price := func(p float64) string { return "$" + negotiation.FormatPrice(p) }
	part := "the seller"
	if seat == 0 {
		part = "the buying agent"
	}
	b.WriteString(negotiation.CompactHead("Marketplace bargaining", part, q.Rounds, "the buyer", "PROPOSE: price=<amount>", q.StructuredOnly))
	if seat == 0 {
		b.WriteString("Reward: 1 for a deal at the seller's secret lowest price, falling to 0 at your maximum; 0 without a deal.\n")
	} else {
		b.WriteString("Reward: 0 for a deal at or below your lowest price, rising to 1 at the buyer's secret maximum; 0 without a deal.\n")
	}
	fmt.Fprintf(&b, "Item: %s, asking %s.", s.Item, price(s.Asking))
	if seat == 0 {
		fmt.Fprintf(&b, " Your secret maximum: %s.\n", price(s.BuyerMax))
	} else {
		fmt.Fprintf(&b, " Your secret lowest price: %s.\n", price(s.SellerMin))
	}
	return b.String()
}
