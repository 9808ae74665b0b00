package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/sotopia"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/internal/progress"
)

func init() {
	register(command{name: "play", summary: "play episodes with scripted agents and write episode records", run: runPlay})
}

func runPlay(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "play")
	configPath := fs.String("config", "", "YAML config (flags override it)")
	envID := fs.String("env", "", "environment id (see omar envs)")
	agents := fs.String("agents", "scripted", "seat agents as key=agent pairs, as in selfplay (keys: a seat's name, seatN, a role or *), e.g. '*=scripted:strategic,seat1=scripted:naive'; also read: one policy name for every seat, or a comma list by seat order (strategic,naive)")
	episodes := fs.Int("episodes", 1, "number of episodes")
	seed := fs.Uint64("seed", 1, "run seed: episode k is dealt from a seed derived from (seed, k)")
	out := fs.String("out", "", "episode records file (JSONL); '-' for stdout; empty: no records")
	parallel := fs.Int("parallel", 4, "episodes played at once")
	params := fs.String("params", "", "game parameters as JSON, e.g. '{\"rounds\":5}'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cliflag.Usagef("unexpected arguments %q", fs.Args())
	}
	cfg := engine.DefaultScriptedConfig()
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
				perr = cliflag.Usagef("--params: %v", err)
			}
		}
	})
	if perr != nil {
		return perr
	}
	if cfg.Env == "" {
		return cliflag.Usagef("no environment: pass --env (see omar envs)")
	}
	g, err := envs.Find(cfg.Env)
	if err != nil {
		return err
	}
	run, err := cfg.Run(g)
	if err != nil {
		return cliflag.Usage(err)
	}

	// Records go out whole lines at a time; a failed write (a full disk)
	// leaves the file ending in its last complete record.
	var w *jsonl.Writer
	switch cfg.Out {
	case "":
	case "-":
		w = jsonl.NewWriter(env.stdout)
	default:
		if w, err = jsonl.Create(cfg.Out); err != nil {
			return err
		}
	}
	if sotopia.Named(g.ID()) {
		fmt.Fprintf(env.stderr, "warning: %s scores goals with an LLM judge, which omar play does not run: every seat's reward is 0 here; score the records with 'omar judge --model JUDGE.gguf --out judged.jsonl %s' (or --ollama-model NAME)\n", g.ID(), outOrPlaceholder(cfg.Out))
	}

	bar := progress.New(env.stderr, env.interactive, cfg.Episodes, "playing "+g.ID())
	sum := engine.NewSummary()
	err = engine.PlayScripted(ctx, run, func(rec *engine.Record) error {
		bar.Add(1)
		sum.Add(rec)
		if w == nil {
			return nil
		}
		return w.Write(rec)
	})
	bar.Finish()
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
	sum.Write(report, g.ID())
	if cfg.Out != "" && cfg.Out != "-" {
		fmt.Fprintf(report, "episode records: %s\n", cfg.Out)
	}
	return nil
}

func outOrPlaceholder(out string) string {
	if out == "" || out == "-" {
		return "EPISODES.jsonl"
	}
	return out
}
