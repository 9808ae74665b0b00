package testbed

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
)

func TestConformance(t *testing.T) {
	for _, g := range Games() {
		t.Run(g.ID(), func(t *testing.T) { enginetest.Conformance(t, g) })
	}
	enginetest.Conformance(t, Price{}, enginetest.Options{Seeds: 10, Params: engine.Params{"value": 20, "offers": []int{5, 10, 15}, "reservations": []int{8, 12}}})
}

func TestOptimum(t *testing.T) {
	bArm, bReward := DefaultBanditParams().Optimum()
	cDoor, cReward := DefaultCreditParams().Optimum()
	pOffer, pReward := DefaultPriceParams().Optimum()
	for _, tc := range []struct {
		name       string
		index      int
		reward     float64
		wantIndex  int
		wantReward float64
	}{
		{"bandit", bArm, bReward, 2, 1},
		{"credit", cDoor, cReward, 1, 1},
		{"price", pOffer, pReward, 3, 0.4}, // offer 6: sells against 4, 5, 6; (10−6)/10
		{"price ties take the first", argmax([]float64{0.5, 0.5}), 0, 0, 0},
		// Shifted deals: the top of each range, (10 − top)/10.
		{"deals shifted −2", idx(DefaultPriceDealsParams().Dealt(-2, 1).Optimum()), rew(DefaultPriceDealsParams().Dealt(-2, 1).Optimum()), 3, 0.6},
		{"deals shifted +1", idx(DefaultPriceDealsParams().Dealt(1, 1).Optimum()), rew(DefaultPriceDealsParams().Dealt(1, 1).Optimum()), 6, 0.3},
		{"deals' mean", 0, DefaultPriceDealsParams().MeanOptimum(), 0, 0.45},
		// A numeric offer is its own index: 60, the top of 40..60.
		{"number", idx(DefaultPriceNumberParams().Optimum()), rew(DefaultPriceNumberParams().Optimum()), 60, 0.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.index != tc.wantIndex || math.Abs(tc.reward-tc.wantReward) > 1e-12 {
				t.Errorf("got move %d reward %v, want move %d reward %v", tc.index, tc.reward, tc.wantIndex, tc.wantReward)
			}
		})
	}
	want := []float64{0, 0.2, 2.0 / 3 * 0.5, 0.4, 0.3}
	for i, e := range DefaultPriceParams().Expected() {
		if math.Abs(e-want[i]) > 1e-12 {
			t.Errorf("expected reward of offer %d: got %v, want %v", DefaultPriceParams().Offers[i], e, want[i])
		}
	}
}

func idx(i int, _ float64) int     { return i }
func rew(_ int, r float64) float64 { return r }

// TestOptimalPolicyEarnsOptimum plays each game's "optimal" script over
// many seeds: its mean reward must match the computed optimum (exactly
// for the deterministic games, within sampling error for the price
// game), and the random script must earn less.
func TestOptimalPolicyEarnsOptimum(t *testing.T) {
	const n = 600
	for _, tc := range []struct {
		g       engine.Game
		optimum float64
		tol     float64
	}{
		{Bandit{}, 1, 1e-12},
		{Credit{}, 1, 1e-12},
		// The reward is 0.4 with probability 1 (every reservation sells):
		// no sampling error either.
		{Price{}, 0.4, 1e-12},
		// Each deal's best offer always sells; the shift's draw leaves
		// sampling error around the mean of 0.6, 0.5, 0.4 and 0.3.
		{PriceDeals, DefaultPriceDealsParams().MeanOptimum(), 0.02},
		{PriceNumber, 0.4, 1e-12},
	} {
		t.Run(tc.g.ID(), func(t *testing.T) {
			opt, rnd := meanReward(t, tc.g, "optimal", n), meanReward(t, tc.g, "random", n)
			if math.Abs(opt-tc.optimum) > tc.tol {
				t.Errorf("optimal script: got mean reward %v, want %v", opt, tc.optimum)
			}
			if rnd >= opt-0.1 {
				t.Errorf("random script: got mean reward %v, want well below the optimum %v", rnd, opt)
			}
		})
	}
}

