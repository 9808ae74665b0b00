package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/recipes"
)

func init() {
	register(command{name: "recipe", summary: "research recipes: cascade RL, multi-teacher distillation (docs/recipes.md)", run: runRecipe})
}

const recipeUsage = `usage: omar recipe cascade|distill [--config FILE.yaml] --out DIR   start a recipe (no config: its defaults)
       omar recipe cascade|distill --resume DIR                      continue an interrupted one
The config (recipes.CascadeOptions or recipes.DistillOptions as YAML, examples/recipe-*.yaml) is recorded in DIR/recipe.yaml.`

func runRecipe(ctx context.Context, env *cliEnv, args []string) error {
	if isHelp(args) {
		fmt.Fprintln(env.stderr, recipeUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "cascade" && args[0] != "distill" {
		fmt.Fprintln(env.stderr, recipeUsage)
		return cliflag.Usagef("want 'omar recipe cascade|distill [flags]'")
	}
	fs := newFlags(env, "recipe "+args[0])
	config := fs.String("config", "", "recipe config (YAML)")
	out := fs.String("out", "", "recipe directory (required unless --resume)")
	resume := fs.String("resume", "", "recipe directory to continue")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	dir := *out
	if *resume != "" {
		if *out != "" && *out != *resume {
			return cliflag.Usagef("--resume continues a recipe in its own directory: no --out")
		}
		dir = *resume
	}
	if dir == "" || fs.NArg() > 0 {
		return cliflag.Usagef("need --out DIR (or --resume DIR) and no positional arguments")
	}
	resumeHint := fmt.Errorf("interrupted; continue with: omar recipe %s --resume %s", args[0], dir)
	stage := func(r *loop.Run) {
		fmt.Fprintf(env.stdout, "run %s\n", r.Dir())
		attachSelfplay(r, env)
	}
	var err error
	if args[0] == "distill" {
		var o recipes.DistillOptions
		if o, err = recipes.Config(dir, *config, *resume != "", recipes.DefaultDistill()); err != nil {
			return cliflag.Usage(err)
		}
		o.Run.Rollout.LlamaLib = cmp.Or(o.Run.Rollout.LlamaLib, llamaLibEnv())
		var rs []recipes.DistillEnvResult
		rs, err = recipes.Distill(ctx, o, dir, stage, func(s recipes.DistillStep) {
			fmt.Fprintf(env.stdout, "step %d/%d: %s, reward %.3f, reverse KL %.4f, %d tokens; %.1fs\n", s.Step, o.Steps, s.Env, s.Reward, s.ReverseKL, s.Tokens, s.Seconds)
		})
		recipes.DistillTable(env.stdout, rs)
	} else {
		var o recipes.CascadeOptions
		if o, err = recipes.Config(dir, *config, *resume != "", recipes.DefaultCascade()); err != nil {
			return cliflag.Usage(err)
		}
		o.Run.Rollout.LlamaLib = cmp.Or(o.Run.Rollout.LlamaLib, llamaLibEnv())
		var rs []recipes.CascadeStageResult
		rs, err = recipes.Cascade(ctx, o, dir, stage)
		recipes.CascadeTable(env.stdout, rs)
	}
	if errors.Is(err, context.Canceled) {
		return resumeHint
	}
	return err
}
