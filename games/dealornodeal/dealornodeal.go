// Package dealornodeal is Deal-or-No-Deal (dealornodeal_v1): two players
// divide a pool of books, hats and balls; each has private per-item values
// that total 10 over the pool. A deal scores z = own points / 10 and the
// reward is the calibrated sigmoid around the player's Pareto-optimal,
// envy-free reference. No deal, walk-away and timeout give 0.
package dealornodeal

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// ID is the versioned environment id.
const ID = "dealornodeal_v1"

// MaxScore is the value of the whole pool to each player.
const MaxScore = 10

// Roles by seat.
var roles = [2]string{"player_a", "player_b"}
var names = [2]string{"Alice", "Bob"}

var pool = negotiation.Pool{Names: []string{"book", "hat", "ball"}, Plurals: []string{"books", "hats", "balls"}}

// Scenario is one dealt game: the item counts and each player's values.
type Scenario struct {
	ID     string    `yaml:"id" json:"id"`
	Counts [3]int    `yaml:"counts" json:"counts"`
	Values [2][3]int `yaml:"values" json:"values"` // by seat
	// Reference is m per seat, computed when dealt (not read from YAML).
	Reference negotiation.Reference `yaml:"-" json:"reference"`
}

// Preferences implements engine.PreferenceScenario: a seat's points per
// book, hat and ball.
func (s Scenario) Preferences(seat int) (engine.Preferences, bool) {
	if seat < 0 || seat > 1 {
		return engine.Preferences{}, false
	}
	return negotiation.ItemPreferences(pool.Names, s.Values[seat][:]), true
}

// Validate checks the Deal-or-No-Deal invariants: 1..5 of each item type,
// non-negative values totalling 10 for each player, and no item worthless
// to both.
func (s Scenario) Validate() error {
	for k, c := range s.Counts {
		if c < 1 || c > 5 {
			return fmt.Errorf("%s count %d: want 1..5", pool.Names[k], c)
		}
	}
	for i, v := range s.Values {
		total := 0
		for k := range v {
			if v[k] < 0 {
				return fmt.Errorf("seat %d values %v: negative", i, v)
			}
			total += v[k] * s.Counts[k]
		}
		if total != MaxScore {
			return fmt.Errorf("seat %d values %v total %d over counts %v, want %d", i, v, total, s.Counts, MaxScore)
		}
	}
	for k := range s.Counts {
		if s.Values[0][k] == 0 && s.Values[1][k] == 0 {
			return fmt.Errorf("%s is worthless to both players", pool.Names[k])
		}
	}
	return nil
}

func (s Scenario) pool() negotiation.Pool {
	p := pool
	p.Counts = s.Counts[:]
	return p
}

// Sample deals a valid scenario: 5–7 items over the three types, and two
// different value vectors (each totalling 10) such that every item type is
// worth something to someone and at least one to both.
func Sample(rng *rand.Rand) Scenario {
	var countSets [][3]int
	for a := 1; a <= 5; a++ {
		for b := 1; b <= 5; b++ {
			for c := 1; c <= 5; c++ {
				if n := a + b + c; n >= 5 && n <= 7 {
					countSets = append(countSets, [3]int{a, b, c})
				}
			}
		}
	}
	for {
		counts := countSets[rng.IntN(len(countSets))]
		var vals [][3]int
		for a := 0; a*counts[0] <= MaxScore; a++ {
			for b := 0; a*counts[0]+b*counts[1] <= MaxScore; b++ {
				if rest := MaxScore - a*counts[0] - b*counts[1]; rest%counts[2] == 0 {
					vals = append(vals, [3]int{a, b, rest / counts[2]})
				}
			}
		}
		va, vb := vals[rng.IntN(len(vals))], vals[rng.IntN(len(vals))]
		both := false
		ok := va != vb
		for k := range 3 {
			if va[k] == 0 && vb[k] == 0 {
				ok = false
			}
			if va[k] > 0 && vb[k] > 0 {
				both = true
			}
		}
		if ok && both {
			return Scenario{Counts: counts, Values: [2][3]int{va, vb}}
		}
	}
}

