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
