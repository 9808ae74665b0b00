package arena

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

func TestPreset(t *testing.T) {
	paper := []string{"scripted:naive", "scripted:strategic", "base"}
	tests := []struct {
		name     string
		protocol string
		edit     func(*Config)
		err      string // "" when the preset applies
	}{
		{name: "default config", protocol: "paper"},
		{name: "six games", protocol: "paper", edit: func(c *Config) {
			c.Envs = nil
			for _, n := range []string{"dealornodeal", "casino", "craigslist", "jobinterview", "calendar", "marketplace"} {
				c.Envs = append(c.Envs, Env{Name: n})
			}
		}},
		{name: "already applied", protocol: "paper", edit: func(c *Config) { c.Episodes, c.ScenarioCount, c.Opponents = 50, 10, paper }},
		{name: "other episodes", protocol: "paper", edit: func(c *Config) { c.Episodes = 20 }, err: "episodes 20 given"},
		{name: "other scenario count", protocol: "paper", edit: func(c *Config) { c.ScenarioCount = 4 }, err: "scenario_count 4 given"},
		{name: "other opponents", protocol: "paper", edit: func(c *Config) { c.Opponents = []string{"scripted:random"} }, err: "opponents"},
		{name: "seeds", protocol: "paper", edit: func(c *Config) { c.Envs[0].Scenarios = ScenariosSeeds }, err: "scenarios: seeds"},
		{name: "no curated set", protocol: "paper", edit: func(c *Config) { c.Envs = []Env{{Name: "werewolf"}} }, err: "no curated scenario set"},
		{name: "unknown", protocol: "short", err: `protocol "short"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			if tt.edit != nil {
				tt.edit(&c)
			}
			err := Preset(tt.protocol, &c)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// 10 scenarios × 5 trials per pairing, 3 opponents: 150 games
			// per player, side and environment.
			if c.Episodes != 50 || c.ScenarioCount != 10 || !slices.Equal(c.Opponents, paper) {
				t.Errorf("got episodes %d, scenario_count %d, opponents %v; want 50, 10, %v", c.Episodes, c.ScenarioCount, c.Opponents, paper)
			}
			for _, e := range c.Envs {
				if e.Scenarios != ScenariosCurated {
					t.Errorf("env %s: scenarios %q, want curated", e.Name, e.Scenarios)
				}
			}
			if err := c.Validate(); err != nil {
				t.Errorf("applied preset does not validate: %v", err)
			}
		})
	}
}

// TestProtocolAfterwards: a config whose protocol was applied and then
// changed against it (--scenarios seeds after the preset) is invalid; no
// protocol leaves the defaults as they were.
func TestProtocolAfterwards(t *testing.T) {
	c := DefaultConfig()
	c.Protocol = ProtocolPaper
	if err := c.ApplyProtocol(); err != nil {
		t.Fatal(err)
	}
	c.Envs[0].Scenarios = ScenariosSeeds
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "seeds") {
		t.Errorf("got %v, want the protocol's error", err)
	}
	d := DefaultConfig()
	if err := d.ApplyProtocol(); err != nil || d.Episodes != 64 || d.ScenarioCount != 0 || !slices.Equal(d.Opponents, DefaultConfig().Opponents) {
		t.Errorf("no protocol: got %v, episodes %d, scenario_count %d, opponents %v; want the defaults", err, d.Episodes, d.ScenarioCount, d.Opponents)
	}
}

func TestEpisodeParams(t *testing.T) {
	curated := engine.Params{"scenario_set": "curated"}
	tests := []struct {
		name    string
		params  engine.Params
		curated bool
		n, k    int
		want    any // the scenario parameter; nil: none
	}{
		{name: "default", params: curated, curated: true, n: 0, k: 7, want: nil},
		{name: "first trial", params: curated, curated: true, n: 10, k: 3, want: 3},
		{name: "third trial", params: curated, curated: true, n: 10, k: 23, want: 3},
		{name: "last", params: curated, curated: true, n: 10, k: 49, want: 9},
		{name: "seeds", params: nil, curated: false, n: 10, k: 3, want: nil},
		{name: "chosen", params: engine.Params{"scenario_set": "curated", "scenario": 5}, curated: true, n: 10, k: 3, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{params: tt.params, curated: tt.curated}
			got, ok := e.episodeParams(tt.n, tt.k)["scenario"]
			if tt.want == nil && ok || tt.want != nil && got != tt.want {
				t.Errorf("scenario %v (%v), want %v", got, ok, tt.want)
			}
			if tt.curated && e.episodeParams(tt.n, tt.k)["scenario_set"] != "curated" {
				t.Error("scenario_set lost")
			}
		})
	}
}

// TestScenarioCount: with a count, the episodes of a pairing cycle over
// the first scenarios of the curated set, and a count past the set's size
// is refused before anything is played.
func TestScenarioCount(t *testing.T) {
	o := scriptedOptions(4, Env{Name: "craigslist"})
	o.ScenarioCount = 2
	o.Records = true
	dir := t.TempDir()
	evaluate(t, o, dir, []Player{scriptedPlayer("naive")}, []Player{scriptedPlayer("strategic")})
	f, err := os.Open(filepath.Join(dir, RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	byEpisode := map[uint64]string{}
	for dec := json.NewDecoder(f); dec.More(); {
		var r engine.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		s, _ := json.Marshal(r.Scenario)
		seen[string(s)] = true
		if prev, ok := byEpisode[r.Seed]; ok && prev != string(s) {
			t.Errorf("deal seed %d played two scenarios", r.Seed)
		}
		byEpisode[r.Seed] = string(s)
	}
	// Episodes 0 and 2 play scenario 0, 1 and 3 scenario 1.
	if len(seen) != 2 || len(byEpisode) != 4 {
		t.Errorf("got %d scenarios over %d deals, want 2 over 4", len(seen), len(byEpisode))
	}
	o.ScenarioCount = 1000
	if _, err := Evaluate(context.Background(), o, "", []Player{scriptedPlayer("naive")}, []Player{scriptedPlayer("strategic")}, Hooks{}); err == nil || !strings.Contains(err.Error(), "scenario_count 1000") {
		t.Errorf("got %v, want a scenario_count error", err)
	}
}
