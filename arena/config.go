package arena

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/judge"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/sotopia"
)

// Config is a whole evaluation as `omar eval` runs it: the arena's
// options, the players as specs and where their models are (the YAML of
// omar eval --config; flags override it).
type Config struct {
	Options `yaml:",inline"`
	// Model is the base model of "base" and "adapter:" players.
	Model     string   `yaml:"model"`
	Players   []string `yaml:"players"`
	Opponents []string `yaml:"opponents"`
	// Out is the directory of results.jsonl (resume) and the reports.
	Out string `yaml:"out"`
	// Backend opens the players' and the judge's backends (threads, KV
	// cache, GPU layers, Ollama host, …).
	players.Backend `yaml:",inline"`
	AdapterScale    float32 `yaml:"adapter_scale"`
	// JudgeModel (a GGUF) or JudgeOllama scores SOTOPIA episodes.
	JudgeModel  string `yaml:"judge_model"`
	JudgeOllama string `yaml:"judge_ollama"`
	// Protocol names an evaluation protocol that fixes episodes, scenarios
	// and opponents (Preset; "" keeps them as given).
	Protocol string `yaml:"protocol"`
}

// DefaultConfig is omar eval without flags: the base model against the
// naive and strategic scripts on Craigslist.
func DefaultConfig() Config {
	c := Config{Options: Options{}.Defaults(), Backend: players.Backend{Contexts: 1}, AdapterScale: 1}
	c.Players, c.Opponents = []string{players.KindBase}, []string{"scripted:naive", "scripted:strategic"}
	c.Envs = []Env{{Name: "craigslist"}}
	return c
}

