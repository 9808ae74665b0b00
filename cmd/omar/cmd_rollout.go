package main

import (
	"context"
	"fmt"

	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/loop"
)

func init() {
	register(command{name: "rollout", summary: "play episodes with one policy on every seat and write trajectories", run: runRollout})
}

// decodeYAMLFile decodes a config file strictly (strictyaml.Decode: unknown
// keys and second documents are errors naming their line).
func decodeYAMLFile(path string, v any) error { return strictyaml.DecodeFile(path, v) }

func runRollout(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "rollout")
	config := fs.String("config", "", "YAML config file (flags override it)")
	out := fs.String("out", "traj", "output directory")
	of := cliflag.NewOptionFlags(fs, loop.RolloutOptions{}.Defaults())
	bindRollout(of, func(o *loop.RolloutOptions) *loop.RolloutOptions { return o })
	of.Int("first-episode", "index of the first episode (its seeds derive from it)", func(o *loop.RolloutOptions) *int { return &o.FirstEpisode })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v: %w", fs.Args(), cliflag.ErrUsage)
	}
	o := loop.RolloutOptions{}.Defaults()
	if *config != "" {
		if err := decodeYAMLFile(*config, &o); err != nil {
			return err
		}
	}
	if err := of.Apply(&o); err != nil {
		return err
	}
	if o.LlamaLib == "" {
		o.LlamaLib = llamaLibEnv()
	}
	if o.Env == "" {
		return fmt.Errorf("no environment: set env in the config or --env: %w", cliflag.ErrUsage)
	}
	bar := progress.New(env.stderr, env.interactive, o.Episodes, "rollout "+o.Env)
	rep, err := loop.Rollout(ctx, o, *out, func(done, total int) { bar.Add(1) })
	bar.Finish()
	if err != nil {
		return err
	}
	rep.WriteSummary(env.stdout, *out)
	if rep.ScheduleBypasses > 0 {
		fmt.Fprintf(env.stderr, "omar rollout: warning: %d requests from outside the episodes' decode schedule were decoded out of turn; this rollout may not be reproducible to the bit\n", rep.ScheduleBypasses)
	}
	return nil
}
