package craigslist

import (
	"flag"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/negotiation/negotiationtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestRewards(t *testing.T) {
	type result = negotiation.Result[float64]
	s := Scenario{Title: "thing", Listing: 200, Target: 150} // corridor [150, 200]
	deal := func(p float64) result {
		return result{Status: negotiation.StatusDeal, Walker: -1, Deal: &negotiation.Offer[float64]{Terms: p}}
	}
	tests := []struct {
		name string
		res  result
		want [2]float64
	}{
		{"middle of the corridor", deal(175), [2]float64{.5, .5}},
		{"near the target", deal(160), [2]float64{.8, .2}},
		{"at the target", deal(150), [2]float64{1, 0}},
		{"at the listing", deal(200), [2]float64{0, 1}},
		{"below the corridor", deal(120), [2]float64{1, 0}},
		{"above the listing", deal(230), [2]float64{0, 1}},
		{"walk-away gives 0", result{Status: negotiation.StatusWalk, Walker: 0}, [2]float64{0, 0}},
		{"timeout gives 0", result{Status: negotiation.StatusNoDeal, Walker: -1}, [2]float64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := newEpisode(s, negotiation.DefaultParams()).Score(tt.res)
			negotiationtest.CheckRewards(t, out, roles, tt.want)
		})
	}
}

func TestScriptedEpisode(t *testing.T) {
	// cl-01: listing 350, buyer target 260 (corridor width 90).
	tests := []struct {
		name       string
		scripts    [2][]string
		wantResult string
		want       [2]float64
		wantMetric map[string]float64
		wantAbsent []string
	}{
		{
			name:       "deal in the middle, buyer disclosed its target",
			scripts:    [2][]string{{"SAY: my target is $260\nPROPOSE: price=200", "PROPOSE: price=oops", "PROPOSE: price=305"}, {"PROPOSE: price=340", "ACCEPT"}},
			wantResult: "deal", want: [2]float64{.5, .5},
			wantMetric: map[string]float64{"disclosure_buyer": 1, "opening_buyer": 200.0 / 260, "opening_seller": 340.0 / 350, "invalid_buyer": 1, "rounds": 2, "below_floor_buyer": 0,
				"offer_1_buyer": -60.0 / 90, "offer_2_buyer": 45.0 / 90, "offer_1_seller": 80.0 / 90, "price_norm": 45.0 / 90,
				"commitment_buyer": 0, "fabricated_buyer": 0},
			wantAbsent: []string{"offer_3_buyer", "offer_2_seller", "commitment_seller", "fabricated_seller"},
		},
		{
			// $150 is no number the buyer was given nor one it can work
			// out from two it was (cl-01: listing 350, target 260).
			name:       "an invented price and commitment language",
			scripts:    [2][]string{{"SAY: I saw one on eBay for $150, final offer\nPROPOSE: price=280", "ACCEPT"}, {"SAY: take it or leave it: $340\nPROPOSE: price=340"}},
			wantResult: "deal", want: [2]float64{10.0 / 90, 80.0 / 90},
			wantMetric: map[string]float64{"offer_1_buyer": 20.0 / 90, "offer_1_seller": 80.0 / 90, "price_norm": 80.0 / 90,
				"commitment_buyer": 1, "commitment_seller": 1, "fabricated_buyer": 1, "fabricated_seller": 0},
		},
		{
			name:       "deal above the listing",
			scripts:    [2][]string{{"PROPOSE: price=$400"}, {"ACCEPT"}},
			wantResult: "deal", want: [2]float64{0, 1},
			// Paying more than the listing is worth no more to the
			// buyer than no deal.
			wantMetric: map[string]float64{"disclosure_buyer": 0, "agreement": 1, "below_floor_buyer": 1, "below_floor_seller": 0},
		},
		{
			name:       "walk away",
			scripts:    [2][]string{{"PROPOSE: price=100"}, {"WALK"}},
			wantResult: "walk_away", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"walked_seller": 1},
		},
		{
			name:       "turn limit",
			scripts:    [2][]string{{"PROPOSE: price=100"}, {"REJECT"}},
			wantResult: "no_deal", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"no_deal": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.Params{"scenario_set": "curated", "scenario": 0, "rounds": 2}
			out := negotiationtest.Play(t, New(), 1, p, tt.scripts).Outcome
			negotiationtest.CheckOutcome(t, out, tt.wantResult, tt.want, tt.wantMetric)
			negotiationtest.CheckAbsent(t, out, tt.wantAbsent...)
			if _, ok := out.Metrics["disclosure_seller"]; ok {
				t.Errorf("the seller has no private number, yet disclosure_seller is reported")
			}
		})
	}
}

