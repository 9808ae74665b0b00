package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/model"
)

func init() {
	register(command{name: "bench", summary: "measure throughput (bench decode, bench train) and learning (bench learning)", run: runBench})
}

const benchUsage = `usage: omar bench decode [flags]     decode throughput of the backend against raw llama_decode
       omar bench train [flags]      PPO step time of the trainer; --compare checks one device against another
       omar bench learning [flags]   fraction of the optimum PPO reaches on the known-optimum test beds
Run 'omar bench decode -h', 'omar bench train -h' or 'omar bench learning -h' for their flags.`

func runBench(ctx context.Context, env *cliEnv, args []string) error {
	if isHelp(args) {
		fmt.Fprintln(env.stderr, benchUsage)
		return flag.ErrHelp
	}
	if len(args) > 0 && args[0] == "train" {
		return runBenchTrain(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "learning" {
		return runBenchLearning(ctx, env, args[1:])
	}
	if len(args) == 0 || args[0] != "decode" {
		fmt.Fprintln(env.stderr, benchUsage)
		return cliflag.Usagef("want 'omar bench decode|train|learning [flags]'")
	}
	fs := newFlags(env, "bench decode")
	var lf llamaFlags
	lf.bind(fs)
	cliflag.Alias(fs, "ctx", "context", env.stderr)
	parallel := fs.String("parallel", "1,8,32", "comma-separated numbers of parallel sequences")
	n := fs.Int("n", 128, "tokens generated per sequence")
	promptTokens := fs.Int("prompt-tokens", 16, "prompt tokens per sequence")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ps, err := cliflag.Ints(*parallel, 1)
	if err != nil {
		return cliflag.Usagef("--parallel %q: want positive integers", *parallel)
	}
	if *n < 2 || *promptTokens < 1 {
		return cliflag.Usagef("-n ≥ 2 and --prompt-tokens ≥ 1")
	}
	if lf.model == "" {
		// No model given: the built-in tiny model, written to a temp file.
		path, remove, err := model.WriteTemp(model.Options{Preset: "tiny", Seed: 1}, "tiny.gguf")
		if err != nil {
			return err
		}
		defer remove()
		lf.model = path
		fmt.Fprintln(env.stderr, "no --model: using the built-in tiny model (omar model init --preset tiny --seed 1)")
	}
	o, err := lf.options()
	if err != nil {
		return err
	}
	o.Context = *promptTokens + *n + 1
	llama.WriteDecodeHeader(env.stdout)
	for _, p := range ps {
		r, err := llama.BenchDecode(ctx, o, p, *promptTokens, *n)
		if err != nil {
			return fmt.Errorf("parallel %d: %w", p, err)
		}
		r.WriteRow(env.stdout)
	}
	return nil
}
