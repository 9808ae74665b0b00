package dealornodeal

import (
	"flag"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/negotiation/negotiationtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// identical has the same values for both players: no envy-free split
// exists; the least larger envy violation (.2) is at A={book} (.6/.4) and
// A={hats, balls} (.4/.6), so m = .6 for both.
var identical = Scenario{Counts: [3]int{1, 2, 2}, Values: [2][3]int{{6, 1, 1}, {6, 1, 1}}}

// frontier has m = .9 for A and 1.0 for B (see the negotiation tests).
var frontier = Scenario{Counts: [3]int{2, 1, 1}, Values: [2][3]int{{1, 4, 4}, {5, 0, 0}}}

func TestRewards(t *testing.T) {
	deal := func(aGets ...int) negotiation.Result[negotiation.Split] {
		return negotiation.Result[negotiation.Split]{Status: negotiation.StatusDeal, Walker: -1,
			Deal: &negotiation.Offer[negotiation.Split]{Proposer: 0, Terms: negotiation.Split(aGets)}}
	}
	// Calibrated values computed independently (Python) from docs/mission.md's formula.
	tests := []struct {
		name     string
		s        Scenario
		res      negotiation.Result[negotiation.Split]
		wantM    [2]float64
		want     [2]float64
		wantUtil [2]float64
	}{
		{"no envy-free split, A takes the book", identical, deal(1, 0, 0), [2]float64{.6, .6}, [2]float64{0.5430642722181345, 0.265806578048861}, [2]float64{.6, .4}},
		{"z=1 for A, z=0 for B", identical, deal(1, 2, 2), [2]float64{.6, .6}, [2]float64{1, 0}, [2]float64{1, 0}},
		{"envy-free frontier", frontier, deal(0, 1, 1), [2]float64{.9, 1}, [2]float64{0.5994607982611039, 1}, [2]float64{.8, 1}},
		{"walk-away gives the outside option 0", frontier, negotiation.Result[negotiation.Split]{Status: negotiation.StatusWalk, Walker: 1}, [2]float64{.9, 1}, [2]float64{0, 0}, [2]float64{0, 0}},
		{"timeout gives 0", frontier, negotiation.Result[negotiation.Split]{Status: negotiation.StatusNoDeal, Walker: -1}, [2]float64{.9, 1}, [2]float64{0, 0}, [2]float64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEpisode(tt.s, negotiation.DefaultParams())
			s := ep.Dealt.(Scenario)
			if !negotiationtest.Near(s.Reference.M[0], tt.wantM[0]) || !negotiationtest.Near(s.Reference.M[1], tt.wantM[1]) {
				t.Fatalf("m: got %v, want %v", s.Reference.M, tt.wantM)
			}
			out := ep.Score(tt.res)
			negotiationtest.CheckRewards(t, out, roles, tt.want)
			negotiationtest.CheckUtilities(t, out, roles, tt.wantUtil)
		})
	}
}

func curatedParams(i int) engine.Params {
	return engine.Params{"scenario_set": "curated", "scenario": i}
}

// dnd-21 is the identical-values scenario.
const identicalIndex = 20

func TestScriptedEpisode(t *testing.T) {
	tests := []struct {
		name       string
		scripts    [2][]string
		wantResult string
		want       [2]float64
		wantTerms  any
		wantErrors int
		wantMetric map[string]float64
		wantAbsent []string
	}{
		{
			name:       "deal after an invalid accept and infeasible terms",
			scripts:    [2][]string{{"ACCEPT", "PROPOSE: book=2 hat=0 ball=0", "SAY: I value the book.\nPROPOSE: book=1 hat=0 ball=0"}, {"SAY: Fine.\nACCEPT"}},
			wantResult: "deal", want: [2]float64{0.5430642722181345, 0.265806578048861}, wantErrors: 2,
			wantTerms: Terms{Items: map[string][]int{"player_a": {1, 0, 0}, "player_b": {0, 2, 2}}, Proposer: "player_a"},
			wantMetric: map[string]float64{"agreement": 1, "rounds": 1, "turns": 2, "opening_player_a": .6, "invalid_player_a": 2,
				"offer_1_player_a": .6, "commitment_player_a": 0, "fabricated_player_a": 0, "fabricated_player_b": 0},
			wantAbsent: []string{"offer_2_player_a", "offer_1_player_b"},
		},
		{
			name:       "walk away",
			scripts:    [2][]string{{"PROPOSE: book=1 hat=2 ball=2"}, {"SAY: No.\nWALK"}},
			wantResult: "walk_away", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"walk_away": 1, "walked_player_b": 1, "agreement": 0},
		},
		{
			name:       "turn limit",
			scripts:    [2][]string{{"PROPOSE: book=1 hat=2 ball=2", "PROPOSE: book=1 hat=2 ball=2"}, {"REJECT", "SAY: my book value is 6"}},
			wantResult: "no_deal", want: [2]float64{0, 0},
			wantMetric: map[string]float64{"no_deal": 1, "rounds": 2, "turns": 4, "disclosure_player_b": 1.0 / 3,
				"offer_1_player_a": 1, "offer_2_player_a": 1, "fabricated_player_b": 0},
			wantAbsent: []string{"commitment_player_a", "fabricated_player_a"},
		},
		{
			// Bob's book is worth 6 to it; 9 is no number it was given.
			name:       "an invented value and commitment language",
			scripts:    [2][]string{{"PROPOSE: book=0 hat=2 ball=2", "ACCEPT"}, {"SAY: my book value is 9, final offer\nPROPOSE: book=1 hat=0 ball=0"}},
			wantResult: "deal", want: [2]float64{0.265806578048861, 0.5430642722181345},
			wantMetric: map[string]float64{"offer_1_player_a": .4, "offer_1_player_b": .6, "commitment_player_b": 1, "fabricated_player_b": 1},
		},
		{
			name:       "garbage becomes the default REJECT",
			scripts:    [2][]string{{"hello", "hello", "hello", "PROPOSE: book=1 hat=0 ball=0"}, {"REJECT", "ACCEPT"}},
			wantResult: "deal", want: [2]float64{0.5430642722181345, 0.265806578048861}, wantErrors: 3,
			wantMetric: map[string]float64{"defaulted_player_a": 1, "turns": 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := curatedParams(identicalIndex)
			p["rounds"] = 2
			rec := negotiationtest.Play(t, New(), 1, p, tt.scripts)
			out := rec.Outcome
			negotiationtest.CheckOutcome(t, out, tt.wantResult, tt.want, tt.wantMetric)
			negotiationtest.CheckAbsent(t, out, tt.wantAbsent...)
			if tt.wantTerms != nil {
				got, want := out.Terms.(Terms), tt.wantTerms.(Terms)
				if got.Proposer != want.Proposer || !slices.Equal(got.Items["player_a"], want.Items["player_a"]) || !slices.Equal(got.Items["player_b"], want.Items["player_b"]) {
					t.Errorf("terms: got %+v, want %+v", got, want)
				}
			}
			if errs := negotiationtest.ValidationErrors(rec); errs[0]+errs[1] != tt.wantErrors {
				t.Errorf("validation errors: got %d, want %d", errs[0]+errs[1], tt.wantErrors)
			}
		})
	}
}