func TestConformance(t *testing.T) { negotiationtest.CheckConformance(t, New()) }

func TestCurated(t *testing.T) {
	cur := negotiationtest.CheckCurated(t, Curated, func(s Scenario) string { return s.ID }, Scenario.Validate)
	if cur[0].Listing != 350 || cur[0].Target != 260 {
		t.Errorf("scenario 0 is %+v, the tests expect listing 350 and target 260", cur[0])
	}
}

func TestSample(t *testing.T) { negotiationtest.CheckSample(t, 500, Sample, Scenario.Validate) }

func TestBriefingGolden(t *testing.T) {
	negotiationtest.CheckBriefingGolden(t, New(), engine.Params{"scenario_set": "curated", "scenario": 0}, roles, *update)
}

func TestRepliesMatchGrammar(t *testing.T) { negotiationtest.CheckScriptedGrammar(t, New(), 20) }

func FuzzMove(f *testing.F) {
	for _, s := range []string{"PROPOSE: price=120", "SAY: hi\nACCEPT", "PROPOSE: price=0", "PROPOSE: $99.50", "PROPOSE: price=1,200", "WALK"} {
		f.Add(s, uint8(0), false)
	}
	rules := negotiation.PriceRules{Seats: negotiation.TwoSeats(names, roles)}
	f.Fuzz(func(t *testing.T, text string, seat uint8, structured bool) {
		negotiationtest.CheckGrammar(t, rules, int(seat%2), structured, text)
	})
}

func TestStrategicBeatsNaive(t *testing.T) { negotiationtest.CheckStrategicBeatsNaive(t, New()) }

func TestStrategicAboveFloor(t *testing.T) { negotiationtest.CheckStrategicAboveFloor(t, New(), 20) }

func TestRecordRescore(t *testing.T) { negotiationtest.CheckRecordRescore(t, New(), Rescore) }

// TestOpeningBounded: an absurd opening offer (the issue saw a buyer open
// at $999,999,999 against a $537 target: opening_buyer 1,862,249) is
// capped at negotiation.MaxOpening, and ordinary ones are kept as ratios.
func TestOpeningBounded(t *testing.T) {
	s := Scenario{Title: "thing", Listing: 600, Target: 537}
	for _, tc := range []struct {
		name            string
		buyer, seller   float64
		wantBuyer, want float64
	}{
		{"ordinary", 429.6, 660, 0.8, 1.1},
		{"absurd", 999999999, 999999999, negotiation.MaxOpening, negotiation.MaxOpening},
		{"cent", 0.01, 0.01, 0.01 / 537, 0.01 / 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := negotiation.Result[float64]{Status: negotiation.StatusNoDeal, Walker: -1, Openings: [2]*float64{&tc.buyer, &tc.seller}}
			m := newEpisode(s, negotiation.DefaultParams()).Score(res).Metrics
			if got := m["opening_buyer"]; !negotiationtest.Near(got, tc.wantBuyer) {
				t.Errorf("opening_buyer = %v, want %v", got, tc.wantBuyer)
			}
			if got := m["opening_seller"]; !negotiationtest.Near(got, tc.want) {
				t.Errorf("opening_seller = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHintsRemind pins the reminder of the texts with hints: every turn
// line of a seat opens with the numbers it writes its prices from.
func TestHintsRemind(t *testing.T) {
	p := engine.Params{"scenario_set": "curated", "scenario": 0, "rounds": 2, "compact": true, "hints": true, "structured_only": true}
	rec := negotiationtest.Play(t, New(), 1, p, [2][]string{{"PROPOSE: price=200", "PROPOSE: price=300"}, {"PROPOSE: price=340", "REJECT"}})
	want := [2]string{"Listed at $350, your target $260. ", "Listed at $350. "}
	turns := 0
	for _, e := range rec.Events {
		if e.Kind != engine.KindNotification {
			continue
		}
		turns++
		if !strings.HasPrefix(e.Text, want[e.Seat]) {
			t.Errorf("seat %d's turn line %q does not open with %q", e.Seat, e.Text, want[e.Seat])
		}
	}
	if turns != 4 {
		t.Errorf("%d turn lines, want 4", turns)
	}
}

func TestAnchorPrice(t *testing.T) {
	negotiationtest.CheckAnchor(t, New(), func(s Scenario) []float64 { return []float64{s.Listing, s.Target} })
}
