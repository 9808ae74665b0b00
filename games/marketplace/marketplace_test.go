package marketplace

import (
	"flag"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/negotiation/negotiationtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestRewards(t *testing.T) {
	type result = negotiation.Result[float64]
	s := Scenario{Item: "thing", Asking: 240, BuyerMax: 200, SellerMin: 150} // corridor [150, 200]
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
		{"at the seller's minimum", deal(150), [2]float64{1, 0}},
		{"at the buyer's maximum", deal(200), [2]float64{0, 1}},
		{"below the corridor", deal(120), [2]float64{1, 0}},
		{"above the corridor", deal(230), [2]float64{0, 1}},
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
	// mp-01: asking 95, buyer max 80, seller min 55 (corridor width 25).
	tests := []struct {
		name       string
		scripts    [2][]string
		wantResult string
		want       [2]float64
		wantMetric map[string]float64
	}{
		{
			name:       "deal inside the corridor, both disclosed",
			scripts:    [2][]string{{"SAY: I can go up to $80.\nPROPOSE: price=50", "PROPOSE: price=oops", "PROPOSE: price=70"}, {"SAY: I cannot go below 55 dollars\nPROPOSE: price=90", "ACCEPT"}},
			wantResult: "deal", want: [2]float64{.4, .6},
			wantMetric: map[string]float64{"disclosure_buyer": 1, "disclosure_seller": 1, "opening_buyer": 50.0 / 80, "opening_seller": 90.0 / 55, "invalid_buyer": 1, "rounds": 2,
				"offer_1_buyer": -5.0 / 25, "offer_2_buyer": 15.0 / 25, "offer_1_seller": 35.0 / 25,
				"commitment_buyer": 0, "commitment_seller": 1, "fabricated_buyer": 0, "fabricated_seller": 0},
		},
		{
			name:       "deal above the buyer's maximum",
			scripts:    [2][]string{{"PROPOSE: price=$90"}, {"ACCEPT"}},
			wantResult: "deal", want: [2]float64{0, 1},
			// Far above the corridor: (90−55)/25.
			wantMetric: map[string]float64{"disclosure_buyer": 0, "agreement": 1, "offer_1_buyer": 35.0 / 25},
		},
		{
			name:       "walk away",
			scripts:    [2][]string{{"PROPOSE: price=40"}, {"WALK"}},
			wantResult: "walk_away", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"walked_seller": 1},
		},
		{
			name:       "turn limit",
			scripts:    [2][]string{{"PROPOSE: price=40"}, {"REJECT"}},
			wantResult: "no_deal", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"no_deal": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.Params{"scenario_set": "curated", "scenario": 0, "rounds": 2}
			out := negotiationtest.Play(t, New(), 1, p, tt.scripts).Outcome
			negotiationtest.CheckOutcome(t, out, tt.wantResult, tt.want, tt.wantMetric)
		})
	}
}

func TestConformance(t *testing.T) { negotiationtest.CheckConformance(t, New()) }

func TestCurated(t *testing.T) {
	cur := negotiationtest.CheckCurated(t, Curated, func(s Scenario) string { return s.ID }, Scenario.Validate)
	if cur[0].Asking != 95 || cur[0].BuyerMax != 80 || cur[0].SellerMin != 55 {
		t.Errorf("scenario 0 is %+v, the tests expect asking 95, buyer max 80, seller min 55", cur[0])
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

func TestAnchorPrice(t *testing.T) {
	negotiationtest.CheckAnchor(t, New(), func(s Scenario) []float64 { return []float64{s.Asking, s.BuyerMax, s.SellerMin} })
}
