package negotiation

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// PriceRules are the Rules of a single-price bargain: terms are
// "price=<amount>" (a bare amount is read too).
type PriceRules struct {
	Seats []engine.Seat
	// Scale bounds the whole digits a sampled price may have: as many as
	// Scale's (0: PriceGrammar's nine). A price is spelt a digit per
	// token by small vocabularies, and an open-ended number lets a policy
	// trained with an entropy bonus over the grammar's choices drift to
	// ever longer ones (ten digits against one way to stop): in
	// Marketplace, 16–25% of the offers above three times the asking
	// price after training at two seeds of three
	// (docs/results/2026-12-07-price-digits.md). Parsing still reads any
	// price: the bound is the sampler's, not the rules'.
	Scale float64
}

// ParseTerms implements Rules.
func (r PriceRules) ParseTerms(_ int, text string) (float64, error) {
	if !strings.Contains(text, "=") {
		return ParsePrice(text)
	}
	// Commas are thousands separators here, not term separators.
	kv, err := ParseAssignments(strings.ReplaceAll(text, ",", ""), []string{"price"})
	if err != nil {
		return 0, err
	}
	return ParsePrice(kv["price"])
}

// CheckAccept implements Rules: any price may be accepted.
func (r PriceRules) CheckAccept(int, float64) error { return nil }

// Describe implements Rules.
func (r PriceRules) Describe(proposer int, p float64) string {
	return fmt.Sprintf("a price of $%s.", FormatPrice(p))
}

// TermsHelp implements Rules.
func (r PriceRules) TermsHelp(int) string { return "PROPOSE: price=<amount>" }

// TermsGrammar implements Rules.
func (r PriceRules) TermsGrammar(int) (string, string) {
	if r.Scale < 1 {
		return PriceGrammar, ""
	}
	return PriceGrammarDigits(len(strconv.Itoa(int(r.Scale)))), ""
}

// PriceTerms are the recorded terms (Outcome.Terms) of a single-price
// deal.
type PriceTerms struct {
	Price    float64 `json:"price"`
	Proposer string  `json:"proposer"`
}

// PriceOutcome completes the outcome of a single-price bargain: on a deal,
// both rewards come from rewards(price) (the corridor), the utilities are
// the rewards, and the terms are PriceTerms naming the proposer by its
// role in rep.Roles.
func PriceOutcome(res Result[float64], rep Report, rewards func(price float64) (buyer, seller float64)) engine.Outcome {
	var terms any
	if res.Status == StatusDeal {
		p := res.Deal.Terms
		rep.Reward[0], rep.Reward[1] = rewards(p)
		rep.Utility = rep.Reward
		terms = PriceTerms{Price: p, Proposer: rep.Roles[res.Deal.Proposer]}
	}
	return Outcome(res, rep, terms)
}

// RescorePrice is the Rescore of a single-price bargain (RescoreDeal with
// the corridor rewards).
func RescorePrice(result string, t *PriceTerms, rewards func(price float64) (buyer, seller float64)) ([2]float64, error) {
	return RescoreDeal(result, t, func(t PriceTerms) ([2]float64, error) {
		b, s := rewards(t.Price)
		return [2]float64{b, s}, nil
	})
}

// PriceValuation is a price-bargain seat's valuation: candidates are 61
// round prices from lo to hi; utility is linear, 0 at zero and 1 at one
// (either order: zero > one for a buyer); Floor is 0.
func PriceValuation(lo, hi, zero, one float64) Valuation[float64] {
	step := niceStep((hi - lo) / 60)
	var cands []float64
	for p := math.Ceil(lo/step) * step; p <= hi+1e-9; p += step {
		cands = append(cands, math.Round(p*100)/100)
	}
	if len(cands) == 0 {
		cands = []float64{math.Round(lo*100) / 100}
	}
	return Valuation[float64]{
		Candidates: cands,
		Utility:    func(p float64) float64 { return (p - zero) / (one - zero) },
		Distance:   func(a, b float64) float64 { return math.Abs(a - b) },
		Format:     func(p float64) string { return "price=" + FormatPrice(p) },
	}
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten (at least a cent).
func niceStep(x float64) float64 {
	if x <= 0.01 {
		return 0.01
	}
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= x {
			return m * e
		}
	}
	return 10 * e
}

// RoundPrice rounds a price to a "listing-like" value: whole dollars below
// 100, multiples of 5 below 1000, of 10 above.
func RoundPrice(p float64) float64 {
	switch {
	case p < 100:
		return math.Max(1, math.Round(p))
	case p < 1000:
		return math.Round(p/5) * 5
	default:
		return math.Round(p/10) * 10
	}
}

// NormPrice is a price on the scale with lo at 0 and hi at 1
// (Craigslist's target and listing), capped to ±MaxOpening: one absurd
// price would swamp a mean over many episodes. An empty scale (lo ≥ hi,
// which no valid scenario has) gives 0 rather than a NaN no record could
// encode.
func NormPrice(p, lo, hi float64) float64 {
	if !(hi > lo) || math.IsNaN(p) {
		return 0
	}
	return min(max((p-lo)/(hi-lo), -MaxOpening), MaxOpening)
}
