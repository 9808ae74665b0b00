package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop/learning"
)

// runBenchLearning is `omar bench learning`: PPO runs on the
// known-optimum test beds, one per test bed × estimator × model × seed,
// each reporting the share of the optimum (or, for rock–paper–scissors,
// the exploitability) its rollouts reached iteration by iteration.
func runBenchLearning(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "bench learning")
	d := learning.Options{}.Defaults()
	envsFlag := fs.String("env", strings.Join(learning.Envs, ","), "comma-separated test beds")
	estFlag := fs.String("estimator", strings.Join(advantage.Names(), ","), "comma-separated estimators")
	modelFlag := fs.String("model", "tiny,builtin", "comma-separated models: builtin or a random preset (tiny, …)")
	seedsFlag := fs.String("seeds", "1,2,3", "comma-separated seeds")
	iterations := fs.Int("iterations", d.Iterations, "iterations per run")
	episodes := fs.Int("episodes", d.Episodes, "episodes per iteration")
	group := fs.Int("group-size", 0, "GRPO group size (0: 8 for grpo, else 1)")
	lr := fs.Float64("lr", float64(d.LR), "LoRA and value-head learning rate")
	fs.Func("entropy-coef", fmt.Sprintf("the trainer's entropy bonus (train.entropy_coef; default %g)", d.EntropyCoef), cliflag.Float32(&d.EntropyCoef))
	fs.Func("kl-coef", fmt.Sprintf("the trainer's KL(π‖π_base) penalty (train.kl_coef; default %g)", d.KLCoef), cliflag.Float32(&d.KLCoef))
	fs.IntVar(&d.EntropyDecaySteps, "entropy-decay-steps", d.EntropyDecaySteps, "optimizer steps over which the entropy bonus falls to 0 (train.entropy_decay_steps; 0: constant)")
	fs.StringVar(&d.LogprobsOver, "logprobs-over", d.LogprobsOver, "the trainer's logprobs: vocabulary or grammar (train.logprobs_over)")
	fs.Func("temperature", "sampling temperature of the rollouts (default 1)", cliflag.Float32(&d.Temperature))
	lib := fs.String("llama-lib", llamaLibEnv(), "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)")
	dir := fs.String("dir", "", "directory for the runs (default: a temporary one, removed after)")
	jsonOut := fs.String("json", "", "also append every run's result as a JSON line to this file")
	fs.Func("params", `game parameters as JSON, given to every test bed, e.g. '{"scales":[1,3,7]}'`, cliflag.JSON(&d.Params))
	if err := fs.Parse(args); err != nil {
		return err
	}
	seeds, err := cliflag.Uints(*seedsFlag)
	if err != nil {
		return cliflag.Usagef("--seeds %q: want comma-separated non-negative integers", *seedsFlag)
	}
	base := d
	base.Iterations, base.Episodes, base.GroupSize, base.LR, base.LlamaLib = *iterations, *episodes, *group, float32(*lr), *lib
	runs, err := learning.Grid(base, cliflag.List(*envsFlag), cliflag.List(*estFlag), cliflag.List(*modelFlag), seeds)
	if err != nil {
		return cliflag.Usagef("%v", err)
	}
	root := *dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "omar-bench-learning")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	var jf *os.File
	if *jsonOut != "" {
		f, err := os.OpenFile(*jsonOut, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		jf = f
	}
	// One row per run, printed as it finishes.
	learning.WriteHeader(env.stdout)
	for _, o := range runs {
		name := fmt.Sprintf("%s-%s-%s-%d", o.Env, o.Estimator, o.Model, o.Seed)
		res, err := learning.Run(ctx, filepath.Join(root, name), o)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.WriteRow(env.stdout)
		if jf != nil {
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if _, err := jf.Write(append(b, '\n')); err != nil {
				return err
			}
		}
	}
	return nil
}