// TestPriceReservationIsUniform: the dealt reservations follow the stated
// distribution, so the analytic expectation is the game's.
func TestPriceReservationIsUniform(t *testing.T) {
	const n = 3000
	count := map[int]int{}
	for seed := range uint64(n) {
		ep, err := Price{}.NewEpisode(seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		count[ep.Scenario().(PriceScenario).Reservation]++
	}
	for _, r := range DefaultPriceParams().Reservations {
		if got := float64(count[r]) / n; math.Abs(got-1.0/3) > 0.04 {
			t.Errorf("reservation %d: got share %.3f, want 1/3", r, got)
		}
	}
}

// TestDealsShiftTheRange: every shift is dealt about equally often, the
// reservation falls in the shifted range, the brief names that range, and
// the outcome reports the deal's own optimum.
func TestDealsShiftTheRange(t *testing.T) {
	const n = 2000
	p := DefaultPriceDealsParams()
	count := map[int]int{}
	for seed := range uint64(n) {
		ep, err := PriceDeals.NewEpisode(seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc := ep.Scenario().(PriceScenario)
		count[sc.Shift]++
		if r := sc.Reservation - sc.Shift; r < 4 || r > 6 {
			t.Fatalf("seed %d: reservation %d outside {4,5,6} shifted by %d", seed, sc.Reservation, sc.Shift)
		}
	}
	for _, s := range p.Shifts {
		if got := float64(count[s]) / n; math.Abs(got-0.25) > 0.04 {
			t.Errorf("shift %d: got share %.3f, want 1/4", s, got)
		}
	}
	cast, err := engine.ScriptedCast(PriceDeals, []string{"optimal"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := engine.Play(context.Background(), PriceDeals, 7, nil, cast, engine.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := rec.Scenario.(PriceScenario)
	deal := p.Dealt(sc.Shift, 1)
	best, optimum := deal.Optimum()
	if rec.Outcome.Metrics["optimum"] != optimum || rec.Outcome.Metrics["optimal"] != 1 || rec.Outcome.Terms.(map[string]int)["offer"] != deal.Offers[best] {
		t.Errorf("shift %d: outcome %+v, want the deal's optimum %v (offer %d) reported and played", sc.Shift, rec.Outcome, optimum, deal.Offers[best])
	}
	want := fmt.Sprint(deal.Reservations)
	for _, e := range rec.Events {
		if e.Kind == engine.KindBriefing && !strings.Contains(e.Text, want) {
			t.Errorf("brief %q does not name the deal's range %s", e.Text, want)
		}
	}
}

// TestNumberReplies: a numeric offer parses from "OFFER n" for n in
// 0..value only, its grammar allows as many digits as the value has, and
// the expected reward of an offer is P(reservation ≤ n)·(100 − n)/100.
func TestNumberReplies(t *testing.T) {
	p := DefaultPriceNumberParams()
	q := p.question()
	for _, tc := range []struct {
		text string
		want int
		ok   bool
	}{
		{"OFFER 60", 60, true}, {" offer 7\n", 7, true}, {"OFFER 100", 100, true}, {"OFFER 0", 0, true},
		{"OFFER 101", 0, false}, {"OFFER -1", 0, false}, {"OFFER", 0, false}, {"OFFER 6O", 0, false}, {"BID 60", 0, false},
	} {
		got, err := q.Parse(tc.text)
		if (err == nil) != tc.ok || tc.ok && got.(int) != tc.want {
			t.Errorf("Parse(%q) = %v, %v: want %d, ok %v", tc.text, got, err, tc.want, tc.ok)
		}
	}
	if want := `root ::= "OFFER " ("0" | [1-9] [0-9]{0,2})`; q.Grammar != want {
		t.Errorf("grammar %s, want %s", q.Grammar, want)
	}
	if _, err := q.Parse(q.Default); err != nil {
		t.Errorf("default %q does not parse: %v", q.Default, err)
	}
	e := p.Expected()
	for _, tc := range []struct {
		offer int
		want  float64
	}{{39, 0}, {40, 1.0 / 21 * 0.6}, {50, 11.0 / 21 * 0.5}, {58, 19.0 / 21 * 0.42}, {60, 0.4}, {80, 0.2}} {
		if math.Abs(e[tc.offer]-tc.want) > 1e-12 {
			t.Errorf("expected reward of offer %d: got %v, want %v", tc.offer, e[tc.offer], tc.want)
		}
	}
}

// TestScales: a scaled deal is the same deal in other units — every
// price k times, the same expected rewards — and a numeric deal's best
// offer moves to k times the unscaled one.
func TestScales(t *testing.T) {
	p := DefaultPriceParams()
	q := p.Dealt(1, 7)
	if q.Value != 70 || !slices.Equal(q.Reservations, []int{35, 42, 49}) || !slices.Equal(q.Offers, []int{21, 28, 35, 42, 49}) {
		t.Fatalf("Dealt(1, 7) = %+v", q)
	}
	if !slices.Equal(p.Dealt(0, 7).Expected(), p.Expected()) {
		t.Errorf("scale 7 changed the expected rewards: %v, want %v", p.Dealt(0, 7).Expected(), p.Expected())
	}
	n := DefaultPriceNumberParams()
	n.Scales = []int{1, 3, 7}
	for seed := range uint64(60) {
		ep, err := PriceNumber.NewEpisode(seed, engine.ParamsOf(n))
		if err != nil {
			t.Fatal(err)
		}
		sc := ep.Scenario().(PriceScenario)
		if best, r := sc.Params.Optimum(); best != 60*sc.Scale || math.Abs(r-0.4) > 1e-12 {
			t.Fatalf("scale %d: best offer %d worth %v, want %d worth 0.4", sc.Scale, best, r, 60*sc.Scale)
		}
	}
	if _, err := PriceNumber.NewEpisode(1, engine.Params{"scales": []int{2000}}); err == nil {
		t.Errorf("scale 2000 of value 100: accepted")
	}
}

func meanReward(t *testing.T, g engine.Game, policy string, n int) float64 {
	t.Helper()
	sum := 0.0
	for seed := range uint64(n) {
		cast, err := engine.ScriptedCast(g, []string{policy}, seed)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := engine.Play(context.Background(), g, seed, nil, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sum += rec.Outcome.Rewards[0]
	}
	return sum / float64(n)
}

func TestExploitability(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    [3]float64
		want float64
	}{
		{"uniform", [3]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, 0},
		{"pure rock", [3]float64{1, 0, 0}, 1},
		{"rock and paper", [3]float64{0.5, 0.5, 0}, 0.5}, // PAPER: +0.5 against rock, 0 against paper
		{"leaning rock", [3]float64{0.4, 0.3, 0.3}, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Exploitability(tc.p); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRPSPayoffIsZeroSum(t *testing.T) {
	for a := range 3 {
		for b := range 3 {
			if RPSPayoff(a, b) != -RPSPayoff(b, a) {
				t.Errorf("payoff(%s, %s) = %v, payoff(%s, %s) = %v: want opposite", RPSMoves[a], RPSMoves[b], RPSPayoff(a, b), RPSMoves[b], RPSMoves[a], RPSPayoff(b, a))
			}
		}
	}
	if RPSPayoff(1, 0) != 1 || RPSPayoff(0, 2) != 1 || RPSPayoff(2, 1) != 1 {
		t.Errorf("paper beats rock, rock beats scissors, scissors beats paper: got %v %v %v", RPSPayoff(1, 0), RPSPayoff(0, 2), RPSPayoff(2, 1))
	}
}

func TestBadParams(t *testing.T) {
	for _, tc := range []struct {
		g engine.Game
		p engine.Params
	}{
		{Bandit{}, engine.Params{"arms": []float64{1}}},
		{Bandit{}, engine.Params{"arms": []float64{0.5, 2}}},
		{Credit{}, engine.Params{"knocks": 0}},
		{Price{}, engine.Params{"offers": []int{3, 3}}},
		{Price{}, engine.Params{"offers": []int{3, 11}}},
		{Price{}, engine.Params{"reservations": []int{}}},
		{PriceDeals, engine.Params{"shifts": []int{-5}}}, // 4 − 5 < 0
		{PriceNumber, engine.Params{"offers": []int{3, 4}}},
		{PriceNumber, engine.Params{"value": 50}},       // reservations up to 60
		{PriceDeals, engine.Params{"shifts": []int{5}}}, // 6 + 5 > value 10
		{RPS{}, engine.Params{"rounds": 2}},
	} {
		if _, err := tc.g.NewEpisode(1, tc.p); err == nil {
			t.Errorf("%s accepted %v", tc.g.ID(), tc.p)
		}
	}
}

func FuzzParseMove(f *testing.F) {
	for _, s := range []string{"ROCK", " paper ", "SCISSORS\n", "ROCKS", "", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		i, err := parseMove(s, RPSMoves)
		if err == nil && (i < 0 || i >= len(RPSMoves)) {
			t.Fatalf("parseMove(%q) = %d outside the moves", s, i)
		}
	})
}