func TestConformance(t *testing.T) { negotiationtest.CheckConformance(t, New()) }

func TestCurated(t *testing.T) {
	cur := negotiationtest.CheckCurated(t, Curated, func(s Scenario) string { return s.ID }, Scenario.Validate)
	if cur[identicalIndex].Values != identical.Values || cur[identicalIndex].Counts != identical.Counts {
		t.Errorf("scenario %d is %+v, the tests expect %+v", identicalIndex, cur[identicalIndex], identical)
	}
}

func TestSample(t *testing.T) {
	for seed := range uint64(500) {
		s := Sample(negotiation.Rand(seed, 1))
		if err := s.Validate(); err != nil {
			t.Fatalf("seed %d: %+v: %v", seed, s, err)
		}
		if n := s.Counts[0] + s.Counts[1] + s.Counts[2]; n < 5 || n > 7 {
			t.Errorf("seed %d: %d items, want 5..7", seed, n)
		}
		if s.Values[0] == s.Values[1] {
			t.Errorf("seed %d: identical values %v", seed, s.Values[0])
		}
	}
}

func TestBriefingGolden(t *testing.T) {
	negotiationtest.CheckBriefingGolden(t, New(), curatedParams(0), roles, *update)
}

func TestRepliesMatchGrammar(t *testing.T) { negotiationtest.CheckScriptedGrammar(t, New(), 20) }

func FuzzMove(f *testing.F) {
	for _, s := range []string{"PROPOSE: book=1 hat=0 ball=2", "SAY: hi\nACCEPT", "PROPOSE: book=9 hat=0 ball=0", "PROPOSE: hat=1, ball=1, book=0", "WALK"} {
		f.Add(s, uint8(0), false)
	}
	seats := negotiation.TwoSeats(names, roles)
	rules := negotiation.SplitRules{Pool: frontier.pool(), Seats: seats}
	f.Fuzz(func(t *testing.T, text string, seat uint8, structured bool) {
		negotiationtest.CheckGrammar(t, rules, int(seat%2), structured, text)
	})
}

func TestStrategicBeatsNaive(t *testing.T) { negotiationtest.CheckStrategicBeatsNaive(t, New()) }

func TestStrategicAboveFloor(t *testing.T) { negotiationtest.CheckStrategicAboveFloor(t, New(), 20) }

// TestStructuredLegal checks that structured-only turns list every valid
// reply in Legal, each of which parses, and ACCEPT only when it is legal.
func TestStructuredLegal(t *testing.T) {
	p := curatedParams(identicalIndex) // counts 1, 2, 2: 18 splits
	p["structured_only"] = true
	p["rounds"] = 1
	rec := negotiationtest.Play(t, New(), 1, p, [2][]string{{"PROPOSE: book=1 hat=0 ball=0"}, {"REJECT"}})
	var notes []engine.Event
	for _, e := range rec.Events {
		if e.Kind == engine.KindNotification {
			notes = append(notes, e)
		}
	}
	if len(notes) != 2 {
		t.Fatalf("got %d notifications, want 2", len(notes))
	}
	for i, n := range notes {
		want := 18 + 2 + i // the second seat may also ACCEPT
		if len(n.Legal) != want {
			t.Errorf("notification %d: %d legal replies, want %d: %v", i, len(n.Legal), want, n.Legal)
		}
		if got := slices.Contains(n.Legal, "ACCEPT"); got != (i == 1) {
			t.Errorf("notification %d: ACCEPT legal %v, want %v", i, got, i == 1)
		}
		rules := negotiation.SplitRules{Pool: identical.pool()}
		for _, l := range n.Legal {
			r, err := negotiation.ParseReply(l, true)
			if err == nil && r.Kind == negotiation.KindPropose {
				_, err = rules.ParseTerms(n.Seat, r.Terms)
			}
			if err != nil {
				t.Errorf("legal reply %q does not parse: %v", l, err)
			}
		}
	}
}

func TestRecordRescore(t *testing.T) { negotiationtest.CheckRecordRescore(t, New(), Rescore) }
