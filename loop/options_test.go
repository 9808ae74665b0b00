package loop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/model/builtin"
)

// TestDefaultEnvParams: a negotiation game named without parameters gets
// the built-in model's when the run plays the built-in model, the default
// environment always does, and explicit parameters or other environments
// are left alone.
func TestDefaultEnvParams(t *testing.T) {
	explicit := map[string]any{"rounds": 2}
	for _, c := range []struct {
		name, env, model string
		params           map[string]any
		want             map[string]any
	}{
		{"default env, built-in model", DefaultEnv, "", nil, BuiltinParams()},
		{"default env, a user's model", DefaultEnv, "/m.gguf", nil, BuiltinParams()},
		{"another game, built-in model", "craigslist", "", nil, BuiltinParams()},
		{"a versioned id, built-in model", "marketplace_v1", "", nil, BuiltinParams()},
		{"another game, a user's model", "dealornodeal", "/m.gguf", nil, nil},
		{"explicit parameters", "craigslist", "", explicit, explicit},
		{"not a negotiation game", "werewolf", "", nil, nil},
	} {
		o := Options{}.Defaults()
		o.Rollout.Env, o.Rollout.Model, o.Rollout.Params = c.env, c.model, c.params
		o.applyEnvDefaults()
		if !reflect.DeepEqual(o.Rollout.Params, c.want) {
			t.Errorf("%s: params %v, want %v", c.name, o.Rollout.Params, c.want)
		}
	}
}

// TestDefaultOpponentsFollowTheEnv: the default league and evaluation
// opponents (the negotiation games' naive and strategic scripts) become
// the game's own scripts where it has none of them; a user's choice stays.
func TestDefaultOpponentsFollowTheEnv(t *testing.T) {
	for _, c := range []struct {
		env                  string
		userLeague           []string
		wantLeague, wantEval []string
	}{
		{"dealornodeal", nil, []string{"naive", "strategic"}, []string{"scripted:naive", "scripted:strategic"}},
		{"werewolf", nil, []string{"heuristic"}, []string{"scripted:heuristic"}},
		{"sotopia", nil, []string{"scripted"}, []string{"scripted:scripted"}},
		{"werewolf", []string{"random"}, []string{"random"}, []string{"scripted:heuristic"}},
	} {
		o := Options{}.Defaults()
		o.Rollout.Env = c.env
		if c.userLeague != nil {
			o.League.Scripted = c.userLeague
		}
		o.applyEnvDefaults()
		if !reflect.DeepEqual(o.League.Scripted, c.wantLeague) || !reflect.DeepEqual(o.Eval.Opponents, c.wantEval) {
			t.Errorf("%s, league %v: league scripts %v and eval opponents %v, want %v and %v",
				c.env, c.userLeague, o.League.Scripted, o.Eval.Opponents, c.wantLeague, c.wantEval)
		}
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", c.env, err)
		}
	}
}

// TestAutoContexts: a run's contexts 0 becomes 2 for a small model file
// decoded on the CPU with one thread and several episodes in flight, 1
// otherwise; a resumed config without the key stays on one.
func TestAutoContexts(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	small, large := file("small.gguf", 4<<20), file("large.gguf", SmallModelBytes+1)
	tests := []struct {
		name             string
		model            string
		gpu, threads, in int
		want             int
	}{
		{"small on the CPU", small, 0, 1, 8, 2},
		{"large", large, 0, 1, 8, 1},
		{"missing file", filepath.Join(dir, "none.gguf"), 0, 1, 8, 1},
		{"on a GPU", small, -1, 1, 8, 1},
		{"two threads", small, 0, 2, 8, 1},
		{"one episode in flight", small, 0, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := RolloutOptions{}.Defaults()
			r.Model, r.GPULayers, r.Threads, r.Parallel = tt.model, tt.gpu, tt.threads, tt.in
			if got := AutoContexts(r); got != tt.want {
				t.Errorf("AutoContexts = %d, want %d", got, tt.want)
			}
		})
	}
	r := RolloutOptions{}.Defaults()
	r.Parallel, r.Contexts = 2, 3
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "contexts 3") {
		t.Errorf("contexts beyond parallel: %v", err)
	}
}

// TestLeagueScriptsExample: the benchmark's league config decodes strictly,
// validates, and draws the policy against the scripts alone, on either
// seat — never the base, a snapshot or self-play.
func TestLeagueScriptsExample(t *testing.T) {
	o := Options{}.Defaults()
	if err := strictyaml.DecodeFile("../examples/league-scripts.yaml", &o); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	lg := &league{o: o.League, seed: 7, seats: 2, lo: 0, hi: 1}
	lg.prepare(LeagueState{Reward: map[string]float64{"scripted:naive": 0.9, "scripted:strategic": 0.4}})
	met := map[string]int{}
	seats := map[int]int{}
	for i := range 2000 {
		seat, op := lg.draw(i)
		if op == nil {
			t.Fatalf("episode %d: self-play drawn", i)
		}
		met[op.name]++
		seats[seat]++
	}
	if len(met) != 2 || met["scripted:strategic"] <= met["scripted:naive"] || seats[0] == 0 || seats[1] == 0 {
		t.Errorf("draws %v on seats %v: want both scripts, the harder one more often, on both seats", met, seats)
	}
}

