package engine_test

import (
	"slices"
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

func TestScriptedAgents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		list   []string
		params engine.Params
		want   []string
		err    string
	}{
		{"one name", []string{"random"}, nil, []string{"random"}, ""},
		{"names by seat", []string{"random", "shading", "random"}, nil, []string{"random", "shading", "random"}, ""},
		{"every seat", []string{"*=scripted:random"}, nil, []string{"scripted:random", "scripted:random", "scripted:random"}, ""},
		{"name over role over star", []string{"bidder2=scripted:shading", "bidder=scripted:random", "*=scripted"}, nil,
			[]string{"scripted:random", "scripted:shading", "scripted:random"}, ""},
		{"seat index", []string{"seat0=scripted:shading"}, nil, []string{"scripted:shading", "scripted", "scripted"}, ""},
		{"seats of the params", []string{"*=scripted"}, engine.Params{"bidders": 2}, []string{"scripted", "scripted"}, ""},
		{"a model", []string{"*=policy"}, nil, nil, "scripted policies only"},
		{"bad pair", []string{"seat0=", "x=y"}, nil, nil, "key=agent pairs"},
		{"bad params", []string{"*=scripted"}, engine.Params{"bidders": 1}, nil, "bidders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := engine.ScriptedAgents(sealedbid.New(), tc.params, tc.list)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got error %v, want one containing %q", err, tc.err)
			case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestScriptedConfigRun(t *testing.T) {
	zero := 0
	for _, tc := range []struct {
		name  string
		edit  func(*engine.ScriptedConfig)
		check func(engine.ScriptedRun) bool
		err   string
	}{
		{"defaults", func(*engine.ScriptedConfig) {}, func(r engine.ScriptedRun) bool {
			return slices.Equal(r.Agents, []string{"scripted"}) && r.Episodes == 1 && r.Seed == 1 && r.Parallel == 4 && r.Options == engine.DefaultOptions()
		}, ""},
		{"pairs", func(c *engine.ScriptedConfig) { c.Agents = []string{" seat0=scripted:random", "*=scripted "} }, func(r engine.ScriptedRun) bool {
			return slices.Equal(r.Agents, []string{"scripted:random", "scripted", "scripted"})
		}, ""},
		{"retries", func(c *engine.ScriptedConfig) { c.MaxRetries = &zero }, func(r engine.ScriptedRun) bool { return r.Options.MaxRetries == 0 }, ""},
		{"a model", func(c *engine.ScriptedConfig) { c.Agents = []string{"*=policy"} }, nil, "scripted policies only"},
		{"no episodes", func(c *engine.ScriptedConfig) { c.Episodes = 0 }, nil, "episodes 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := engine.DefaultScriptedConfig()
			tc.edit(&c)
			r, err := c.Run(sealedbid.New())
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got error %v, want one containing %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("got error %v", err)
			case tc.check != nil && !tc.check(r):
				t.Errorf("got %+v", r)
			}
		})
	}
}