//go:embed scenarios.yaml
var curatedYAML []byte

// Curated returns the embedded evaluation scenarios.
func Curated() ([]Scenario, error) { return negotiation.LoadScenarios[Scenario](curatedYAML) }

// Game is Deal-or-No-Deal.
type Game struct {
	negotiation.Game[Scenario, negotiation.Split]
}

// New returns the game.
func New() *Game {
	return &Game{negotiation.Game[Scenario, negotiation.Split]{
		GameID:    ID,
		Summary:   "Deal-or-No-Deal: two players divide books, hats and balls with private values; calibrated-sigmoid reward",
		Names:     names,
		Roles:     roles,
		Curated:   Curated,
		Sample:    Sample,
		Validate:  Scenario.Validate,
		Episode:   newEpisode,
		Valuation: valuation,
	}}
}

func newEpisode(s Scenario, q negotiation.Params) *negotiation.Episode[negotiation.Split] {
	s.Reference = negotiation.SplitReference(s.Counts[:], s.Values[0][:], s.Values[1][:], MaxScore, MaxScore)
	seats := negotiation.TwoSeats(names, roles)
	rules := negotiation.SplitRules{Pool: s.pool(), Seats: seats}
	ep := &negotiation.Episode[negotiation.Split]{
		SeatList: seats, Dealt: s, Rules: rules, Options: q.Options(),
	}
	for i := range 2 {
		ep.Briefing[i] = negotiation.Briefing{Text: briefing(s, i, q), Data: Private{Seat: i, Counts: s.Counts, Values: s.Values[i]}}
	}
	ep.Score = func(res negotiation.Result[negotiation.Split]) engine.Outcome { return score(s, res) }
	n := negotiation.UpTo(s.Counts[0] + s.Counts[1] + s.Counts[2])
	ep.Given = [2][]float64{n, n}
	return ep
}

// Private is a seat's private information (its briefing's Data).
type Private struct {
	Seat   int    `json:"seat"`
	Counts [3]int `json:"counts"`
	Values [3]int `json:"values"`
}

// Terms are the deal terms of an agreement.
type Terms struct {
	Items    map[string][]int `json:"items"` // by role: counts of book, hat, ball
	Proposer string           `json:"proposer"`
}

func score(s Scenario, res negotiation.Result[negotiation.Split]) engine.Outcome {
	p := s.pool()
	rep := negotiation.Report{Roles: roles}
	var terms any
	for i := range 2 {
		if o := res.Openings[i]; o != nil {
			rep.Opening[i] = float64(negotiation.Score(p.Share(*o, i), s.Values[i][:])) / MaxScore
			rep.HasOpening[i] = true
		}
		rep.Offers[i] = negotiation.Curve(res.Offered[i], func(o negotiation.Split) float64 {
			return float64(negotiation.Score(p.Share(o, i), s.Values[i][:])) / MaxScore
		})
		n := 0
		for k, name := range pool.Names {
			if negotiation.StatesValue(res.Said[i], name, float64(s.Values[i][k])) {
				n++
			}
		}
		rep.Disclosed[i] = float64(n) / 3
	}
	if res.Status == negotiation.StatusDeal {
		t := Terms{Items: map[string][]int{}, Proposer: roles[res.Deal.Proposer]}
		for i := range 2 {
			share := p.Share(res.Deal.Terms, i)
			t.Items[roles[i]] = share
			z := float64(negotiation.Score(share, s.Values[i][:])) / MaxScore
			rep.Utility[i] = z
			rep.Reward[i] = negotiation.Calibrated(z, s.Reference.M[i])
		}
		terms = t
	}
	return negotiation.Outcome(res, rep, terms)
}

