// Package craigslist is Craigslist bargaining (craigslist_v1): a buyer and
// a seller haggle over one listed item. The listing (title, description,
// price) is public; the buyer has a private target price. A deal at price
// p pays the buyer clip((listing−p)/(listing−target)) and the seller
// clip((p−target)/(listing−target)): the price corridor with p_min = the
// buyer's target and p_max = the listing price. No deal, walk-away and
// timeout give both 0.
package craigslist

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// ID is the versioned environment id.
const ID = "craigslist_v1"

var roles = [2]string{"buyer", "seller"}
var names = [2]string{"Buyer", "Seller"}

// Scenario is one listing and the buyer's private target.
type Scenario struct {
	ID          string  `yaml:"id" json:"id"`
	Title       string  `yaml:"title" json:"title"`
	Category    string  `yaml:"category" json:"category"`
	Description string  `yaml:"description" json:"description"`
	Listing     float64 `yaml:"listing" json:"listing"`
	Target      float64 `yaml:"target" json:"target"` // buyer's private target
}

// Preferences implements engine.PreferenceScenario: the buyer's private
// target, judged against the listing price. The seller has no private
// value (its reward is measured from the buyer's target), so it has none.
func (s Scenario) Preferences(seat int) (engine.Preferences, bool) {
	if seat != 0 {
		return engine.Preferences{}, false
	}
	return engine.Preferences{Price: s.Target, Scale: s.Listing}, true
}

// Validate checks 0 < target < listing.
func (s Scenario) Validate() error {
	if s.Title == "" {
		return fmt.Errorf("listing has no title")
	}
	if !(s.Target > 0 && s.Target < s.Listing) {
		return fmt.Errorf("target %v and listing %v: want 0 < target < listing", s.Target, s.Listing)
	}
	return nil
}

type item struct {
	title, category, description string
	price                        float64
}

// bank is the sampler's item bank; prices are rescaled per episode.
var bank = []item{
	{"Road bike, 56 cm aluminium frame", "bike", "Shimano gears, new tyres last spring, a few scratches on the top tube.", 420},
	{"Two-seat fabric sofa", "furniture", "Grey, no stains, from a smoke-free home. You pick up.", 260},
	{"Used 27-inch monitor", "electronics", "1440p, 144 Hz, comes with the stand and a DisplayPort cable.", 190},
	{"Studio apartment sublet, one month", "housing", "Furnished, close to the subway, utilities included.", 1350},
	{"Acoustic guitar with case", "electronics", "Solid spruce top, plays well, light wear on the pick guard.", 310},
	{"Compact car roof box", "car", "420 litres, both keys, fits most roof bars.", 230},
	{"Solid oak dining table", "furniture", "Seats six, two leaves, one small water mark.", 540},
	{"Espresso machine", "electronics", "Single boiler with steam wand, descaled last month.", 160},
	{"Kids' mountain bike, 24-inch", "bike", "Front suspension, 21 speeds, outgrown after one summer.", 140},
	{"Room in a shared flat", "housing", "Large room, shared kitchen, available from the first.", 780},
	{"2009 hatchback, 160k miles", "car", "Runs well, new clutch, passes inspection until next year.", 3200},
	{"Office chair, ergonomic", "furniture", "Adjustable arms and lumbar support, mesh back.", 120},
	// Listings under $100 and over $4,000: real listings span both, and a
	// model that learnt its prices only between has no length for "45" or
	// "7800" (it wrote $540 for a $45 bookshelf).
	{"Board game collection, five games", "electronics", "All pieces counted, boxes a little worn.", 35},
	{"Brass desk lamp", "furniture", "Works, new cable, LED bulb included.", 55},
	{"Bike child seat, rear mount", "bike", "Fits most racks, straps and rain cover included.", 70},
	{"Used motorcycle, 650 cc", "car", "Regular services, new chain, two helmets.", 4600},
	{"2015 sedan, 95k miles", "car", "One owner, full service history, winter tyres included.", 8600},
}

// Sample deals a listing from the bank ($28 to $10,750 after scaling) with
// its price scaled by 0.8–1.25 and the buyer's target at 55–90% of it, both
// rounded like real listings.
func Sample(rng *rand.Rand) Scenario {
	for {
		it := bank[rng.IntN(len(bank))]
		l := negotiation.RoundPrice(it.price * (0.8 + 0.45*rng.Float64()))
		t := negotiation.RoundPrice(l * (0.55 + 0.35*rng.Float64()))
		s := Scenario{Title: it.title, Category: it.category, Description: it.description, Listing: l, Target: t}
		if s.Validate() == nil {
			return s
		}
	}
}

//go:embed scenarios.yaml
var curatedYAML []byte

// Curated returns the embedded evaluation scenarios.
func Curated() ([]Scenario, error) { return negotiation.LoadScenarios[Scenario](curatedYAML) }

// Game is Craigslist bargaining.
type Game struct {
	negotiation.Game[Scenario, float64]
}

