package jobinterview

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/negotiation/negotiationtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// opposed: only salary and workplace matter and the roles want opposite
// things; worker z = (10·salary index + 30·workplace index)/100 and the
// recruiter gets the rest, so the max-min contract is 80000 + hybrid at
// .5/.5. It is curated scenario job-21.
var opposed = Scenario{Points: [2]Points{
	{Salary: []int{0, 10, 20, 30, 40}, DaysOff: []int{0, 0, 0, 0, 0}, Position: []int{0, 0, 0, 0}, Workplace: []int{0, 30, 60}, Hours: []int{0, 0, 0, 0}},
	{Salary: []int{40, 30, 20, 10, 0}, DaysOff: []int{0, 0, 0, 0, 0}, Position: []int{0, 0, 0, 0}, Workplace: []int{60, 30, 0}, Hours: []int{0, 0, 0, 0}},
}}

const opposedIndex = 20

// tie: worker also likes 30 days off (10 points), which costs the
// recruiter nothing. Two contracts reach the best minimum 50: 80000 +
// hybrid + 30 days (55/50, total 105, first in order) and 100000 + office
// + 30 days (50/60, total 110); the larger total wins.
var tie = Scenario{Points: [2]Points{
	{Salary: []int{0, 10, 20, 30, 40}, DaysOff: []int{0, 0, 0, 0, 10}, Position: []int{0, 0, 0, 0}, Workplace: []int{0, 25, 50}, Hours: []int{0, 0, 0, 0}},
	{Salary: []int{40, 30, 20, 10, 0}, DaysOff: []int{0, 0, 0, 0, 0}, Position: []int{0, 0, 0, 0}, Workplace: []int{60, 30, 0}, Hours: []int{0, 0, 0, 0}},
}}

// mirror ties two contracts on min 70 and total 150 with mirror-image
// points: salary 20 000 + junior + remote gives (70, 80), salary 20 000 +
// senior + remote (80, 70). The first enumerated used to decide, so m was
// (0.7, 0.8); each role's best over the tied set gives (0.8, 0.8).
var mirror = Scenario{Points: [2]Points{
	{Salary: []int{0, 10, 20, 30, 40}, DaysOff: []int{0, 0, 0, 0, 0}, Position: []int{0, 0, 0, 10}, Workplace: []int{0, 50, 0}, Hours: []int{0, 0, 0, 0}},
	{Salary: []int{40, 30, 20, 10, 0}, DaysOff: []int{0, 0, 0, 0, 0}, Position: []int{15, 0, 0, 0}, Workplace: []int{0, 45, 0}, Hours: []int{0, 0, 0, 0}},
}}

