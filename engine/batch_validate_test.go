package engine_test

import (
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
)

func TestScriptedRunValidate(t *testing.T) {
	ok := engine.ScriptedRun{Game: sealedbid.New(), Agents: []string{"scripted"}, Episodes: 1, Parallel: 1, Options: engine.DefaultOptions()}
	for _, tc := range []struct {
		name string
		edit func(*engine.ScriptedRun)
		want string // "" valid
	}{
		{"valid", func(*engine.ScriptedRun) {}, ""},
		{"one per seat", func(r *engine.ScriptedRun) { r.Agents = []string{"random", "random", "random"} }, ""},
		{"no game", func(r *engine.ScriptedRun) { r.Game = nil }, "no game"},
		{"no episodes", func(r *engine.ScriptedRun) { r.Episodes = 0 }, "episodes 0"},
		{"no parallel", func(r *engine.ScriptedRun) { r.Parallel = 0 }, "parallel 0"},
		{"negative retries", func(r *engine.ScriptedRun) { r.Options.MaxRetries = -1 }, "max_retries -1"},
		{"agent count", func(r *engine.ScriptedRun) { r.Agents = []string{"random", "random"} }, "2 agents for the 3 seats"},
		{"unknown policy", func(r *engine.ScriptedRun) { r.Agents = []string{"genius"} }, "genius"},
		{"bad params", func(r *engine.ScriptedRun) {
			r.Agents, r.Params = []string{"random", "random"}, engine.Params{"bidders": 1}
		}, "bidders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			err := r.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
