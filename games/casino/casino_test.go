package casino

import (
	"flag"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/negotiation/negotiationtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// opposed: A food 5 > water 4 > firewood 3, B the reverse; m = 23/36 for
// both (A = 3 food + 2 water is the best envy-free split for A).
var opposed = Scenario{Priorities: [2][3]string{{"high", "medium", "low"}, {"low", "medium", "high"}}}

// same: identical priorities; envy-free splits give exactly 18 points
// each, so m = .5 for both.
var same = Scenario{Priorities: [2][3]string{{"high", "medium", "low"}, {"high", "medium", "low"}}}

func TestRewards(t *testing.T) {
	type result = negotiation.Result[negotiation.Split]
	deal := func(aGets ...int) result {
		return result{Status: negotiation.StatusDeal, Walker: -1, Deal: &negotiation.Offer[negotiation.Split]{Terms: negotiation.Split(aGets)}}
	}
	// Calibrated values computed independently (Python).
	tests := []struct {
		name     string
		s        Scenario
		res      result
		wantM    float64
		want     [2]float64
		wantUtil [2]float64
	}{
		{"at the reference", opposed, deal(3, 2, 0), 23.0 / 36, [2]float64{0.5621154387220362, 0.39685361616859444}, [2]float64{23.0 / 36, 19.0 / 36}},
		{"z=1 and z=0", opposed, deal(3, 3, 3), 23.0 / 36, [2]float64{1, 0}, [2]float64{1, 0}},
		{"identical priorities, an 18/18 split", same, deal(3, 0, 1), .5, [2]float64{.5, .5}, [2]float64{.5, .5}},
		{"walk-away pays 5 points each", opposed, result{Status: negotiation.StatusWalk, Walker: 0}, 23.0 / 36, [2]float64{0.044521228566201256, 0.044521228566201256}, [2]float64{5.0 / 36, 5.0 / 36}},
		{"walk-away, m=.5", same, result{Status: negotiation.StatusWalk, Walker: 1}, .5, [2]float64{0.07700013573748499, 0.07700013573748499}, [2]float64{5.0 / 36, 5.0 / 36}},
		{"timeout gives 0", opposed, result{Status: negotiation.StatusNoDeal, Walker: -1}, 23.0 / 36, [2]float64{0, 0}, [2]float64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEpisode(tt.s, negotiation.DefaultParams())
			s := ep.Dealt.(Scenario)
			if !negotiationtest.Near(s.Reference.M[0], tt.wantM) || !negotiationtest.Near(s.Reference.M[1], tt.wantM) {
				t.Fatalf("m: got %v, want %v for both", s.Reference.M, tt.wantM)
			}
			out := ep.Score(tt.res)
			negotiationtest.CheckRewards(t, out, roles, tt.want)
			negotiationtest.CheckUtilities(t, out, roles, tt.wantUtil)
		})
	}
}

// casino-20 is the opposed scenario.
const opposedIndex = 19

func TestScriptedEpisode(t *testing.T) {
	tests := []struct {
		name       string
		scripts    [2][]string
		wantResult string
		want       [2]float64
		wantMetric map[string]float64
	}{
		{
			name:       "deal after an infeasible proposal",
			scripts:    [2][]string{{"PROPOSE: food=4 water=2 firewood=0", "SAY: Food is my top priority.\nPROPOSE: food=3 water=2 firewood=0"}, {"ACCEPT"}},
			wantResult: "deal", want: [2]float64{0.5621154387220362, 0.39685361616859444},
			wantMetric: map[string]float64{"invalid_camper_a": 1, "disclosure_camper_a": 1, "disclosure_camper_b": 0, "opening_camper_a": 23.0 / 36,
				"offer_1_camper_a": 23.0 / 36, "commitment_camper_a": 0, "fabricated_camper_a": 0},
		},
		{
			name:       "walk away",
			scripts:    [2][]string{{"WALK"}, nil},
			wantResult: "walk_away", want: [2]float64{0.044521228566201256, 0.044521228566201256},
			wantMetric: map[string]float64{"walked_camper_a": 1},
		},
		{
			name:       "turn limit",
			scripts:    [2][]string{{"PROPOSE: food=3 water=3 firewood=3"}, {"SAY: no"}},
			wantResult: "no_deal", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"no_deal": 1, "turns": 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.Params{"scenario_set": "curated", "scenario": opposedIndex, "rounds": 2}
			out := negotiationtest.Play(t, New(), 1, p, tt.scripts).Outcome
			negotiationtest.CheckOutcome(t, out, tt.wantResult, tt.want, tt.wantMetric)
		})
	}
}

func TestConformance(t *testing.T) { negotiationtest.CheckConformance(t, New()) }

func TestCurated(t *testing.T) {
	cur := negotiationtest.CheckCurated(t, Curated, func(s Scenario) string { return s.ID }, Scenario.Validate)
	if cur[opposedIndex].Priorities != opposed.Priorities {
		t.Errorf("scenario %d is %+v, the tests expect %+v", opposedIndex, cur[opposedIndex].Priorities, opposed.Priorities)
	}
}

func TestSample(t *testing.T) { negotiationtest.CheckSample(t, 500, Sample, Scenario.Validate) }

func TestBriefingGolden(t *testing.T) {
	negotiationtest.CheckBriefingGolden(t, New(), engine.Params{"scenario_set": "curated", "scenario": 0}, roles, *update)
}

func TestRepliesMatchGrammar(t *testing.T) { negotiationtest.CheckScriptedGrammar(t, New(), 20) }

func FuzzMove(f *testing.F) {
	for _, s := range []string{"PROPOSE: food=3 water=2 firewood=0", "SAY: hi\nACCEPT", "PROPOSE: food=4 water=0 firewood=0", "PROPOSE: water=1, firewood=1, food=0", "WALK"} {
		f.Add(s, uint8(0), false)
	}
	seats := negotiation.TwoSeats(names, roles)
	rules := negotiation.SplitRules{Pool: pool, Seats: seats}
	f.Fuzz(func(t *testing.T, text string, seat uint8, structured bool) {
		negotiationtest.CheckGrammar(t, rules, int(seat%2), structured, text)
	})
}

func TestStrategicBeatsNaive(t *testing.T) { negotiationtest.CheckStrategicBeatsNaive(t, New()) }

func TestStrategicAboveFloor(t *testing.T) { negotiationtest.CheckStrategicAboveFloor(t, New(), 20) }

func TestRecordRescore(t *testing.T) { negotiationtest.CheckRecordRescore(t, New(), Rescore) }

func TestAnchorPriceRefused(t *testing.T) {
	if _, err := New().NewEpisode(1, engine.Params{"anchor_price": 100}); err == nil || !strings.Contains(err.Error(), "no prices") {
		t.Errorf("anchor_price on a game without prices: got %v, want an error naming it", err)
	}
}
