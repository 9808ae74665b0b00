package sealedbid

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
)

func TestConformance(t *testing.T) {
	enginetest.Conformance(t, New())
	enginetest.Conformance(t, New(), enginetest.Options{Seeds: 10, Params: engine.Params{"bidders": 5, "pricing": "second"}})
}

func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bids    []int
		order   []int
		pricing string
		want    Round
	}{
		{"first price", []int{10, 30, 20}, []int{0, 1, 2}, "first", Round{Winner: 1, Price: 30}},
		{"second price", []int{10, 30, 20}, []int{0, 1, 2}, "second", Round{Winner: 1, Price: 20}},
		{"tie goes by order", []int{30, 30, 20}, []int{1, 0, 2}, "first", Round{Winner: 1, Price: 30}},
		{"tie second price pays the tie", []int{30, 30, 20}, []int{0, 1, 2}, "second", Round{Winner: 0, Price: 30}},
		{"all zero", []int{0, 0}, []int{1, 0}, "second", Round{Winner: 1, Price: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := settle(tc.bids, tc.order, tc.pricing)
			if got.Winner != tc.want.Winner || got.Price != tc.want.Price {
				t.Errorf("got winner %d price %d, want winner %d price %d", got.Winner, got.Price, tc.want.Winner, tc.want.Price)
			}
		})
	}
}

func FuzzParseBid(f *testing.F) {
	for _, s := range []string{"BID 42", "bid 0", " BID 100 ", "BID -1", "BID", "BID 1 2", "BID 1e3", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBid(s, 100)
		if err == nil && (n < 0 || n > 100) {
			t.Fatalf("ParseBid(%q) = %d outside 0..100", s, n)
		}
	})
}

// TestShadingBeatsRandom is a sanity check of the scripted policies: the
// equilibrium bidder earns more than random bidders on average.
func TestShadingBeatsRandom(t *testing.T) {
	g := New()
	var shading, random float64
	const n = 200
	for seed := range uint64(n) {
		cast, err := engine.ScriptedCast(g, []string{"shading", "random", "random"}, seed)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := engine.Play(context.Background(), g, seed, nil, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		shading += rec.Outcome.Rewards[0]
		random += (rec.Outcome.Rewards[1] + rec.Outcome.Rewards[2]) / 2
	}
	if shading <= random {
		t.Errorf("mean reward: shading %.3f, random %.3f; want shading > random", shading/n, random/n)
	}
}

// TestGrammarMatchesParser converts the bid grammar's digit patterns to a
// regular expression and checks it admits exactly the bids ParseBid accepts.
func TestGrammarMatchesParser(t *testing.T) {
	for _, max := range []int{0, 5, 9, 10, 42, 99, 100, 250, 1000, 1309} {
		var alts []string
		for _, pat := range rangePatterns(max) {
			alts = append(alts, strings.NewReplacer(`"`, "", " ", "").Replace(strings.Join(pat, "")))
		}
		re := regexp.MustCompile(`^BID (` + strings.Join(alts, "|") + `)$`)
		for n := 0; n <= max*11/10+20; n++ {
			text := "BID " + strconv.Itoa(n)
			_, err := ParseBid(text, max)
			if got, want := re.MatchString(text), err == nil; got != want {
				t.Fatalf("max %d, %q: grammar admits %v, parser accepts %v (grammar %s)", max, text, got, want, Grammar(max))
			}
		}
		if re.MatchString("BID 007") {
			t.Errorf("max %d: grammar admits leading zeros", max)
		}
	}
}

// TestMaxValueBounds: max_value beyond MaxValueLimit is refused by name,
// and at the limit (and just under it) winners who bid below their value
// get a reward in [0, 1] — the reward arithmetic cannot overflow into a
// negative surplus.
func TestMaxValueBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		wantErr bool
	}{
		{"one", 1, false},
		{"limit", MaxValueLimit, false},
		{"limit minus one", MaxValueLimit - 1, false},
		{"limit plus one", MaxValueLimit + 1, true},
		{"near 2^62", 1<<62 - 1, true},
		{"max int", int(^uint(0) >> 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New()
			for _, pricing := range []string{"first", "second"} {
				p := engine.Params{"max_value": tc.max, "rounds": 100, "bidders": 16, "pricing": pricing}
				_, err := g.Seats(p)
				if tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), "max_value") {
						t.Fatalf("%s: got error %v, want one naming max_value", pricing, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", pricing, err)
				}
				policies := make([]string, 16)
				for i := range policies {
					policies[i] = "shading"
				}
				for seed := range uint64(3) {
					cast, err := engine.ScriptedCast(g, policies, seed)
					if err != nil {
						t.Fatal(err)
					}
					rec, err := engine.Play(context.Background(), g, seed, p, cast, engine.DefaultOptions(), nil)
					if err != nil {
						t.Fatal(err)
					}
					// Shading bidders never bid above their value, so no
					// surplus and no reward can be negative.
					for i, r := range rec.Outcome.Rewards {
						if r < 0 || r > 1 {
							t.Errorf("%s seed %d: bidder %d reward got %v, want in [0, 1]", pricing, seed, i+1, r)
						}
					}
				}
			}
		})
	}
}

// TestRewardAtBounds: a winner with value max paying 0 in every round
// gets exactly 1, one paying max with value 0 gets exactly −1, at the
// largest max_value allowed.
func TestRewardAtBounds(t *testing.T) {
	for _, tc := range []struct {
		name         string
		value, price int
		want         float64
	}{
		{"full surplus", MaxValueLimit, 0, 1},
		{"full loss", 0, MaxValueLimit, -1},
		{"even", MaxValueLimit, MaxValueLimit, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const rounds = 100
			p := Params{Bidders: 2, Rounds: rounds, Pricing: "first", MaxValue: MaxValueLimit}
			e := &episode{sc: Scenario{Params: p}, surplus: make([]float64, 2)}
			for r := range rounds {
				e.sc.Values = append(e.sc.Values, []int{tc.value, 0})
				e.win(0, tc.value, tc.price)
				e.rounds = append(e.rounds, Round{Round: r + 1, Winner: 0, Price: tc.price})
			}
			if got := e.Outcome().Rewards[0]; got != tc.want {
				t.Errorf("got reward %v, want %v", got, tc.want)
			}
		})
	}
}
