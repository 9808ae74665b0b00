package sotopia

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run go test -update and review the diff):\ngot:\n%s", name, got)
	}
}

func TestConformance(t *testing.T) {
	enginetest.Conformance(t, New())
}

func terms(t *testing.T, rec *engine.Record) Terms {
	t.Helper()
	tm, ok := rec.Outcome.Terms.(Terms)
	if !ok {
		t.Fatalf("terms are %T, want Terms", rec.Outcome.Terms)
	}
	return tm
}

func TestEpisodeEnds(t *testing.T) {
	leaver := func(engine.Seat, uint64) engine.Agent {
		n := 0
		return engine.AgentFunc(func(_ context.Context, tn engine.Turn) (engine.Action, error) {
			n++
			text := "speak: hi"
			if n == 3 {
				text = "leave"
			}
			return engine.Action{NotificationID: tn.Notification.ID, Text: text}, nil
		})
	}
	garbage := func(engine.Seat, uint64) engine.Agent {
		return engine.AgentFunc(func(_ context.Context, tn engine.Turn) (engine.Action, error) {
			return engine.Action{NotificationID: tn.Notification.ID, Text: "I think I will say hello"}, nil
		})
	}
	custom := func(mk func(engine.Seat, uint64) engine.Agent) engine.Cast {
		return func(s engine.Seat) (engine.Agent, string, error) { return mk(s, 0), "test", nil }
	}
	scripted, _ := engine.ScriptedCast(New(), []string{"scripted"}, 1)
	silent, _ := engine.ScriptedCast(New(), []string{"silent"}, 1)
	tests := []struct {
		name      string
		cast      engine.Cast
		params    engine.Params
		wantEnd   string
		wantTurns int
		wantLeft  int
	}{
		{"turn limit", scripted, nil, "turn_limit", 20, -1},
		{"custom turn limit", scripted, engine.Params{"max_turns": 7}, "turn_limit", 7, -1},
		{"leave", custom(leaver), nil, "left", 5, 0},
		{"silence after more than 2 none", silent, nil, "silence", 3, -1},
		{"max_none 0", silent, engine.Params{"max_none": 0}, "silence", 1, -1},
		{"unparsable replies default to none", custom(garbage), nil, "silence", 3, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := engine.Play(context.Background(), New(), 5, tt.params, tt.cast, engine.DefaultOptions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			tm := terms(t, rec)
			if tm.End != tt.wantEnd || len(tm.Turns) != tt.wantTurns || tm.LeftBy != tt.wantLeft {
				t.Errorf("got end %q after %d turns (left by %d), want %q after %d (left by %d)", tm.End, len(tm.Turns), tm.LeftBy, tt.wantEnd, tt.wantTurns, tt.wantLeft)
			}
			for i, tr := range tm.Turns {
				if tr.Seat != i%2 || tr.Turn != i+1 {
					t.Errorf("turn %d: got seat %d turn %d, want alternating seats", i, tr.Seat, tr.Turn)
				}
			}
			if rec.Outcome.Result != "unjudged" || rec.Outcome.Rewards[0] != 0 || tm.Judge != "none" {
				t.Errorf("got result %q rewards %v judge %q, want unjudged, 0, none", rec.Outcome.Result, rec.Outcome.Rewards, tm.Judge)
			}
		})
	}
	t.Run("invalid replies are validation errors then the default", func(t *testing.T) {
		rec, _ := engine.Play(context.Background(), New(), 5, nil, custom(garbage), engine.DefaultOptions(), nil)
		var verr, def int
		for _, e := range rec.Events {
			switch e.Kind {
			case engine.KindValidationError:
				verr++
				if !strings.Contains(e.Text, `write "speak: <text>"`) {
					t.Errorf("validation error %q does not say what to write", e.Text)
				}
			case engine.KindDefault:
				def++
			}
		}
		if def != 3 || verr != 9 {
			t.Errorf("got %d defaults and %d validation errors, want 3 and 9", def, verr)
		}
	})
}

func TestSeedPicksScenarioAndPair(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(60) {
		ep, err := New().NewEpisode(seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := ep.Scenario().(Setup)
		seen[s.Scenario.ID] = true
		again, _ := New().NewEpisode(seed, nil)
		a, _ := json.Marshal(again.Scenario())
		b, _ := json.Marshal(s)
		if string(a) != string(b) {
			t.Fatalf("seed %d: two deals differ", seed)
		}
	}
	if len(seen) < 20 {
		t.Errorf("60 seeds dealt %d scenarios, want at least 20", len(seen))
	}
	pinned := []struct {
		name   string
		params engine.Params
		check  func(Setup) bool
	}{
		{"scenario and pair", engine.Params{"scenario": "neg-used-bike", "pair": 3}, func(s Setup) bool { return s.Scenario.ID == "neg-used-bike" && s.Pair == 3 }},
		{"characters", engine.Params{"characters": []string{"olga-petrova", "liam-oconnell"}}, func(s Setup) bool {
			return s.Characters[0].ID == "olga-petrova" && s.Characters[1].ID == "liam-oconnell" && s.Pair == -1
		}},
		{"hard", engine.Params{"hard": true}, func(s Setup) bool { return s.Scenario.Hard }},
		{"category", engine.Params{"category": "exchange"}, func(s Setup) bool { return s.Scenario.Category == "exchange" }},
	}
	for _, tt := range pinned {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(10) {
				ep, err := New().NewEpisode(seed, tt.params)
				if err != nil {
					t.Fatal(err)
				}
				if s := ep.Scenario().(Setup); !tt.check(s) {
					t.Errorf("seed %d: got scenario %s pair %d characters %s,%s", seed, s.Scenario.ID, s.Pair, s.Characters[0].ID, s.Characters[1].ID)
				}
			}
		})
	}
	bad := []engine.Params{
		{"scenario": "no-such"}, {"pair": 5}, {"characters": []string{"a"}}, {"characters": []string{"olga-petrova", "nobody"}},
		{"characters": []string{"olga-petrova", "olga-petrova"}}, {"category": "chess"}, {"max_turns": 0}, {"colour": "red"},
	}
	for _, p := range bad {
		if _, err := New().NewEpisode(1, p); err == nil {
			t.Errorf("params %v: got no error", p)
		}
	}
}

func TestBriefingGolden(t *testing.T) {
	for _, rel := range Relationships {
		ep := episodeWith(t, rel)
		for seat := range 2 {
			golden(t, "briefing_"+string(rel)+"_"+[]string{"agent_1", "agent_2"}[seat]+".txt", ep.Briefing(seat).Text())
		}
	}
}

// episodeWith deals neg-used-bike pair 0 with its relationship replaced.
func episodeWith(t *testing.T, rel Relationship) *Episode {
	t.Helper()
	e, err := New().NewEpisode(1, engine.Params{"scenario": "neg-used-bike", "pair": 0})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.(*Episode)
	ep.setup.Scenario.Relationship = rel
	return ep
}

func TestNamed(t *testing.T) {
	for id, want := range map[string]bool{"sotopia": true, ID: true, "sotopia_v2": true, "casino_v1": false, "sotopian": false} {
		if got := Named(id); got != want {
			t.Errorf("Named(%q) = %v, want %v", id, got, want)
		}
	}
}
