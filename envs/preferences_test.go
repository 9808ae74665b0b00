package envs

import (
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

// TestPreferences: the negotiation games that know their seats' private
// preferences say so (the INFER reward's truth), with values that match
// their kind; the others do not claim any.
func TestPreferences(t *testing.T) {
	for _, tc := range []struct {
		env    string
		issues int     // issues per seat (0: none)
		price  [2]bool // which seats have a private price
	}{
		{"casino", 3, [2]bool{}},
		{"dealornodeal", 3, [2]bool{}},
		{"jobinterview", 5, [2]bool{}},
		{"craigslist", 0, [2]bool{true, false}},
		{"marketplace", 0, [2]bool{true, true}},
		{"calendar", -1, [2]bool{}}, // -1: not a PreferenceScenario
	} {
		t.Run(tc.env, func(t *testing.T) {
			g, err := Find(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			ep, err := g.NewEpisode(3, nil)
			if err != nil {
				t.Fatal(err)
			}
			sc, ok := ep.Scenario().(engine.PreferenceScenario)
			if tc.issues < 0 {
				if ok {
					t.Errorf("%s claims preferences", tc.env)
				}
				return
			}
			if !ok {
				t.Fatalf("%s: scenario %T has no Preferences", tc.env, ep.Scenario())
			}
			for seat := range 2 {
				p, ok := sc.Preferences(seat)
				if want := tc.issues > 0 || tc.price[seat]; ok != want {
					t.Fatalf("seat %d: ok %v, want %v", seat, ok, want)
				}
				if !ok {
					continue
				}
				if len(p.Issues) != tc.issues {
					t.Errorf("seat %d: %d issues, want %d", seat, len(p.Issues), tc.issues)
				}
				for _, is := range p.Issues {
					if len(is.Names) == 0 || is.Value < 0 {
						t.Errorf("seat %d: issue %+v: want a name and a value ≥ 0", seat, is)
					}
				}
				if tc.price[seat] != (p.Scale > 0) || p.Scale > 0 && !(p.Price > 0 && p.Price <= p.Scale) {
					t.Errorf("seat %d: price %v scale %v; want a private price in (0, scale] only where the game has one", seat, p.Price, p.Scale)
				}
			}
			if _, ok := sc.Preferences(2); ok {
				t.Errorf("seat 2 of a two-seat game has preferences")
			}
		})
	}
}
