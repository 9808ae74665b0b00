package negotiation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Pool is the set of indivisible items of a split game (Deal-or-No-Deal,
// CaSiNo).
type Pool struct {
	// Names are the item types as written in terms ("book"), Plurals as
	// written in prose ("books").
	Names   []string
	Plurals []string
	Counts  []int
}

// Split is an allocation: Split[k] items of type k go to seat 0, the rest
// to seat 1.
type Split []int

// Share is what seat gets under s.
func (p Pool) Share(s Split, seat int) []int {
	if seat == 0 {
		return append([]int(nil), s...)
	}
	return Complement(p.Counts, s)
}

// Bundle renders item counts in prose: "1 book, 2 hats and 0 balls".
func (p Pool) Bundle(x []int) string {
	parts := make([]string, len(x))
	for k, n := range x {
		name := p.Plurals[k]
		if n == 1 {
			name = p.Names[k]
		}
		parts[k] = fmt.Sprintf("%d %s", n, name)
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Terms writes a share as the text after "PROPOSE: ".
func (p Pool) Terms(x []int) string {
	parts := make([]string, len(x))
	for k, n := range x {
		parts[k] = p.Names[k] + "=" + strconv.Itoa(n)
	}
	return strings.Join(parts, " ")
}

// SplitRules are the Rules of a split game: a proposal lists the items the
// proposer keeps; the counterpart gets the rest.
type SplitRules struct {
	Pool  Pool
	Seats []engine.Seat
}

// ParseTerms implements Rules.
func (r SplitRules) ParseTerms(proposer int, text string) (Split, error) {
	kv, err := ParseAssignments(text, r.Pool.Names)
	if err != nil {
		return nil, err
	}
	x := make([]int, len(r.Pool.Names))
	for k, name := range r.Pool.Names {
		if x[k], err = ParseCount(name, kv[name], r.Pool.Counts[k]); err != nil {
			return nil, err
		}
	}
	if proposer == 1 {
		x = Complement(r.Pool.Counts, x)
	}
	return Split(x), nil
}

// CheckAccept implements Rules: every split may be accepted.
func (r SplitRules) CheckAccept(int, Split) error { return nil }

// Describe implements Rules.
func (r SplitRules) Describe(proposer int, s Split) string {
	other := 1 - proposer
	return fmt.Sprintf("%s gets %s; %s gets %s.",
		r.Seats[proposer].Name, r.Pool.Bundle(r.Pool.Share(s, proposer)),
		r.Seats[other].Name, r.Pool.Bundle(r.Pool.Share(s, other)))
}

// TermsHelp implements Rules.
func (r SplitRules) TermsHelp(int) string {
	parts := make([]string, len(r.Pool.Names))
	for k, n := range r.Pool.Names {
		parts[k] = n + "=<n>"
	}
	return "PROPOSE: " + strings.Join(parts, " ")
}

// TermsGrammar implements Rules: each count is one digit up to the pool's.
func (r SplitRules) TermsGrammar(int) (string, string) {
	parts := make([]string, len(r.Pool.Names))
	for k, n := range r.Pool.Names {
		sep := " "
		if k == 0 {
			sep = ""
		}
		parts[k] = fmt.Sprintf(`"%s%s=" [0-%d]`, sep, n, min(9, r.Pool.Counts[k]))
	}
	return strings.Join(parts, " "), ""
}

// Proposals implements Lister: every split, as the proposer writes it.
func (r SplitRules) Proposals(int) []string {
	var out []string
	for _, x := range Allocations(r.Pool.Counts) {
		out = append(out, "PROPOSE: "+r.Pool.Terms(x))
	}
	return out
}

// SplitValuation is a split-game seat's valuation: values[k] points per
// item of type k, normalised by maxScore.
func SplitValuation(pool Pool, seat int, values []int, maxScore float64) Valuation[Split] {
	var cands []Split
	for _, x := range Allocations(pool.Counts) {
		cands = append(cands, Split(x))
	}
	return Valuation[Split]{
		Candidates: cands,
		Utility: func(s Split) float64 {
			return float64(Score(pool.Share(s, seat), values)) / maxScore
		},
		Distance: func(a, b Split) float64 {
			d := 0
			for k := range a {
				d += max(a[k]-b[k], b[k]-a[k])
			}
			return float64(d)
		},
		Format: func(s Split) string { return pool.Terms(pool.Share(s, seat)) },
	}
}

// ItemPreferences are a seat's values per item type (names in the pool's
// order) as engine.Preferences.
func ItemPreferences(names []string, values []int) engine.Preferences {
	var p engine.Preferences
	for k, v := range values {
		p.Issues = append(p.Issues, engine.Issue{Names: []string{names[k]}, Value: float64(v)})
	}
	return p
}