// Rescore recomputes both rewards from a record's scenario, result and
// terms alone (the reference m is recomputed, not read).
func Rescore(s Scenario, result string, t *Terms) ([2]float64, error) {
	return negotiation.RescoreDeal(result, t, func(t Terms) ([2]float64, error) {
		var r [2]float64
		ref := negotiation.SplitReference(s.Counts[:], s.Values[0][:], s.Values[1][:], MaxScore, MaxScore)
		for i, role := range roles {
			items := t.Items[role]
			if len(items) != 3 {
				return r, fmt.Errorf("terms of %s: %v", role, items)
			}
			r[i] = negotiation.Calibrated(float64(negotiation.Score(items, s.Values[i][:]))/MaxScore, ref.M[i])
		}
		return r, nil
	})
}

func briefing(s Scenario, seat int, q negotiation.Params) string {
	if q.Compact {
		return compactBriefing(s, seat, q)
	}
	p := s.pool()
	other := 1 - seat
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s in Deal or No Deal. You and %s must agree how to divide a pool of items.\n", names[seat], names[other])
	fmt.Fprintf(&b, "The pool: %s. Every item goes to one of you; items cannot be split.\n", p.Bundle(s.Counts[:]))
	vals := make([]string, 3)
	for k := range vals {
		vals[k] = fmt.Sprintf("%s=%d", pool.Names[k], s.Values[seat][k])
	}
	fmt.Fprintf(&b, "Your private values, in points per item: %s. The whole pool is worth %d points to you.\n", strings.Join(vals, " "), MaxScore)
	fmt.Fprintf(&b, "%s has private values of their own that you do not know; the pool is worth %d points to %s too.\n", names[other], MaxScore, names[other])
	b.WriteString("Your score in a deal is the total value of the items you get. Your reward grows with your score, most steeply around a fair split; ")
	b.WriteString("if you walk away, or the turns run out without a deal, you get 0.\n")
	fmt.Fprintf(&b, "Each of you has %d turns; %s moves first.\n\n", q.Rounds, names[0])
	b.WriteString(negotiation.MoveFormat("PROPOSE: book=<n> hat=<n> ball=<n>",
		fmt.Sprintf("offer a split: the numbers are the items YOU get, %s gets the rest.", names[other]), q.StructuredOnly))
	example := "PROPOSE: " + p.Terms([]int{s.Counts[0], 0, s.Counts[2] / 2})
	if q.StructuredOnly {
		fmt.Fprintf(&b, "Example:\n%s\n", example)
	} else {
		fmt.Fprintf(&b, "Example:\nSAY: I really need the books.\n%s\n", example)
	}
	return b.String()
}

func valuation(seat engine.Seat, view []engine.Event) (negotiation.Valuation[negotiation.Split], error) {
	pr, err := negotiation.Private[Private](view)
	if err != nil {
		return negotiation.Valuation[negotiation.Split]{}, err
	}
	p := pool
	p.Counts = pr.Counts[:]
	v := negotiation.SplitValuation(p, pr.Seat, pr.Values[:], MaxScore)
	v.Disclosure = fmt.Sprintf("My values are book=%d, hat=%d, ball=%d points each.", pr.Values[0], pr.Values[1], pr.Values[2])
	return v, nil
}

// compactBriefing is the briefing of Params.Compact: the rules first, the
// pool and the seat's private values last.
func compactBriefing(s Scenario, seat int, q negotiation.Params) string {
	p := s.pool()
	other := 1 - seat
	var b strings.Builder
	b.WriteString(negotiation.CompactHead("Deal or No Deal", names[seat]+", against "+names[other], q.Rounds, names[0], "PROPOSE: book=<n> hat=<n> ball=<n>", q.StructuredOnly))
	fmt.Fprintf(&b, "Reward: grows with the points of the items you get (a PROPOSE names them; %s gets the rest); 0 without a deal.\n", names[other])
	vals := make([]string, 3)
	for k := range vals {
		vals[k] = fmt.Sprintf("%s=%d", pool.Names[k], s.Values[seat][k])
	}
	fmt.Fprintf(&b, "Pool: %s. Your points per item: %s (%d in all; %s's are secret).\n", p.Bundle(s.Counts[:]), strings.Join(vals, " "), MaxScore, names[other])
	return b.String()
}