// New returns the game.
func New() *Game {
	return &Game{negotiation.Game[Scenario, float64]{
		GameID:    ID,
		Summary:   "Craigslist: a buyer with a private target haggles with a seller over a listed item; price-corridor reward",
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

// restate is s in units where the listing price is anchor.
func restate(s Scenario, anchor float64, round func(float64) float64) Scenario {
	s.Target, s.Listing = round(s.Target*anchor/s.Listing), anchor
	return s
}

func newEpisode(s Scenario, q negotiation.Params) *negotiation.Episode[float64] {
	seats := negotiation.TwoSeats(names, roles)
	ep := &negotiation.Episode[float64]{
		SeatList: seats, Dealt: s, Rules: negotiation.PriceRules{Seats: seats, Scale: s.Listing}, Options: q.Options(),
	}
	ep.Briefing[0] = negotiation.Briefing{Text: briefing(s, 0, q), Data: Private{Seat: 0, Listing: s.Listing, Target: s.Target}}
	ep.Briefing[1] = negotiation.Briefing{Text: briefing(s, 1, q), Data: Private{Seat: 1, Listing: s.Listing}}
	if q.Hints {
		l := negotiation.FormatPrice(s.Listing)
		ep.Options.Remind = [2]string{
			fmt.Sprintf("Listed at $%s, your target $%s.", l, negotiation.FormatPrice(s.Target)),
			fmt.Sprintf("Listed at $%s.", l),
		}
	}
	ep.Score = func(res negotiation.Result[float64]) engine.Outcome { return score(s, res) }
	return ep
}

// Private is a seat's information (its briefing's Data); Target is the
// buyer's only.
type Private struct {
	Seat    int     `json:"seat"`
	Listing float64 `json:"listing"`
	Target  float64 `json:"target,omitempty"`
}

// Terms are the deal terms of an agreement.
type Terms = negotiation.PriceTerms

// Rewards are the corridor rewards (buyer, seller) of a deal at price.
func (s Scenario) Rewards(price float64) (buyer, seller float64) {
	return negotiation.Corridor(price, s.Target, s.Listing)
}

func score(s Scenario, res negotiation.Result[float64]) engine.Outcome {
	rep := negotiation.Report{Roles: roles}
	if o := res.Openings[0]; o != nil {
		rep.Opening[0], rep.HasOpening[0] = *o/s.Target, true
	}
	if o := res.Openings[1]; o != nil {
		rep.Opening[1], rep.HasOpening[1] = *o/s.Listing, true
	}
	if negotiation.MentionsNumber(res.Said[0], s.Target) {
		rep.Disclosed[0] = 1
	}
	rep.Disclosed[1] = -1 // the seller has no private number
	norm := func(p float64) float64 { return negotiation.NormPrice(p, s.Target, s.Listing) }
	for i := range 2 {
		rep.Offers[i] = negotiation.Curve(res.Offered[i], norm)
	}
	if res.Status == negotiation.StatusDeal {
		rep.Extra = map[string]float64{"price_norm": norm(res.Deal.Terms)}
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
	fmt.Fprintf(&b, "You are the %s in a Craigslist negotiation over this listing:\n", roles[seat])
	fmt.Fprintf(&b, "  %s (%s) — listed at $%s\n  %s\n", s.Title, s.Category, negotiation.FormatPrice(s.Listing), s.Description)
	if seat == 0 {
		fmt.Fprintf(&b, "Your private target price is $%s (the seller does not know it).\n", negotiation.FormatPrice(s.Target))
		b.WriteString("Your reward is 1 for a deal at or below your target, falls linearly to 0 at the listing price, and is 0 above it.\n")
	} else {
		b.WriteString("The buyer has a private target price that you do not know.\n")
		b.WriteString("Your reward is 1 for a deal at or above the listing price and falls linearly to 0 at the buyer's target price.\n")
	}
	fmt.Fprintf(&b, "No deal — walking away or running out of turns — gives you 0. Each side has %d turns; the buyer moves first.\n\n", q.Rounds)
	b.WriteString(negotiation.MoveFormat("PROPOSE: price=<amount>", "offer to trade at this price in dollars, e.g. price=120.", q.StructuredOnly))
	ex := negotiation.FormatPrice(negotiation.RoundPrice(s.Listing * 0.8))
	if q.StructuredOnly {
		fmt.Fprintf(&b, "Example:\nPROPOSE: price=%s\n", ex)
	} else {
		fmt.Fprintf(&b, "Example:\nSAY: Would you take a bit less if I pick it up today?\nPROPOSE: price=%s\n", ex)
	}
	return b.String()
}

// compactBriefing is the briefing of Params.Compact: the rules first, the
// listing and the buyer's target last.
func compactBriefing(s Scenario, seat int, q negotiation.Params) string {
	var b strings.Builder
	b.WriteString(negotiation.CompactHead("Craigslist bargaining", "the "+roles[seat], q.Rounds, "the buyer", "PROPOSE: price=<amount>", q.StructuredOnly))
	if seat == 0 {
		b.WriteString("Reward: 1 for a deal at or below your target, falling to 0 at the listing price; 0 without a deal.\n")
	} else {
		b.WriteString("Reward: 1 for a deal at or above the listing price, falling to 0 at the buyer's secret target; 0 without a deal.\n")
	}
	fmt.Fprintf(&b, "Item: %s, listed at $%s.", s.Title, negotiation.FormatPrice(s.Listing))
	if seat == 0 {
		fmt.Fprintf(&b, " Your secret target: $%s.", negotiation.FormatPrice(s.Target))
	}
	b.WriteString("\n")
	return b.String()
}

func valuation(seat engine.Seat, view []engine.Event) (negotiation.Valuation[float64], error) {
	pr, err := negotiation.Private[Private](view)
	if err != nil {
		return negotiation.Valuation[float64]{}, err
	}
	if pr.Seat == 0 {
		// The buyer's utility is its reward without the clip: 1 at the
		// target, 0 at the listing; it anchors at half the target.
		v := negotiation.PriceValuation(pr.Target/2, pr.Listing, pr.Listing, pr.Target)
		v.Disclosure = fmt.Sprintf("My budget target is $%s.", negotiation.FormatPrice(pr.Target))
		return v, nil
	}
	// The seller knows only the listing: it values prices from half the
	// listing (0) to the listing (1).
	v := negotiation.PriceValuation(pr.Listing/2, pr.Listing, pr.Listing/2, pr.Listing)
	v.Disclosure = "I really need to sell this soon."
	return v, nil
}
