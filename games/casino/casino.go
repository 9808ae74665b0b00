// Package casino is CaSiNo (casino_v1): two campsite neighbours split 3
// packages each of food, water and firewood. Each has private priorities
// High/Medium/Low worth 5/4/3 points per package (at most 36). A deal
// scores z = points / 36 with the calibrated sigmoid reward around the
// Pareto-optimal, envy-free reference. Walking away gives both the original
// game's outside option of 5 points (z = 5/36, through the same reward);
// running out of turns gives 0.
package casino

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// ID is the versioned environment id.
const ID = "casino_v1"

// MaxScore is the points of all nine packages to each camper.
const MaxScore = 36

// WalkPoints is what each side scores when someone walks away.
const WalkPoints = 5

var roles = [2]string{"camper_a", "camper_b"}
var names = [2]string{"Mia", "Leo"}

var pool = negotiation.Pool{
	Names: []string{"food", "water", "firewood"}, Plurals: []string{"food", "water", "firewood"},
	Counts: []int{3, 3, 3},
}

// Priority levels and their points per package.
var levels = []string{"high", "medium", "low"}
var points = map[string]int{"high": 5, "medium": 4, "low": 3}

// Scenario is one dealt game: each camper's priorities over food, water
// and firewood (a permutation of high, medium, low) and the reasons the
// camper has for them.
type Scenario struct {
	ID         string                `yaml:"id" json:"id"`
	Priorities [2][3]string          `yaml:"priorities" json:"priorities"` // by seat, by item
	Reasons    [2][3]string          `yaml:"reasons" json:"reasons"`
	Reference  negotiation.Reference `yaml:"-" json:"reference"`
}

// Preferences implements engine.PreferenceScenario: a seat's points per
// package of food, water and firewood (its priorities).
func (s Scenario) Preferences(seat int) (engine.Preferences, bool) {
	if seat < 0 || seat > 1 {
		return engine.Preferences{}, false
	}
	return negotiation.ItemPreferences(pool.Names, s.Values(seat)), true
}

// Values are a seat's points per package of food, water, firewood.
func (s Scenario) Values(seat int) []int {
	v := make([]int, 3)
	for k, p := range s.Priorities[seat] {
		v[k] = points[p]
	}
	return v
}

// Validate checks that each camper's priorities are a permutation of high,
// medium, low.
func (s Scenario) Validate() error {
	for i, ps := range s.Priorities {
		got := slices.Clone(ps[:])
		slices.Sort(got)
		if !slices.Equal(got, []string{"high", "low", "medium"}) {
			return fmt.Errorf("seat %d priorities %v: want each of high, medium, low once", i, ps)
		}
	}
	return nil
}

var reasonBank = [3][]string{
	{"the kids get hungry after hiking", "you are planning a long trek", "a friend forgot the groceries", "you want to cook a big dinner for the group"},
	{"the stream near the camp is dry", "you are camping in a hot spot", "you take medication that needs plenty of water", "you plan a long hike in the sun"},
	{"the nights are cold this week", "you want a campfire to cook on", "your sleeping bags are thin", "you like to keep a fire going to keep animals away"},
}

// Sample deals a scenario: independent random priorities per camper, with
// reasons drawn from a bank.
func Sample(rng *rand.Rand) Scenario {
	var s Scenario
	for i := range 2 {
		perm := rng.Perm(3)
		for k := range 3 {
			s.Priorities[i][k] = levels[perm[k]]
			s.Reasons[i][k] = reasonBank[k][rng.IntN(len(reasonBank[k]))]
		}
	}
	return s
}

//go:embed scenarios.yaml
var curatedYAML []byte

// Curated returns the embedded evaluation scenarios.
func Curated() ([]Scenario, error) { return negotiation.LoadScenarios[Scenario](curatedYAML) }

// Game is CaSiNo.
type Game struct {
	negotiation.Game[Scenario, negotiation.Split]
}