// DefaultScripts are the scripted policies of g an evaluation or a league
// opposes by default: all but the degenerate baselines (random, silent),
// unless they are all there is.
func DefaultScripts(g engine.Game) []string {
	var out, all []string
	for _, p := range g.Policies() {
		all = append(all, p.Name)
		if p.Name != "random" && p.Name != "silent" {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

// HasScripts reports whether g has every scripted policy names.
func HasScripts(g engine.Game, names ...string) bool {
	for _, n := range names {
		if _, err := engine.FindPolicy(g, n); err != nil {
			return false
		}
	}
	return true
}

// DefaultOpponents are an evaluation's opponents on the environments
// names when none are given: the negotiation games' naive and strategic
// scripts where every environment has them, else the DefaultScripts of
// the first that every other environment has too (Werewolf: heuristic).
func DefaultOpponents(names []string) []string {
	def := DefaultConfig().Opponents
	var games []engine.Game
	for _, n := range names {
		g, err := envs.Find(n)
		if err != nil {
			return def // Validate names the unknown environment
		}
		games = append(games, g)
	}
	all := func(names ...string) bool {
		for _, g := range games {
			if !HasScripts(g, names...) {
				return false
			}
		}
		return true
	}
	if len(games) == 0 || all("naive", "strategic") {
		return def
	}
	var out []string
	for _, s := range DefaultScripts(games[0]) {
		if all(s) {
			out = append(out, engine.ScriptedAgent(s))
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}

// FitOpponents gives environments without the naive and strategic
// scripts their own when c's opponents are the default ones
// (DefaultOpponents); opponents chosen otherwise are kept.
func (c *Config) FitOpponents() {
	if !slices.Equal(c.Opponents, DefaultConfig().Opponents) {
		return
	}
	var names []string
	for _, e := range c.Envs {
		names = append(names, e.Name)
	}
	c.Opponents = DefaultOpponents(names)
}

// Validate checks the options and that a judge is named only where an
// environment takes one.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	// Preset is idempotent: on a copy it finds what was set against the
	// protocol after it was applied (--scenarios seeds).
	p := c
	p.Envs = slices.Clone(c.Envs)
	if err := Preset(c.Protocol, &p); err != nil {
		return err
	}
	sotopiaEnv := false
	for _, e := range c.Envs {
		if sotopia.Named(e.Name) {
			sotopiaEnv = true
		}
	}
	switch {
	case c.JudgeModel != "" && c.JudgeOllama != "":
		return errors.New("judge_model and judge_ollama both set")
	case !sotopiaEnv && (c.JudgeModel != "" || c.JudgeOllama != ""):
		return errors.New("a judge is configured but no environment takes one (only sotopia does)")
	}
	return nil
}

// Specs parses the players and opponents.
func (c Config) Specs() (ps, opponents []players.Spec, err error) {
	parse := func(what string, list []string) ([]players.Spec, error) {
		var out []players.Spec
		for _, s := range list {
			sp, err := players.Parse(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			out = append(out, sp)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no %s", what)
		}
		return out, nil
	}
	if ps, err = parse("players", c.Players); err != nil {
		return nil, nil, err
	}
	if opponents, err = parse("opponents", c.Opponents); err != nil {
		return nil, nil, err
	}
	return ps, opponents, nil
}

// Run applies c's protocol (Preset), opens c's players on shared backends (c.Backend), gives SOTOPIA its
// judge, evaluates and writes the reports into c.Out (when set). warn
// receives notes for the user (a SOTOPIA run without a judge). The lineup
// is returned open for the caller's statistics; close it.
func (c *Config) Run(ctx context.Context, h Hooks, warn io.Writer) (*Report, *players.Lineup, error) {
	if err := Preset(c.Protocol, c); err != nil {
		return nil, nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	ps, qs, err := c.Specs()
	if err != nil {
		return nil, nil, err
	}
	if c.Model == "" && players.NeedsModel(ps, qs) {
		return nil, nil, errors.New("base and adapter: players need a model (the base model)")
	}
	slots, err := c.SeqSlots()
	if err != nil {
		return nil, nil, err
	}
	// The reply settings' chat template override renders the players'
	// prompts as it rendered them in training.
	tmpl, err := c.ChatTemplateSource()
	if err != nil {
		return nil, nil, err
	}
	lineup, err := players.Open(ctx, ps, qs, players.OpenOptions{Backend: c.Backend, Model: c.Model, Slots: slots,
		Context: c.Context, ChatTemplate: tmpl, AdapterScale: c.AdapterScale, Requests: c.Parallel})
	if err != nil {
		return nil, nil, fmt.Errorf("arena: %w", err)
	}
	closeJudge, err := c.attachJudge(warn)
	if err != nil {
		lineup.Close()
		return nil, nil, err
	}
	defer closeJudge()
	rep, err := Evaluate(ctx, c.Options, c.Out, lineup.Players, lineup.Opponents, h)
	if err == nil && c.Out != "" {
		err = rep.WriteFiles(c.Out)
	}
	if err != nil {
		lineup.Close()
		return nil, nil, err
	}
	return rep, lineup, nil
}

// attachJudge gives the SOTOPIA environments the judge the config names
// (a GGUF through its own llama backend, or an Ollama model); it returns
// what closes the judge's backend.
func (c *Config) attachJudge(warn io.Writer) (func(), error) {
	nop := func() {}
	var sot []int
	for i, e := range c.Envs {
		if sotopia.Named(e.Name) {
			sot = append(sot, i)
		}
	}
	if len(sot) == 0 {
		if c.JudgeModel != "" || c.JudgeOllama != "" {
			return nop, errors.New("a judge is configured but no environment takes one (only sotopia does)")
		}
		return nop, nil
	}
	var b inference.Backend
	jo := sotopia.JudgeOptions{}.Defaults()
	switch {
	case c.JudgeModel != "" && c.JudgeOllama != "":
		return nop, errors.New("judge_model and judge_ollama both set")
	case c.JudgeModel != "":
		// A judge model renders with its own template, not the players'
		// (llama.Options' default context).
		lo, err := c.Backend.Llama(c.JudgeModel, "", c.Parallel, 0, "")
		if err != nil {
			return nop, fmt.Errorf("judge: %w", err)
		}
		lo.Context = llama.Options{}.Defaults().Context
		lb, err := players.OpenLlamaOptions(lo)
		if err != nil {
			return nop, fmt.Errorf("judge: %w", err)
		}
		b, jo.Label = lb, "llama:"+c.JudgeModel
	case c.JudgeOllama != "":
		// judge's Ollama completer: the scores' JSON schema as
		// Ollama's format, thinking off (a bare backend has neither).
		comp, ob, err := judge.NewOllama(c.Backend.Ollama(c.JudgeOllama, c.Parallel))
		if err != nil {
			return nop, fmt.Errorf("judge: %w", err)
		}
		jo.Label = "ollama:" + c.JudgeOllama
		return c.withJudge(sot, comp, jo, ob)
	default:
		fmt.Fprintln(warn, "warning: sotopia without a judge: every episode is unjudged, with reward 0 (set --judge-model or --judge-ollama)")
		return nop, nil
	}
	return c.withJudge(sot, judge.New(b), jo, b)
}

// withJudge gives the SOTOPIA environments at indices sot a judge over
// comp; b is the backend behind it, closed by the returned function.
func (c *Config) withJudge(sot []int, comp *judge.Completer, jo sotopia.JudgeOptions, b inference.Backend) (func(), error) {
	j, err := sotopia.NewJudge(comp, jo)
	if err != nil {
		b.Close()
		return func() {}, err
	}
	for _, i := range sot {
		c.Envs[i].Game = sotopia.New().WithJudge(j)
	}
	return func() { b.Close() }, nil
}
