package negotiationtest

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// The checks below are the tests every game of the suite runs on itself;
// each game's test file calls them from its own TestXxx functions and
// keeps only the cases that are specific to it.

// Near reports whether two rewards or metrics agree to 1e-9.
func Near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// CheckOutcome checks an episode's result (fatal when it differs), both
// rewards, and every metric in metrics (which must be present).
func CheckOutcome(t *testing.T, out engine.Outcome, result string, rewards [2]float64, metrics map[string]float64) {
	t.Helper()
	if out.Result != result {
		t.Fatalf("result: got %q, want %q", out.Result, result)
	}
	for i := range 2 {
		if !Near(out.Rewards[i], rewards[i]) {
			t.Errorf("reward %d: got %v, want %v", i, out.Rewards[i], rewards[i])
		}
	}
	for k, v := range metrics {
		if got, ok := out.Metrics[k]; !ok || !Near(got, v) {
			t.Errorf("metric %s: got %v (present %v), want %v", k, got, ok, v)
		}
	}
}

// CheckRewards checks both rewards of an outcome, naming the seats by role.
func CheckRewards(t *testing.T, out engine.Outcome, roles [2]string, want [2]float64) {
	t.Helper()
	for i := range 2 {
		if !Near(out.Rewards[i], want[i]) {
			t.Errorf("reward of %s: got %v, want %v", roles[i], out.Rewards[i], want[i])
		}
	}
}

// CheckUtilities checks both seats' utility_<role> metrics of an outcome.
func CheckUtilities(t *testing.T, out engine.Outcome, roles [2]string, want [2]float64) {
	t.Helper()
	for i := range 2 {
		if got := out.Metrics["utility_"+roles[i]]; !Near(got, want[i]) {
			t.Errorf("utility of %s: got %v, want %v", roles[i], got, want[i])
		}
	}
}

// ValidationErrors counts the validation_error events of each seat.
func ValidationErrors(rec *engine.Record) [2]int {
	var errs [2]int
	for _, e := range rec.Events {
		if e.Kind == engine.KindValidationError {
			errs[e.Seat]++
		}
	}
	return errs
}

// CheckConformance runs the engine's conformance suite on g with opts, and
// again on the curated scenarios in structured-only mode, long and
// compact, and compact with hints.
func CheckConformance(t *testing.T, g engine.Game, opts ...enginetest.Options) {
	t.Helper()
	enginetest.Conformance(t, g, opts...)
	t.Run("structured_curated", func(t *testing.T) {
		enginetest.Conformance(t, g, enginetest.Options{Seeds: 10, Params: engine.Params{"structured_only": true, "scenario_set": "curated"}})
	})
	t.Run("compact_curated", func(t *testing.T) {
		enginetest.Conformance(t, g, enginetest.Options{Seeds: 10, Params: engine.Params{"structured_only": true, "compact": true, "scenario_set": "curated"}})
	})
	t.Run("hints_curated", func(t *testing.T) {
		enginetest.Conformance(t, g, enginetest.Options{Seeds: 10, Params: engine.Params{"structured_only": true, "compact": true, "hints": true, "scenario_set": "curated"}})
	})
}

// CheckCurated loads a game's curated set and checks that it holds at
// least 20 valid scenarios with distinct, non-empty ids; it returns the
// set for the game's own checks.
func CheckCurated[S any](t *testing.T, curated func() ([]S, error), id func(S) string, validate func(S) error) []S {
	t.Helper()
	cur, err := curated()
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) < 20 {
		t.Errorf("got %d curated scenarios, want at least 20", len(cur))
	}
	ids := map[string]bool{}
	for _, s := range cur {
		if err := validate(s); err != nil {
			t.Errorf("%s: %v", id(s), err)
		}
		if id(s) == "" || ids[id(s)] {
			t.Errorf("id %q empty or repeated", id(s))
		}
		ids[id(s)] = true
	}
	return cur
}

// CheckSample checks that the sampler deals valid scenarios for seeds
// 0..seeds-1 (from the generator NewEpisode gives it).
func CheckSample[S any](t *testing.T, seeds int, sample func(*rand.Rand) S, validate func(S) error) {
	t.Helper()
	for seed := range uint64(seeds) {
		if s := sample(negotiation.Rand(seed, 1)); validate(s) != nil {
			t.Fatalf("seed %d: %+v: %v", seed, s, validate(s))
		}
	}
}

// CheckBriefingGolden compares both seats' briefings of one episode with
// params p, free-text, structured-only, compact (structured) and compact
// with hints, against testdata/<role>[_structured|_compact|_hints].golden.
func CheckBriefingGolden(t *testing.T, g engine.Game, p engine.Params, roles [2]string, update bool) {
	t.Helper()
	for _, v := range []struct {
		suffix                     string
		structured, compact, hints bool
	}{{"", false, false, false}, {"_structured", true, false, false}, {"_compact", true, true, false}, {"_hints", true, true, true}} {
		q := engine.Params{"structured_only": v.structured}
		if v.compact {
			q["compact"] = true
		}
		if v.hints {
			q["hints"] = true
		}
		for k, v := range p {
			q[k] = v
		}
		rec := Play(t, g, 0, q, [2][]string{{"WALK"}, nil})
		for i, b := range Briefings(rec) {
			Golden(t, roles[i]+v.suffix+".golden", b, update)
		}
	}
}