// TestLeaguePricesExample: the price games' league config decodes
// strictly, validates, and its parameters deal Marketplace and Craigslist
// episodes stated in units of their public price.
func TestLeaguePricesExample(t *testing.T) {
	o := Options{}.Defaults()
	if err := strictyaml.DecodeFile("../examples/league-prices.yaml", &o); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"marketplace", "craigslist"} {
		g, err := envs.Find(id)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := g.NewEpisode(3, engine.Params(o.Rollout.Params))
		if err != nil {
			t.Fatalf("%s: %v", g.ID(), err)
		}
		b, _ := json.Marshal(ep.Scenario())
		if !strings.Contains(string(b), `":100,`) {
			t.Errorf("%s: scenario %s does not state its public price as 100", g.ID(), b)
		}
	}
}

// TestLeagueDrawSkipsZeroWeight: when the draw probabilities sum to less
// than 1 (rounding), a draw past their sum goes to the last member that
// can be drawn, never to a zero-weight one after it.
func TestLeagueDrawSkipsZeroWeight(t *testing.T) {
	lg := &league{o: LeagueOptions{}, seed: 3, seats: 2, lo: 0, hi: 1}
	lg.pool = []opponent{{name: "scripted:naive"}, {name: "scripted:strategic"}, {name: "base"}}
	// A shortfall far larger than rounding's, so that draws land past the sum.
	lg.probs = []float64{0.5, 0.45, 0}
	met := map[string]int{}
	for i := range 4000 {
		_, op := lg.draw(i)
		met[op.name]++
	}
	if met["base"] != 0 || met["scripted:strategic"] < 1900 {
		t.Errorf("draws %v: want no zero-weight base and the shortfall on the strategic script", met)
	}
}

// TestLeagueDrawGroups: the episodes of one GRPO group meet the same
// opponent from the same seat, and the groups still spread over the pool
// and the seats; a group size of 1 draws each episode on its own.
func TestLeagueDrawGroups(t *testing.T) {
	pool := []opponent{{name: "scripted:naive"}, {name: "scripted:strategic"}}
	single := &league{o: LeagueOptions{}, seed: 3, seats: 2, group: 1, pool: pool, probs: []float64{0.5, 0.5}}
	grouped := &league{o: LeagueOptions{}, seed: 3, seats: 2, group: 4, pool: pool, probs: []float64{0.5, 0.5}}
	type key struct {
		seat int
		name string
	}
	met, changes := map[key]int{}, 0
	for i := range 400 {
		seat, op := grouped.draw(i)
		first, fop := grouped.draw(i - i%4)
		if seat != first || op.name != fop.name {
			t.Fatalf("episode %d draws seat %d %s, its group's first seat %d %s", i, seat, op.name, first, fop.name)
		}
		met[key{seat, op.name}]++
		if i > 0 {
			s0, o0 := single.draw(i - 1)
			s1, o1 := single.draw(i)
			if s0 != s1 || o0.name != o1.name {
				changes++
			}
		}
	}
	if len(met) != 4 {
		t.Errorf("groups met %v: want every seat against every script", met)
	}
	if changes < 200 {
		t.Errorf("group size 1: %d of 399 consecutive episodes differ in their draw, want them drawn apart", changes)
	}
}

// TestBuiltinParamsByGame: the negotiation games of a catalog get the
// built-in model's parameters by name, the others none; another model
// none at all.
func TestBuiltinParamsByGame(t *testing.T) {
	copyOf := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(copyOf, builtin.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := BuiltinParamsByGame("", envs.All()); got != nil {
		t.Errorf("no model: %v", got)
	}
	got := BuiltinParamsByGame(copyOf, envs.All())
	for _, name := range envs.Negotiation {
		if p := got[name]; p == nil || p["structured_only"] != true {
			t.Errorf("%s: params %v, want the built-in model's", name, p)
		}
	}
	if len(got) != len(envs.Negotiation) {
		t.Errorf("params for %d games, want the %d negotiation games'", len(got), len(envs.Negotiation))
	}
}

// TestWithBuiltinParams: the built-in model's copy gets its parameters
// on the negotiation games without any; other models and set parameters
// are left alone.
func TestWithBuiltinParams(t *testing.T) {
	dir := t.TempDir()
	copyOf := filepath.Join(dir, "model.gguf")
	other := filepath.Join(dir, "other.gguf")
	if err := os.WriteFile(copyOf, builtin.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := engine.Params{"rounds": 2}
	es := []arena.Env{{Name: "casino"}, {Name: "craigslist", Params: set}, {Name: "werewolf"}}
	WithBuiltinParams(other, es)
	if es[0].Params != nil {
		t.Errorf("another model got params %v", es[0].Params)
	}
	WithBuiltinParams(copyOf, es)
	if !reflect.DeepEqual(es[0].Params, engine.Params(BuiltinParams())) || !reflect.DeepEqual(es[1].Params, set) || es[2].Params != nil {
		t.Errorf("got %v, %v, %v; want the built-in params, the set ones, none", es[0].Params, es[1].Params, es[2].Params)
	}
}
