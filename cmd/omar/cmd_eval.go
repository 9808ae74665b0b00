package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/loop/judge"
	"github.com/omar-selfplay/omar/sotopia"
)

func init() {
	register(command{name: "eval", summary: "the arena: players against opponents on held-out scenarios, with confidence intervals", run: runEval})
}

// evalConfig is the YAML of omar eval --config: the arena's options and
// the players. Flags override it.
type evalConfig struct {
	arena.Options `yaml:",inline"`
	// Model is the base model of "base" and "adapter:" players.
	Model     string   `yaml:"model"`
	Players   []string `yaml:"players"`
	Opponents []string `yaml:"opponents"`
	Out       string   `yaml:"out"`
	// OllamaHost serves "ollama:" players and the Ollama judge.
	OllamaHost   string  `yaml:"ollama_host"`
	AdapterScale float32 `yaml:"adapter_scale"`
	// JudgeModel (a GGUF) or JudgeOllama scores SOTOPIA episodes.
	JudgeModel  string `yaml:"judge_model"`
	JudgeOllama string `yaml:"judge_ollama"`
}

func runEval(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "eval")
	var lf llamaFlags
	lf.bind(fs)
	config := fs.String("config", "", "YAML config (flags override it)")
	players := fs.String("players", "base", "players, comma-separated: base, adapter:PATH, model:PATH, scripted:NAME, ollama:NAME")
	opponents := fs.String("opponents", "scripted:naive,scripted:strategic", "opponents, same forms as --players")
	envList := fs.String("env", "craigslist", "environments, comma-separated (see omar envs)")
	params := fs.String("params", "", "game parameters as JSON, given to every environment, e.g. '{\"structured_only\":true}'")
	scenarios := fs.String("scenarios", arena.ScenariosCurated, "curated (a game's curated set where it has one) or seeds")
	episodes := fs.Int("episodes", 64, "held-out episodes per pairing")
	seed := fs.Uint64("seed", 1, "evaluation seed (the training run's seed keeps the deals disjoint from training's)")
	parallel := fs.Int("parallel", 16, "episodes in flight over all pairings")
	out := fs.String("out", "", "directory for results.jsonl (resume), report.md, report.json and reward.svg")
	maxTokens := fs.Int("max-tokens", 48, "most tokens of one reply")
	temp := fs.Float64("temperature", 1, "sampling temperature of model players (0: greedy)")
	reference := fs.String("reference", "", "player the others are compared with (default: base, else the first)")
	bootstrap := fs.Int("bootstrap", 1000, "bootstrap resamples per interval")
	ollamaHost := fs.String("ollama-host", ollama.DefaultHost, "Ollama server of ollama: players and --judge-ollama")
	adapterScale := fs.Float64("adapter-scale", 1, "LoRA scale of adapter: players")
	judgeModel := fs.String("judge-model", "", "GGUF model that judges SOTOPIA episodes")
	judgeOllama := fs.String("judge-ollama", "", "Ollama model that judges SOTOPIA episodes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errUsage)
	}
	cfg := evalConfig{Options: arena.Options{}.Defaults(), OllamaHost: ollama.DefaultHost, AdapterScale: 1}
	cfg.Players, cfg.Opponents = []string{"base"}, []string{"scripted:naive", "scripted:strategic"}
	cfg.Envs = []arena.Env{{Name: "craigslist"}}
	if *config != "" {
		if err := decodeYAMLFile(*config, &cfg); err != nil {
			return err
		}
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "model":
			cfg.Model = lf.model
		case "ctx":
			cfg.Context = lf.ctx
		case "players":
			cfg.Players = splitList(*players)
		case "opponents":
			cfg.Opponents = splitList(*opponents)
		case "env":
			cfg.Envs = nil
			for _, name := range splitList(*envList) {
				cfg.Envs = append(cfg.Envs, arena.Env{Name: name})
			}
		case "episodes":
			cfg.Episodes = *episodes
		case "seed":
			cfg.Seed = *seed
		case "parallel":
			cfg.Parallel = *parallel
		case "out":
			cfg.Out = *out
		case "max-tokens":
			cfg.MaxTokens = *maxTokens
		case "temperature":
			cfg.Temperature = float32(*temp)
		case "reference":
			cfg.Reference = *reference
		case "bootstrap":
			cfg.Bootstrap = *bootstrap
		case "ollama-host":
			cfg.OllamaHost = *ollamaHost
		case "adapter-scale":
			cfg.AdapterScale = float32(*adapterScale)
		case "judge-model":
			cfg.JudgeModel = *judgeModel
		case "judge-ollama":
			cfg.JudgeOllama = *judgeOllama
		}
	})
	// --params and --scenarios apply to every environment, after --env.
	fs.Visit(func(f *flag.Flag) {
		for i := range cfg.Envs {
			switch f.Name {
			case "params":
				var p engine.Params
				if err := json.Unmarshal([]byte(*params), &p); err != nil {
					ferr = fmt.Errorf("--params: %v: %w", err, errUsage)
				}
				cfg.Envs[i].Params = p
			case "scenarios":
				cfg.Envs[i].Scenarios = *scenarios
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	ps, err := parseSpecList("players", cfg.Players)
	if err != nil {
		return err
	}
	qs, err := parseSpecList("opponents", cfg.Opponents)
	if err != nil {
		return err
	}
	if cfg.Model == "" && needsModel(ps, qs) {
		return fmt.Errorf("base and adapter: players need --model (the base model): %w", errUsage)
	}
	// The llama flags without the model: Open sets each backend's file.
	lf.model = "-"
	lo, err := lf.options()
	if err != nil {
		return err
	}
	slots, err := cfg.SeqSlots()
	if err != nil {
		return err
	}
	oo := ollama.Options{Host: cfg.OllamaHost, Parallel: cfg.Parallel}
	lineup, err := arena.Open(ctx, ps, qs, arena.OpenOptions{
		Model: cfg.Model, Llama: lo, Slots: slots, Context: cfg.Context, AdapterScale: cfg.AdapterScale, Ollama: oo,
	})
	if err != nil {
		return err
	}
	defer lineup.Close()
	closeJudge, err := attachEvalJudge(env.stderr, &cfg, lo, oo)
	if err != nil {
		return err
	}
	defer closeJudge()

	var bar *progress
	var played int
	hooks := arena.Hooks{
		Start: func(total, done int) {
			if done > 0 {
				fmt.Fprintf(env.stderr, "resuming: %d of %d episodes already in %s\n", done, total, cfg.Out)
			}
			bar = newProgress(env, total-done, "eval")
		},
		Episode: func(arena.Result) { played++; bar.add(1) },
	}
	start := time.Now()
	rep, err := arena.Evaluate(ctx, cfg.Options, cfg.Out, lineup.Players, lineup.Opponents, hooks)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && cfg.Out != "" {
			return fmt.Errorf("interrupted after %d episodes; run the same command again to resume from %s: %w", played, cfg.Out, err)
		}
		return err
	}
	wall := time.Since(start)
	if err := rep.Markdown(env.stdout); err != nil {
		return err
	}
	if cfg.Out != "" {
		if err := rep.WriteFiles(cfg.Out); err != nil {
			return err
		}
	}
	printEvalCost(env.stderr, played, wall, lineup)
	return nil
}

// printEvalCost reports the episodes played, the wall time and how full
// the llama backends' decode steps were.
func printEvalCost(w io.Writer, played int, wall time.Duration, l *arena.Lineup) {
	fmt.Fprintf(w, "played %d episodes in %.1f s\n", played, wall.Seconds())
	for path, b := range l.Llama {
		st := b.Stats()
		if st.Steps == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: %d decode steps, %.1f sequences sampled per step, %d adapter switches, %d tokens generated, decode %.1f s\n",
			path, st.Steps, float64(st.GeneratedTokens)/float64(st.Steps), b.AdapterSwitches(), st.GeneratedTokens, st.DecodeTime.Seconds())
	}
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseSpecList(what string, list []string) ([]arena.Spec, error) {
	var out []arena.Spec
	for _, s := range list {
		sp, err := arena.ParseSpec(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", what, err, errUsage)
		}
		out = append(out, sp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s: %w", what, errUsage)
	}
	return out, nil
}

// needsModel reports whether a spec plays the base model.
func needsModel(lists ...[]arena.Spec) bool {
	for _, l := range lists {
		for _, s := range l {
			if s.Kind == arena.SpecBase || s.Kind == arena.SpecAdapter {
				return true
			}
		}
	}
	return false
}

// attachEvalJudge gives the SOTOPIA environments the judge the config
// names (a GGUF through its own llama backend, or an Ollama model); it
// returns what closes the judge's backend.
func attachEvalJudge(w io.Writer, cfg *evalConfig, lo llama.Options, oo ollama.Options) (func(), error) {
	nop := func() {}
	var sot []int
	for i, e := range cfg.Envs {
		if name, _ := engine.SplitID(e.Name); name == "sotopia" {
			sot = append(sot, i)
		}
	}
	if len(sot) == 0 {
		if cfg.JudgeModel != "" || cfg.JudgeOllama != "" {
			return nop, fmt.Errorf("a judge is configured but no environment takes one (only sotopia does): %w", errUsage)
		}
		return nop, nil
	}
	var b inference.Backend
	jo := sotopia.JudgeOptions{}.Defaults()
	switch {
	case cfg.JudgeModel != "" && cfg.JudgeOllama != "":
		return nop, fmt.Errorf("judge_model and judge_ollama both set: %w", errUsage)
	case cfg.JudgeModel != "":
		lo.Model, lo.Adapter = cfg.JudgeModel, ""
		lo.Parallel, lo.Batch = cfg.Parallel, max(lo.Batch, cfg.Parallel)
		lb, err := llama.New(lo)
		if err != nil {
			return nop, fmt.Errorf("judge: %w", err)
		}
		b, jo.Label = lb, "llama:"+cfg.JudgeModel
	case cfg.JudgeOllama != "":
		oo.Model = cfg.JudgeOllama
		ob, err := ollama.New(oo)
		if err != nil {
			return nop, fmt.Errorf("judge: %w", err)
		}
		b, jo.Label = ob, "ollama:"+cfg.JudgeOllama
	default:
		fmt.Fprintln(w, "warning: sotopia without a judge: every episode is unjudged, with reward 0 (set --judge-model or --judge-ollama)")
		return nop, nil
	}
	j, err := sotopia.NewJudge(judge.New(b), jo)
	if err != nil {
		b.Close()
		return nop, err
	}
	for _, i := range sot {
		cfg.Envs[i].Game = sotopia.New().WithJudge(j)
	}
	return func() { b.Close() }, nil
}