// CheckScriptedGrammar plays seeds 0..seeds-1 of g for three pairings of
// the scripted policies and checks every accepted reply against its
// grammar (CheckRepliesMatchGrammar).
func CheckScriptedGrammar(t *testing.T, g engine.Game, seeds int) {
	t.Helper()
	for _, agents := range [][]string{{"strategic", "naive"}, {"random", "random"}, {"naive", "strategic"}} {
		for seed := range uint64(seeds) {
			CheckRepliesMatchGrammar(t, enginetest.PlayScripted(t, g, seed, nil, agents...))
		}
	}
}

// CheckStrategicAboveFloor plays the strategic policy against each
// scripted policy, in both seats, on seeds 0..seeds-1, and wants none of
// its proposals worth no more to it than no deal (below_floor_ 0); random
// play against itself must show the metric.
func CheckStrategicAboveFloor(t *testing.T, g engine.Game, seeds int) {
	t.Helper()
	for _, agents := range [][]string{{"strategic", "strategic"}, {"strategic", "naive"}, {"random", "strategic"}, {"random", "random"}} {
		for seed := range uint64(seeds) {
			rec := enginetest.PlayScripted(t, g, seed, nil, agents...)
			for i, seat := range rec.Seats {
				n, ok := rec.Outcome.Metrics["below_floor_"+seat.Role]
				switch {
				case !ok:
					t.Fatalf("%v seed %d: no below_floor_%s in %v", agents, seed, seat.Role, rec.Outcome.Metrics)
				case agents[i] == "strategic" && n != 0:
					t.Errorf("%v seed %d: the strategic %s made %g proposals no better than no deal", agents, seed, seat.Role, n)
				}
			}
		}
	}
}

// CheckStrategicBeatsNaive plays strategic against naive on 200 sampled
// scenarios in both seatings and wants the strategic policy's mean reward
// above the naive one's in every role.
func CheckStrategicBeatsNaive(t *testing.T, g engine.Game) {
	t.Helper()
	h, err := negotiation.PlayHeadToHead(context.Background(), g, nil, "strategic", "naive", 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		h.WriteTable(os.Stdout)
	}
	for r := range h.Roles {
		if s, n := h.Scores[0][r].Mean, h.Scores[1][r].Mean; s <= n {
			t.Errorf("%s: strategic mean reward %.3f, naive %.3f; want strategic > naive", h.Roles[r], s, n)
		}
	}
}

// CheckAbsent checks that an outcome reports none of the metrics keys
// (those of a side that never proposed or never wrote a message).
func CheckAbsent(t *testing.T, out engine.Outcome, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := out.Metrics[k]; ok {
			t.Errorf("metric %s: got %v, want none", k, v)
		}
	}
}

// CheckAnchor plays the game with anchor_price 100 (Params.AnchorPrice):
// every deal, sampled and curated, must state its public price as 100 and
// its other prices in proportion (within the rounding to whole units),
// pass the conformance suite, and pay the strategic and naive scripts
// about what the deal in dollars pays them (mean over 60 deals within
// 0.05 per seat: only the rounding of the restated prices and of the
// scripts' own offers differs). prices lists a scenario's public price
// first, then its other prices.
func CheckAnchor[S any](t *testing.T, g engine.Game, prices func(S) []float64) {
	t.Helper()
	anchored := engine.Params{"anchor_price": 100}
	enginetest.Conformance(t, g, enginetest.Options{Seeds: 10, Params: anchored})
	for _, set := range []string{"sampled", "curated"} {
		var diff [2]float64
		const n = 60
		for seed := range uint64(n) {
			p := engine.Params{"scenario_set": set}
			q := engine.Params{"scenario_set": set, "anchor_price": 100}
			dollars := enginetest.PlayScripted(t, g, seed, p, "strategic", "naive")
			units := enginetest.PlayScripted(t, g, seed, q, "strategic", "naive")
			d, u := prices(dollars.Scenario.(S)), prices(units.Scenario.(S))
			if u[0] != 100 {
				t.Fatalf("%s seed %d: public price %v, want 100", set, seed, u[0])
			}
			for i := 1; i < len(d); i++ {
				if want := d[i] * 100 / d[0]; math.Abs(u[i]-want) > 0.5+1e-9 {
					t.Errorf("%s seed %d: price %d restated as %v, want %v ± 0.5", set, seed, i, u[i], want)
				}
			}
			for s := range 2 {
				diff[s] += (units.Outcome.Rewards[s] - dollars.Outcome.Rewards[s]) / n
			}
		}
		for s, d := range diff {
			if math.Abs(d) > 0.05 {
				t.Errorf("%s: seat %d's mean reward moves by %+.3f with the deal restated, want within 0.05", set, s, d)
			}
		}
	}
	if _, err := g.NewEpisode(1, engine.Params{"anchor_price": -1}); err == nil {
		t.Errorf("anchor_price -1: accepted")
	}
}