// New returns the game.
func New() *Game {
	return &Game{negotiation.Game[Scenario, negotiation.Split]{
		GameID:    ID,
		Summary:   "CaSiNo: campsite neighbours split food, water and firewood with private priorities; calibrated-sigmoid reward",
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
	s.Reference = negotiation.SplitReference(pool.Counts, s.Values(0), s.Values(1), MaxScore, MaxScore)
	seats := negotiation.TwoSeats(names, roles)
	ep := &negotiation.Episode[negotiation.Split]{
		SeatList: seats, Dealt: s, Rules: negotiation.SplitRules{Pool: pool, Seats: seats}, Options: q.Options(),
	}
	for i := range 2 {
		ep.Briefing[i] = negotiation.Briefing{Text: briefing(s, i, q), Data: Private{Seat: i, Priorities: s.Priorities[i]}}
	}
	ep.Score = func(res negotiation.Result[negotiation.Split]) engine.Outcome { return score(s, res) }
	n := negotiation.UpTo(pool.Counts[0] + pool.Counts[1] + pool.Counts[2])
	ep.Given = [2][]float64{n, n}
	return ep
}

// Private is a seat's private information (its briefing's Data).
type Private struct {
	Seat       int       `json:"seat"`
	Priorities [3]string `json:"priorities"`
}

// Terms are the deal terms of an agreement.
type Terms struct {
	Packages map[string][]int `json:"packages"` // by role: food, water, firewood
	Proposer string           `json:"proposer"`
}

// priorityWords mark a message as stating a priority ("water is my top
// priority", "I need food the most").
var priorityWords = []string{"most", "high", "priority", "top", "important"}

func score(s Scenario, res negotiation.Result[negotiation.Split]) engine.Outcome {
	rep := negotiation.Report{Roles: roles}
	var terms any
	for i := range 2 {
		if o := res.Openings[i]; o != nil {
			rep.Opening[i] = float64(negotiation.Score(pool.Share(*o, i), s.Values(i))) / MaxScore
			rep.HasOpening[i] = true
		}
		rep.Offers[i] = negotiation.Curve(res.Offered[i], func(o negotiation.Split) float64 {
			return float64(negotiation.Score(pool.Share(o, i), s.Values(i))) / MaxScore
		})
		high := pool.Names[slices.Index(s.Priorities[i][:], "high")]
		for _, msg := range res.Said[i] {
			lm := strings.ToLower(msg)
			if strings.Contains(lm, high) && slices.ContainsFunc(priorityWords, func(w string) bool { return strings.Contains(lm, w) }) {
				rep.Disclosed[i] = 1
			}
		}
	}
	switch res.Status {
	case negotiation.StatusDeal:
		t := Terms{Packages: map[string][]int{}, Proposer: roles[res.Deal.Proposer]}
		for i := range 2 {
			share := pool.Share(res.Deal.Terms, i)
			t.Packages[roles[i]] = share
			rep.Utility[i] = float64(negotiation.Score(share, s.Values(i))) / MaxScore
			rep.Reward[i] = negotiation.Calibrated(rep.Utility[i], s.Reference.M[i])
		}
		terms = t
	case negotiation.StatusWalk:
		for i := range 2 {
			rep.Utility[i] = float64(WalkPoints) / MaxScore
			rep.Reward[i] = negotiation.Calibrated(rep.Utility[i], s.Reference.M[i])
		}
	}
	return negotiation.Outcome(res, rep, terms)
}

// Rescore recomputes both rewards from a record's scenario, result and
// terms alone (the reference m is recomputed, not read).
func Rescore(s Scenario, result string, t *Terms) ([2]float64, error) {
	var r [2]float64
	ref := negotiation.SplitReference(pool.Counts, s.Values(0), s.Values(1), MaxScore, MaxScore)
	switch result {
	case string(negotiation.StatusWalk):
		for i := range r {
			r[i] = negotiation.Calibrated(float64(WalkPoints)/MaxScore, ref.M[i])
		}
	case string(negotiation.StatusDeal):
		if t == nil {
			return r, fmt.Errorf("a deal without terms")
		}
		for i, role := range roles {
			pk := t.Packages[role]
			if len(pk) != 3 {
				return r, fmt.Errorf("terms of %s: %v", role, pk)
			}
			r[i] = negotiation.Calibrated(float64(negotiation.Score(pk, s.Values(i)))/MaxScore, ref.M[i])
		}
	}
	return r, nil
}

func briefing(s Scenario, seat int, q negotiation.Params) string {
	if q.Compact {
		return compactBriefing(s, seat, q)
	}
	other := 1 - seat
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, camping next to %s. You two must agree how to split extra supplies: 3 packages each of food, water and firewood.\n", names[seat], names[other])
	b.WriteString("Your private priorities (the other camper does not see them):\n")
	for _, lvl := range levels {
		k := slices.Index(s.Priorities[seat][:], lvl)
		fmt.Fprintf(&b, "- %s: %s priority, %d points per package", pool.Names[k], lvl, points[lvl])
		// A reason for a low priority would read as a reason to want it.
		if lvl != "low" && s.Reasons[seat][k] != "" {
			fmt.Fprintf(&b, " (%s)", s.Reasons[seat][k])
		}
		b.WriteString(".\n")
	}
	fmt.Fprintf(&b, "All nine packages would be worth %d points to you. %s has priorities of their own, which you do not know.\n", MaxScore, names[other])
	fmt.Fprintf(&b, "Your score in a deal is the points of the packages you get; your reward grows with it, most steeply around a fair split. ")
	fmt.Fprintf(&b, "If either of you walks away, each of you gets %d points. If the turns run out without a deal, you get nothing.\n", WalkPoints)
	fmt.Fprintf(&b, "Each of you has %d turns; %s moves first.\n\n", q.Rounds, names[0])
	b.WriteString(negotiation.MoveFormat("PROPOSE: food=<n> water=<n> firewood=<n>",
		fmt.Sprintf("offer a split: the numbers (0 to 3) are the packages YOU get, %s gets the rest.", names[other]), q.StructuredOnly))
	if q.StructuredOnly {
		b.WriteString("Example:\nPROPOSE: food=2 water=1 firewood=2\n")
	} else {
		b.WriteString("Example:\nSAY: It gets cold at night, could I have more firewood?\nPROPOSE: food=2 water=1 firewood=2\n")
	}
	return b.String()
}

func valuation(seat engine.Seat, view []engine.Event) (negotiation.Valuation[negotiation.Split], error) {
	pr, err := negotiation.Private[Private](view)
	if err != nil {
		return negotiation.Valuation[negotiation.Split]{}, err
	}
	var s Scenario
	s.Priorities[pr.Seat] = pr.Priorities
	v := negotiation.SplitValuation(pool, pr.Seat, s.Values(pr.Seat), MaxScore)
	v.Floor = float64(WalkPoints) / MaxScore
	v.WalkPays = true
	high := pool.Names[slices.Index(pr.Priorities[:], "high")]
	v.Disclosure = fmt.Sprintf("Honestly, %s is my top priority, I need it the most.", high)
	return v, nil
}

// compactBriefing is the briefing of Params.Compact: the rules first, the
// seat's private points per package last.
func compactBriefing(s Scenario, seat int, q negotiation.Params) string {
	other := 1 - seat
	var b strings.Builder
	b.WriteString(negotiation.CompactHead("CaSiNo camping", names[seat]+", against "+names[other], q.Rounds, names[0], "PROPOSE: food=<n> water=<n> firewood=<n>", q.StructuredOnly))
	fmt.Fprintf(&b, "Reward: grows with the points of the packages you get (a PROPOSE names them, 0 to 3 each; %s gets the rest); if either walks away each gets %d points; 0 without a deal.\n", names[other], WalkPoints)
	vals := make([]string, len(pool.Names))
	for k, n := range pool.Names {
		vals[k] = fmt.Sprintf("%s=%d", n, points[s.Priorities[seat][k]])
	}
	fmt.Fprintf(&b, "Pool: 3 food, 3 water, 3 firewood. Your points per package: %s (%s's are secret).\n", strings.Join(vals, " "), names[other])
	return b.String()
}
