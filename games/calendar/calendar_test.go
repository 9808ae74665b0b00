package calendar

import (
	"flag"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/negotiation/negotiationtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// handmade is curated scenario cal-21: Z = {10, 11, 14}; the assistant
// values them .5, 0, .25 and the requester 0, 1, .5.
var handmade = Scenario{Calendars: [2]Calendar{
	{Free: []int{9, 10, 11, 14}, Prefs: []float64{1, 0.5, 0, 0.25}},
	{Free: []int{10, 11, 14, 16}, Prefs: []float64{0, 1, 0.5, 1}},
}}

const handmadeIndex = 20

// single has one mutually free slot (12): not a valid scenario to deal,
// but the reward must still be defined: the only possible slot is the best.
var single = Scenario{Calendars: [2]Calendar{
	{Free: []int{9, 12}, Prefs: []float64{1, 0.25}},
	{Free: []int{12, 15}, Prefs: []float64{0.5, 1}},
}}

func TestRewards(t *testing.T) {
	type result = negotiation.Result[int]
	deal := func(h int) result {
		return result{Status: negotiation.StatusDeal, Walker: -1, Deal: &negotiation.Offer[int]{Terms: h}}
	}
	tests := []struct {
		name string
		s    Scenario
		res  result
		want [2]float64
	}{
		{"assistant's best in Z (not its overall best 9)", handmade, deal(10), [2]float64{1, 0}},
		{"requester's best", handmade, deal(11), [2]float64{0, 1}},
		{"halfway for both", handmade, deal(14), [2]float64{.5, .5}},
		{"single mutually free slot", single, deal(12), [2]float64{1, 1}},
		{"walk-away gives 0", handmade, result{Status: negotiation.StatusWalk, Walker: 0}, [2]float64{0, 0}},
		{"timeout gives 0", handmade, result{Status: negotiation.StatusNoDeal, Walker: -1}, [2]float64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := newEpisode(tt.s, negotiation.DefaultParams()).Score(tt.res)
			negotiationtest.CheckRewards(t, out, roles, tt.want)
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		s       Scenario
		wantErr string
	}{
		{"handmade", handmade, ""},
		{"single mutually free slot", single, "1 mutually free slots"},
		{"flat on Z", Scenario{Calendars: [2]Calendar{{Free: []int{9, 10}, Prefs: []float64{1, 1}}, {Free: []int{9, 10}, Prefs: []float64{0, 1}}}}, "no best and worst"},
		{"bad bucket", Scenario{Calendars: [2]Calendar{{Free: []int{9, 10}, Prefs: []float64{0.3, 1}}, {Free: []int{9, 10}, Prefs: []float64{0, 1}}}}, "not one of"},
		{"hour out of the day", Scenario{Calendars: [2]Calendar{{Free: []int{7, 10}, Prefs: []float64{0, 1}}, {Free: []int{9, 10}, Prefs: []float64{0, 1}}}}, "increasing within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestScriptedEpisode(t *testing.T) {
	tests := []struct {
		name       string
		scripts    [2][]string
		wantResult string
		want       [2]float64
		wantErrors [2]int
		wantMetric map[string]float64
	}{
		{
			name: "busy slots are refused, then a deal at 14",
			scripts: [2][]string{
				{"PROPOSE: slot=16", "SAY: 10:00 has preference 0.5 for me\nPROPOSE: slot=9", "ACCEPT"},
				{"ACCEPT", "PROPOSE: slot=14"}},
			wantResult: "deal", want: [2]float64{.5, .5}, wantErrors: [2]int{1, 1},
			wantMetric: map[string]float64{"opening_assistant": 1, "opening_requester": .5, "disclosure_assistant": 1, "disclosure_requester": 0, "utility_assistant": .25,
				"offer_1_assistant": 1, "offer_1_requester": .5, "fabricated_assistant": 0, "commitment_assistant": 0,
				// 14 is neither side's best of Z = {10, 11, 14}.
				"max_pref_assistant": 0, "max_pref_requester": 0},
		},
		{
			// "7 meetings" goes unflagged: every number up to 18 may be
			// an hour (docs/negotiation.md).
			name:       "the assistant's best of the mutually free slots",
			scripts:    [2][]string{{"PROPOSE: slot=10"}, {"SAY: I have 7 meetings, so fine.\nACCEPT"}},
			wantResult: "deal", want: [2]float64{1, 0},
			wantMetric: map[string]float64{"offer_1_assistant": .5, "max_pref_assistant": 1, "max_pref_requester": 0, "fabricated_requester": 0},
		},
		{
			name:       "walk away",
			scripts:    [2][]string{{"PROPOSE: slot=10"}, {"WALK"}},
			wantResult: "walk_away", want: [2]float64{0, 0},
		},
		{
			name:       "turn limit",
			scripts:    [2][]string{{"PROPOSE: slot=10"}, {"PROPOSE: slot=11"}},
			wantResult: "no_deal", want: [2]float64{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.Params{"scenario_set": "curated", "scenario": handmadeIndex, "rounds": 2}
			rec := negotiationtest.Play(t, New(), 1, p, tt.scripts)
			out := rec.Outcome
			negotiationtest.CheckOutcome(t, out, tt.wantResult, tt.want, tt.wantMetric)
			if errs := negotiationtest.ValidationErrors(rec); errs != tt.wantErrors {
				t.Errorf("validation errors by seat: got %v, want %v", errs, tt.wantErrors)
			}
		})
	}
}

func TestConformance(t *testing.T) { negotiationtest.CheckConformance(t, New()) }

func TestCurated(t *testing.T) {
	cur := negotiationtest.CheckCurated(t, Curated, func(s Scenario) string { return s.ID }, Scenario.Validate)
	if z := cur[handmadeIndex].Mutual(); len(z) != 3 || z[0] != 10 || z[1] != 11 || z[2] != 14 {
		t.Errorf("scenario %d has Z = %v, the tests expect [10 11 14]", handmadeIndex, z)
	}
}

func TestSample(t *testing.T) { negotiationtest.CheckSample(t, 500, Sample, Scenario.Validate) }

func TestBriefingGolden(t *testing.T) {
	negotiationtest.CheckBriefingGolden(t, New(), engine.Params{"scenario_set": "curated", "scenario": 0}, roles, *update)
}

func TestRepliesMatchGrammar(t *testing.T) { negotiationtest.CheckScriptedGrammar(t, New(), 20) }

func FuzzMove(f *testing.F) {
	for _, s := range []string{"PROPOSE: slot=14", "SAY: hi\nACCEPT", "PROPOSE: slot=16", "PROPOSE: slot=10:00", "PROPOSE: slot=7", "WALK"} {
		f.Add(s, uint8(0), false)
	}
	rules := Rules{Calendars: handmade.Calendars}
	f.Fuzz(func(t *testing.T, text string, seat uint8, structured bool) {
		negotiationtest.CheckGrammar(t, rules, int(seat%2), structured, text)
	})
}

func TestStrategicBeatsNaive(t *testing.T) { negotiationtest.CheckStrategicBeatsNaive(t, New()) }

func TestStrategicAboveFloor(t *testing.T) { negotiationtest.CheckStrategicAboveFloor(t, New(), 20) }

func TestRecordRescore(t *testing.T) { negotiationtest.CheckRecordRescore(t, New(), Rescore) }

// TestMaxPref checks max_pref_ on handmade (Z = {10, 11, 14}; the
// assistant's best there is 10 at .5, though 9 at 1 is its favourite
// overall; the requester's is 11 at 1, though 16 is as good outside Z)
// and on a tie for the best.
func TestMaxPref(t *testing.T) {
	tied := Scenario{Calendars: [2]Calendar{
		{Free: []int{9, 10, 11}, Prefs: []float64{1, 1, 0}},
		{Free: []int{9, 10, 11}, Prefs: []float64{0, 0.25, 1}},
	}}
	for _, tt := range []struct {
		s    Scenario
		h    int
		want [2]float64
	}{
		{handmade, 10, [2]float64{1, 0}},
		{handmade, 11, [2]float64{0, 1}},
		{handmade, 14, [2]float64{0, 0}},
		{tied, 9, [2]float64{1, 0}},
		{tied, 10, [2]float64{1, 0}},
		{tied, 11, [2]float64{0, 1}},
	} {
		m := tt.s.maxPref(tt.h)
		if got := [2]float64{m["max_pref_assistant"], m["max_pref_requester"]}; got != tt.want {
			t.Errorf("%v at %d: got %v, want %v", tt.s.Calendars, tt.h, got, tt.want)
		}
	}
}
