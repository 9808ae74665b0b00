package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
)

func init() {
	register(command{name: "play", summary: "play episodes with scripted agents and write episode records", run: runPlay})
}

// playConfig is the YAML config of omar play; flags override it.
type playConfig struct {
	Env        string         `yaml:"env"`
	Params     map[string]any `yaml:"params"`
	Agents     []string       `yaml:"agents"`
	Episodes   int            `yaml:"episodes"`
	Seed       uint64         `yaml:"seed"`
	Out        string         `yaml:"out"`
	Parallel   int            `yaml:"parallel"`
	MaxRetries *int           `yaml:"max_retries"`
}

func (c *playConfig) validate() error {
	switch {
	case c.Env == "":
		return usagef("no environment: pass --env (see omar envs)")
	case c.Episodes < 1:
		return usagef("episodes %d < 1", c.Episodes)
	case c.Parallel < 1:
		return usagef("parallel %d < 1", c.Parallel)
	case c.MaxRetries != nil && *c.MaxRetries < 0:
		return usagef("max_retries %d < 0", *c.MaxRetries)
	}
	return nil
}

func runPlay(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "play")
	configPath := fs.String("config", "", "YAML config (flags override it)")
	envID := fs.String("env", "", "environment id (see omar envs)")
	agents := fs.String("agents", "scripted", "seat agents: 'scripted' (every seat uses the game's default policy), a policy name for every seat, or a comma list by seat order, e.g. strategic,naive")
	episodes := fs.Int("episodes", 1, "number of episodes")
	seed := fs.Uint64("seed", 1, "run seed: episode k is dealt from a seed derived from (seed, k)")
	out := fs.String("out", "", "episode records file (JSONL); '-' for stdout; empty: no records")
	parallel := fs.Int("parallel", 4, "episodes played at once")
	params := fs.String("params", "", "game parameters as JSON, e.g. '{\"rounds\":5}'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	cfg := playConfig{Agents: []string{"scripted"}, Episodes: 1, Seed: 1, Parallel: 4}
	if *configPath != "" {
		if err := decodeYAMLFile(*configPath, &cfg); err != nil {
			return err
		}
	}
	var perr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "env":
			cfg.Env = *envID
		case "agents":
			cfg.Agents = strings.Split(*agents, ",")
		case "episodes":
			cfg.Episodes = *episodes
		case "seed":
			cfg.Seed = *seed
		case "out":
			cfg.Out = *out
		case "parallel":
			cfg.Parallel = *parallel
		case "params":
			cfg.Params = nil
			if err := json.Unmarshal([]byte(*params), &cfg.Params); err != nil {
				perr = usagef("--params: %v", err)
			}
		}
	})
	if perr != nil {
		return perr
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	g, err := findGame(cfg.Env)
	if err != nil {
		return err
	}
	for i := range cfg.Agents {
		cfg.Agents[i] = strings.TrimSpace(cfg.Agents[i])
	}
	if len(cfg.Agents) > 1 {
		seats, err := g.Seats(cfg.Params)
		if err != nil {
			return err
		}
		if len(cfg.Agents) != len(seats) {
			return usagef("%d agents for the %d seats of %s", len(cfg.Agents), len(seats), g.ID())
		}
	}
	if _, err := engine.ScriptedCast(g, cfg.Agents, 0); err != nil {
		return err
	}
	opts := engine.DefaultOptions()
	if cfg.MaxRetries != nil {
		opts.MaxRetries = *cfg.MaxRetries
	}

	// Records go out whole lines at a time; a failed write (a full disk)
	// leaves the file ending in its last complete record.
	var w *engine.JSONLWriter
	switch cfg.Out {
	case "":
	case "-":
		w = engine.NewJSONLWriter(env.stdout)
	default:
		if w, err = engine.CreateJSONL(cfg.Out); err != nil {
			return err
		}
	}
	if isSotopia(g) {
		fmt.Fprintf(env.stderr, "warning: %s scores goals with an LLM judge, which omar play does not run: every seat's reward is 0 here; score the records with 'omar judge --model JUDGE.gguf -o judged.jsonl %s' (or --ollama-model NAME)\n", g.ID(), outOrPlaceholder(cfg.Out))
	}

	bar := newProgress(env, cfg.Episodes, "playing "+g.ID())
	sum := newPlaySummary()
	err = playEpisodes(ctx, g, cfg, opts, func(rec *engine.Record) error {
		bar.add(1)
		sum.add(rec)
		if w == nil {
			return nil
		}
		return w.Write(rec)
	})
	bar.finish()
	if w != nil {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	report := env.stdout
	if cfg.Out == "-" {
		report = env.stderr
	}
	sum.print(report, g.ID())
	if cfg.Out != "" && cfg.Out != "-" {
		fmt.Fprintf(report, "episode records: %s\n", cfg.Out)
	}
	return nil
}

// playEpisodes plays cfg.Episodes episodes, cfg.Parallel at a time, and
// hands the records to emit in episode order, so output is identical for
// every degree of parallelism. A finished episode holds its slot until
// emit has returned for it: at most cfg.Parallel records are in memory,
// however slow the output.
func playEpisodes(ctx context.Context, g engine.Game, cfg playConfig, opts engine.Options, emit func(*engine.Record) error) error {
	_, err := engine.RunOrdered(ctx, 0, cfg.Episodes, cfg.Parallel,
		func(ctx context.Context, k int) (*engine.Record, error) {
			seed := seeds.Derive(cfg.Seed, uint64(k))
			cast, err := engine.ScriptedCast(g, cfg.Agents, seed)
			if err != nil {
				return nil, fmt.Errorf("episode %d: %w", k, err)
			}
			rec, err := engine.Play(ctx, g, seed, cfg.Params, cast, opts, nil)
			if err != nil {
				return nil, fmt.Errorf("episode %d: %w", k, err)
			}
			return rec, nil
		}, emit)
	return err
}

// playSummary aggregates records for the closing report.
type playSummary struct {
	episodes int
	results  map[string]int
	reward   map[string]*meanAcc // by "seat role (agent)"
	metrics  map[string]*meanAcc
}

type meanAcc struct {
	sum float64
	n   int
}

func (m *meanAcc) add(x float64) { m.sum += x; m.n++ }
func (m *meanAcc) mean() float64 { return m.sum / float64(max(m.n, 1)) }

func newPlaySummary() *playSummary {
	return &playSummary{results: map[string]int{}, reward: map[string]*meanAcc{}, metrics: map[string]*meanAcc{}}
}

func acc(m map[string]*meanAcc, k string) *meanAcc {
	if m[k] == nil {
		m[k] = &meanAcc{}
	}
	return m[k]
}

func (s *playSummary) add(rec *engine.Record) {
	s.episodes++
	s.results[rec.Outcome.Result]++
	for i, seat := range rec.Seats {
		acc(s.reward, seat.Role+" ("+seat.Agent+")").add(rec.Outcome.Rewards[i])
	}
	for k, v := range rec.Outcome.Metrics {
		acc(s.metrics, k).add(v)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *playSummary) print(w io.Writer, id string) {
	fmt.Fprintf(w, "%s: %d episodes\n", id, s.episodes)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "role (agent)\tmean reward\tn")
	for _, k := range sortedKeys(s.reward) {
		fmt.Fprintf(tw, "%s\t%.4f\t%d\n", k, s.reward[k].mean(), s.reward[k].n)
	}
	tw.Flush()
	var res []string
	for _, k := range sortedKeys(s.results) {
		res = append(res, fmt.Sprintf("%s %.1f%%", k, 100*float64(s.results[k])/float64(s.episodes)))
	}
	fmt.Fprintf(w, "results: %s\n", strings.Join(res, ", "))
	if len(s.metrics) > 0 {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tmean")
		for _, k := range sortedKeys(s.metrics) {
			fmt.Fprintf(tw, "%s\t%.4f\n", k, s.metrics[k].mean())
		}
		tw.Flush()
	}
}

// isSotopia reports whether g is SOTOPIA, whose rewards come from an LLM
// judge that omar play does not run.
func isSotopia(g engine.Game) bool {
	name, _ := engine.SplitID(g.ID())
	return name == "sotopia"
}

func outOrPlaceholder(out string) string {
	if out == "" || out == "-" {
		return "EPISODES.jsonl"
	}
	return out
}
