package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model/builtin"
	"github.com/omar-selfplay/omar/players"
)

func init() {
	register(command{name: "eval", summary: "the arena: players against opponents on held-out scenarios, with confidence intervals", run: runEval})
}

// bindEval binds omar eval's option flags to the arena's config.
func bindEval(f *cliflag.OptionFlags[arena.Config]) {
	type C = arena.Config
	f.String("model", "base model (GGUF) of base and adapter: players (default: the built-in model)", func(c *C) *string { return &c.Model })
	f.Strings("players", "players, comma-separated: base, adapter:PATH, model:PATH, scripted:NAME, ollama:NAME (default base)", func(c *C) *[]string { return &c.Players })
	f.Strings("opponents", "opponents, same forms as --players (default scripted:naive,scripted:strategic, or the games' own scripts where they have neither, e.g. scripted:heuristic)", func(c *C) *[]string { return &c.Opponents })
	f.Func("env", "environments, comma-separated (see omar envs; default craigslist)", func(c *C, v string) error {
		c.Envs = nil
		for _, name := range cliflag.List(v) {
			c.Envs = append(c.Envs, arena.Env{Name: name})
		}
		return nil
	})
	f.Int("episodes", "held-out episodes per pairing (default 64)", func(c *C) *int { return &c.Episodes })
	f.Uint64("seed", "evaluation seed (the training run's seed keeps the deals disjoint from training's)", func(c *C) *uint64 { return &c.Seed })
	f.Int("parallel", "episodes in flight over all pairings (default 16)", func(c *C) *int { return &c.Parallel })
	f.String("out", "directory for results.jsonl (resume), report.md, report.json and reward.svg", func(c *C) *string { return &c.Out })
	f.Int("max-tokens", "most tokens of one reply", func(c *C) *int { return &c.MaxTokens })
	f.Int("context", "tokens per model seat (prompt and reply)", func(c *C) *int { return &c.Context })
	f.Float32("temperature", "sampling temperature of model players (0: greedy; default 1)", func(c *C) *float32 { return &c.Temperature })
	f.Int("max-legal", "list a notification's legal replies in the prompt when it has at most this many (0: the default, 8; -1: never): the policy's training setting, rollout.max_legal", func(c *C) *int { return &c.MaxLegal })
	f.String("trace", "reply trace of model players: tom, or none (the policy's training setting, rollout.trace)", func(c *C) *string { return &c.Trace })
	f.Bool("write-records", "also write every played episode's record to the --out directory's episodes.jsonl", func(c *C) *bool { return &c.Records })
	f.String("protocol", "evaluation protocol: paper (10 curated scenarios × 3 opponents × 5 trials; see docs/evaluation.md)", func(c *C) *string { return &c.Protocol })
	f.String("reference", "player the others are compared with (default: base, else the first)", func(c *C) *string { return &c.Reference })
	f.Int("bootstrap", "bootstrap resamples per interval (default 1000)", func(c *C) *int { return &c.Bootstrap })
	f.String("ollama-host", "Ollama server of ollama: players and --judge-ollama", func(c *C) *string { return &c.OllamaHost })
	bindBackend(f, func(c *C) *players.Backend { return &c.Backend })
	f.Float32("adapter-scale", "LoRA scale of adapter: players (default 1)", func(c *C) *float32 { return &c.AdapterScale })
	f.String("judge-model", "GGUF model that judges SOTOPIA episodes", func(c *C) *string { return &c.JudgeModel })
	f.String("judge-ollama", "Ollama model that judges SOTOPIA episodes", func(c *C) *string { return &c.JudgeOllama })
	// --params and --scenarios apply to every environment: they are bound
	// after --env so that they see its list whatever the order given.
}

func runEval(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "eval")
	config := fs.String("config", "", "YAML config (flags override it)")
	of := cliflag.NewOptionFlags(fs, arena.DefaultConfig())
	bindEval(of)
	cliflag.Alias(fs, "ctx", "context", env.stderr)
	cliflag.Alias(fs, "records", "write-records", env.stderr)
	var params engine.Params
	fs.Func("params", "game parameters as JSON, given to every environment, e.g. '{\"structured_only\":true}'", cliflag.JSON(&params))
	scenarios := fs.String("scenarios", "", "curated (a game's curated set where it has one; the default) or seeds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cliflag.Usagef("unexpected arguments %q", fs.Args())
	}
	cfg := arena.DefaultConfig()
	cfg.LlamaLib = llamaLibEnv()
	if *config != "" {
		if err := decodeYAMLFile(*config, &cfg); err != nil {
			return err
		}
	}
	if err := of.Apply(&cfg); err != nil {
		return err
	}
	if err := cfg.ApplyProtocol(); err != nil {
		return cliflag.Usage(err)
	}
	for i := range cfg.Envs {
		if params != nil {
			cfg.Envs[i].Params = maps.Clone(params)
		}
		if *scenarios != "" {
			cfg.Envs[i].Scenarios = *scenarios
		}
	}
	if err := cfg.Validate(); err != nil {
		return cliflag.Usage(err)
	}
	if ps, qs, err := cfg.Specs(); err != nil {
		return cliflag.Usage(err)
	} else if cfg.Model == "" && players.NeedsModel(ps, qs) {
		if cfg.Model, err = builtin.CacheFile(); err != nil {
			return err
		}
	}
	loop.WithBuiltinParams(cfg.Model, cfg.Envs)
	var bar *progress.Bar
	played := 0
	hooks := arena.Hooks{
		Start: func(total, done int) {
			if done > 0 {
				fmt.Fprintf(env.stderr, "resuming: %d of %d episodes already in %s\n", done, total, cfg.Out)
			}
			bar = progress.New(env.stderr, env.interactive, total-done, "eval")
		},
		Episode: func(arena.Result) { played++; bar.Add(1) },
	}
	start := time.Now()
	rep, lineup, err := cfg.Run(ctx, hooks, env.stderr)
	bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) && cfg.Out != "" {
			return fmt.Errorf("interrupted after %d episodes; run the same command again to resume from %s: %w", played, cfg.Out, err)
		}
		return err
	}
	defer lineup.Close()
	if err := rep.Brief(env.stdout, cfg.Out); err != nil {
		return err
	}
	lineup.WriteCost(env.stderr, played, time.Since(start).Seconds())
	return nil
}