func TestMaxMin(t *testing.T) {
	tests := []struct {
		name string
		s    Scenario
		want Reference
	}{
		{"opposed", opposed, Reference{Contract: Contract{2, 0, 0, 1, 0}, M: [2]float64{.5, .5}}},
		{"tie broken by the larger total", tie, Reference{Contract: Contract{4, 4, 0, 0, 0}, M: [2]float64{.5, .6}}},
		{"mirror-image tie", mirror, Reference{Contract: Contract{2, 0, 0, 1, 0}, M: [2]float64{.8, .8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.Validate(); err != nil {
				t.Fatal(err)
			}
			got := MaxMin(tt.s.Points[0], tt.s.Points[1])
			if got.Contract != tt.want.Contract || !negotiationtest.Near(got.M[0], tt.want.M[0]) || !negotiationtest.Near(got.M[1], tt.want.M[1]) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMaxMinSymmetric: over sampled scenarios, swapping the roles' tables
// swaps m, and each m is the role's best over every contract tied on (min,
// total), recomputed here by brute force.
func TestMaxMinSymmetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 0))
	ties := 0
	for k := range 300 {
		s := Sample(rng)
		pw, pr := s.Points[0], s.Points[1]
		got, swapped := MaxMin(pw, pr), MaxMin(pr, pw)
		if got.M[0] != swapped.M[1] || got.M[1] != swapped.M[0] {
			t.Errorf("scenario %d: m %v, roles swapped %v: want mirror images", k, got.M, swapped.M)
		}
		bestMin, bestSum := -1, -1
		for _, c := range Contracts() {
			a, b := pw.Of(c), pr.Of(c)
			if min(a, b) > bestMin || min(a, b) == bestMin && a+b > bestSum {
				bestMin, bestSum = min(a, b), a+b
			}
		}
		var want [2]int
		values := map[[2]int]bool{}
		for _, c := range Contracts() {
			a, b := pw.Of(c), pr.Of(c)
			if min(a, b) == bestMin && a+b == bestSum {
				want = [2]int{max(want[0], a), max(want[1], b)}
				values[[2]int{a, b}] = true
			}
		}
		if len(values) > 1 {
			ties++
		}
		for i := range 2 {
			if w := float64(want[i]) / MaxPoints; !negotiationtest.Near(got.M[i], w) {
				t.Errorf("scenario %d: m[%d] = %v, want %v (best over the tied set)", k, i, got.M[i], w)
			}
		}
	}
	if ties == 0 {
		t.Error("no sampled scenario has a tie with different values: the test checks nothing")
	}
	t.Logf("%d of 300 scenarios tie contracts with different values", ties)
}

func TestRewards(t *testing.T) {
	type result = negotiation.Result[Contract]
	deal := func(c Contract) result {
		return result{Status: negotiation.StatusDeal, Walker: -1, Deal: &negotiation.Offer[Contract]{Terms: c}}
	}
	// Calibrated values computed independently (Python).
	tests := []struct {
		name string
		s    Scenario
		res  result
		want [2]float64
	}{
		{"the max-min contract", opposed, deal(Contract{2, 0, 0, 1, 0}), [2]float64{.5, .5}},
		{"z=1 for the worker, z=0 for the recruiter", opposed, deal(Contract{4, 2, 3, 2, 3}), [2]float64{1, 0}},
		{"60000 and remote: .6/.4", opposed, deal(Contract{0, 0, 0, 2, 0}), [2]float64{0.6443613025567579, 0.35563869744324184}},
		{"tie scenario, the first max-min contract", tie, deal(Contract{2, 4, 0, 1, 0}), [2]float64{0.573296828981533, 0.3961197527813282}},
		{"walk-away gives 0", opposed, result{Status: negotiation.StatusWalk, Walker: 1}, [2]float64{0, 0}},
		{"timeout gives 0", opposed, result{Status: negotiation.StatusNoDeal, Walker: -1}, [2]float64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := newEpisode(tt.s, negotiation.DefaultParams()).Score(tt.res)
			negotiationtest.CheckRewards(t, out, roles, tt.want)
		})
	}
}

func TestParseTerms(t *testing.T) {
	tests := []struct {
		text    string
		want    Contract
		wantErr string
	}{
		{text: "salary=80000 days_off=20 position=senior workplace=hybrid hours=40", want: Contract{2, 2, 2, 1, 1}},
		{text: "salary=$90k, days_off=30, position=Lead, workplace=REMOTE, hours=35", want: Contract{3, 4, 3, 2, 0}},
		{text: "salary=100,000 days_off=10 position=analyst workplace=office hours=50", want: Contract{4, 0, 0, 0, 3}},
		{text: "salary=85000 days_off=20 position=senior workplace=hybrid hours=40", wantErr: "not an option"},
		{text: "salary=80000 days_off=20 position=senior workplace=hybrid", wantErr: "missing hours"},
		{text: "salary=80000 days_off=20 position=ceo workplace=hybrid hours=40", wantErr: "position=ceo is not an option"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := Rules{}.ParseTerms(0, tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
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
		wantMetric map[string]float64
	}{
		{
			name: "deal at the max-min contract after a bad option",
			scripts: [2][]string{
				{"SAY: salary is worth up to 40 points to me\nPROPOSE: salary=100000 days_off=30 position=lead workplace=remote hours=35", "PROPOSE: salary=85000 days_off=20 position=senior workplace=hybrid hours=40", "PROPOSE: salary=80000 days_off=20 position=senior workplace=hybrid hours=40"},
				{"PROPOSE: salary=60000 days_off=10 position=analyst workplace=office hours=50", "ACCEPT"}},
			wantResult: "deal", want: [2]float64{.5, .5},
			wantMetric: map[string]float64{"opening_worker": 1, "opening_recruiter": 1, "invalid_worker": 1, "disclosure_worker": .2, "disclosure_recruiter": 0,
				"offer_1_worker": 1, "offer_2_worker": .5, "offer_1_recruiter": 1, "fabricated_worker": 0, "commitment_worker": 0,
				"top_workplace_worker": 0, "top_workplace_recruiter": 0},
		},
		{
			// job-21: remote is the worker's best workplace (60 points)
			// and the recruiter's worst; no other firm was in the briefing.
			name: "the worker's top workplace, an invented offer",
			scripts: [2][]string{
				{"SAY: Another firm offered me 120000. Take it or leave it.\nPROPOSE: salary=60000 days_off=10 position=analyst workplace=remote hours=50"},
				{"ACCEPT"}},
			wantResult: "deal", want: [2]float64{negotiation.Calibrated(.6, .5), negotiation.Calibrated(.4, .5)},
			wantMetric: map[string]float64{"offer_1_worker": .6, "top_workplace_worker": 1, "top_workplace_recruiter": 0,
				"commitment_worker": 1, "fabricated_worker": 1},
		},
		{
			name:       "walk away",
			scripts:    [2][]string{{"WALK"}, nil},
			wantResult: "walk_away", want: [2]float64{0, 0},
		},
		{
			name:       "turn limit",
			scripts:    [2][]string{{"SAY: hello"}, {"SAY: hi"}},
			wantResult: "no_deal", want: [2]float64{0, 0},
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

func TestConformance(t *testing.T) {
	negotiationtest.CheckConformance(t, New(), enginetest.Options{Seeds: 20})
}

func TestCurated(t *testing.T) {
	cur := negotiationtest.CheckCurated(t, Curated, func(s Scenario) string { return s.ID }, Scenario.Validate)
	if got := MaxMin(cur[opposedIndex].Points[0], cur[opposedIndex].Points[1]); got.Contract != (Contract{2, 0, 0, 1, 0}) {
		t.Errorf("scenario %d is not the opposed one the tests expect: max-min %v", opposedIndex, got)
	}
}

func TestSample(t *testing.T) { negotiationtest.CheckSample(t, 300, Sample, Scenario.Validate) }

func TestBriefingGolden(t *testing.T) {
	negotiationtest.CheckBriefingGolden(t, New(), engine.Params{"scenario_set": "curated", "scenario": 0}, roles, *update)
}

func TestRepliesMatchGrammar(t *testing.T) { negotiationtest.CheckScriptedGrammar(t, New(), 10) }

func FuzzMove(f *testing.F) {
	for _, s := range []string{
		"PROPOSE: salary=80000 days_off=20 position=senior workplace=hybrid hours=40",
		"SAY: hi\nACCEPT", "PROPOSE: salary=$90k, days_off=30, position=Lead, workplace=REMOTE, hours=35", "WALK",
	} {
		f.Add(s, uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, text string, seat uint8, structured bool) {
		negotiationtest.CheckGrammar(t, Rules{}, int(seat%2), structured, text)
	})
}

func TestStrategicBeatsNaive(t *testing.T) { negotiationtest.CheckStrategicBeatsNaive(t, New()) }

func TestStrategicAboveFloor(t *testing.T) { negotiationtest.CheckStrategicAboveFloor(t, New(), 20) }

func TestRecordRescore(t *testing.T) { negotiationtest.CheckRecordRescore(t, New(), Rescore) }

// TestTopWorkplace checks top_workplace_ by hand: workplaces are office,
// hybrid, remote; a tie for the most points makes each tied one top.
func TestTopWorkplace(t *testing.T) {
	s := Scenario{Points: [2]Points{{Workplace: []int{30, 30, 0}}, {Workplace: []int{0, 10, 60}}}}
	for _, tt := range []struct {
		workplace int
		want      [2]float64
	}{{0, [2]float64{1, 0}}, {1, [2]float64{1, 0}}, {2, [2]float64{0, 1}}} {
		m := s.topWorkplace(Contract{3: tt.workplace})
		if got := [2]float64{m["top_workplace_worker"], m["top_workplace_recruiter"]}; got != tt.want {
			t.Errorf("workplace %d: got %v, want %v", tt.workplace, got, tt.want)
		}
	}
}
