package negotiation

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/seeds"
)

// Params are the parameters every game of the suite takes; games embed it
// in their own parameter struct.
type Params struct {
	// Rounds is how many turns each seat gets (default 10).
	Rounds int `json:"rounds"`
	// StructuredOnly refuses free-text SAY lines (for tiny models).
	StructuredOnly bool `json:"structured_only"`
	// Compact writes the short form of every text a seat reads: a briefing
	// of the rules in three lines and the private facts in the last, one
	// line per turn ("Seller offers a price of $560. Turn 2/4: PROPOSE |
	// ACCEPT | REJECT | WALK"), and no echo of a seat's own move. The game
	// is the same; a seat stream costs about a quarter of the tokens
	// (docs/negotiation.md).
	Compact bool `json:"compact"`
	// Hints adds to the compact texts what a seat could work out from its
	// own briefing but a small model reads poorly: each turn the other
	// seat's offer stands, what the offer is worth to the seat (a
	// percentage of its best terms, from the scripted policies' own
	// valuation), and, where a game lists private preferences, the list
	// ordered best first. Nothing of the other seat's private information
	// is added. Needs Compact.
	Hints bool `json:"hints"`
	// ScenarioSet is "sampled" (a fresh scenario from the seeded sampler,
	// the default) or "curated" (the game's embedded evaluation set).
	ScenarioSet string `json:"scenario_set"`
	// Scenario picks a curated scenario by index; -1 (default) takes
	// index seed mod len(set), so seeds 0..n-1 visit every scenario once.
	Scenario int `json:"scenario"`
	// AnchorPrice, when > 0, states a price game's deal in units where
	// its public price (the asking or listing price) is AnchorPrice:
	// every price of the scenario is multiplied by AnchorPrice / public
	// price and rounded to whole units (to cents where whole units would
	// break the deal's order). Deals of every size then read alike; the
	// rewards, shares of the deal's own range, are unchanged up to the
	// rounding. A policy that spells prices in digits learns on deals of
	// one size and not across sizes
	// (docs/results/2026-12-08-price-beds.md).
	AnchorPrice float64 `json:"anchor_price,omitempty"`
}

// DefaultParams are the suite's defaults.
func DefaultParams() Params {
	return Params{Rounds: 10, ScenarioSet: "sampled", Scenario: -1}
}

// Validate checks p.
func (p Params) Validate() error {
	if p.Rounds < 1 || p.Rounds > 100 {
		return fmt.Errorf("rounds %d: want 1..100", p.Rounds)
	}
	if p.Hints && !p.Compact {
		return fmt.Errorf("hints: only the compact texts have them; set compact too")
	}
	switch p.ScenarioSet {
	case "sampled", "curated":
	default:
		return fmt.Errorf("scenario_set %q: want sampled or curated", p.ScenarioSet)
	}
	if p.Scenario < -1 {
		return fmt.Errorf("scenario %d: want -1 (by seed) or an index", p.Scenario)
	}
	if !(p.AnchorPrice == 0 || p.AnchorPrice >= 1 && p.AnchorPrice <= 1e6) {
		return fmt.Errorf("anchor_price %v: want 0 (prices as dealt) or 1..1000000", p.AnchorPrice)
	}
	return nil
}

// Options returns the loop options.
func (p Params) Options() Options {
	return Options{Rounds: p.Rounds, StructuredOnly: p.StructuredOnly, Compact: p.Compact, Hints: p.Hints}
}

// Rand is the generator for one purpose of one episode.
func Rand(seed uint64, parts ...uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seeds.Derive(seed, parts...), 0x6e65676f))
}

// LoadScenarios decodes a YAML document "scenarios: [...]" strictly
// (unknown keys are errors).
func LoadScenarios[S any](data []byte) ([]S, error) {
	var doc struct {
		Scenarios []S `yaml:"scenarios"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("negotiation: scenarios: %w", err)
	}
	if len(doc.Scenarios) == 0 {
		return nil, fmt.Errorf("negotiation: scenarios: none found")
	}
	return doc.Scenarios, nil
}

// Pick chooses the scenario of an episode: from the curated set when p
// says so, else from sample. validate runs on either.
func Pick[S any](p Params, seed uint64, curated []S, sample func(*rand.Rand) S, validate func(S) error) (S, error) {
	var s S
	if p.ScenarioSet == "curated" {
		i := p.Scenario
		if i < 0 {
			i = int(seed % uint64(len(curated)))
		}
		if i >= len(curated) {
			return s, fmt.Errorf("scenario %d: the curated set has %d", i, len(curated))
		}
		s = curated[i]
	} else {
		s = sample(Rand(seed, 1))
	}
	if err := validate(s); err != nil {
		return s, fmt.Errorf("invalid scenario: %w", err)
	}
	return s, nil
}
