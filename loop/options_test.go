package loop

import (
	"reflect"
	"strings"
	"testing"
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

// TestDefaultContexts: contexts 0 becomes 2 for a model the run generates
// on the CPU (the built-in model uses a second core only through a second
// context) and 1 otherwise; a number given is kept.
func TestDefaultContexts(t *testing.T) {
	tests := []struct {
		name     string
		model    string
		gpu      int
		parallel int
		contexts int
		want     int
	}{
		{name: "generated on the CPU", parallel: 8, want: 2},
		{name: "one episode in flight", parallel: 1, want: 1},
		{name: "a model file", model: "m.gguf", parallel: 8, want: 1},
		{name: "on a GPU", gpu: -1, parallel: 8, want: 1},
		{name: "given", model: "m.gguf", parallel: 8, contexts: 4, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{}.Defaults()
			o.Rollout.Model, o.Rollout.GPULayers, o.Rollout.Parallel, o.Rollout.Contexts = tt.model, tt.gpu, tt.parallel, tt.contexts
			o.applyEnvDefaults()
			if o.Rollout.Contexts != tt.want {
				t.Errorf("contexts %d, want %d", o.Rollout.Contexts, tt.want)
			}
		})
	}
	r := RolloutOptions{}.Defaults()
	r.Parallel, r.Contexts = 2, 3
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "contexts 3") {
		t.Errorf("contexts beyond parallel: %v", err)
	}
}
