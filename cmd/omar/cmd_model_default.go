package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/bc"
	"github.com/omar-selfplay/omar/internal/progress"
	"github.com/omar-selfplay/omar/llamacpp/cpuvariant"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/model/builtin"
)

// runModelDefault writes the built-in model, or trains it anew from its
// recipe (bc.DefaultBuild) with --rebuild.
func runModelDefault(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "model default")
	f := bindModelDefault(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *f.out == "" || fs.NArg() > 0 {
		return usagef("need --out and no positional arguments")
	}
	if !*f.rebuild {
		return writeEmbedded(fs, env, *f.out)
	}
	o, err := f.builtinOptions(fs)
	if err != nil {
		return err
	}
	return buildBuiltin(ctx, env, o, f)
}

// modelDefaultFlags are omar model default's flags.
type modelDefaultFlags struct {
	out, work, preset, daggerEnvs, variant, lib                                    *string
	rebuild                                                                        *bool
	steps, episodes, threads, daggerRounds, daggerSteps, daggerEpisodes, daggerMax *int
	scale                                                                          *float64
	seed                                                                           *uint64
}

func bindModelDefault(fs *flag.FlagSet) *modelDefaultFlags {
	f := &modelDefaultFlags{}
	f.out = fs.String("out", "", "output GGUF file (required)")
	f.rebuild = fs.Bool("rebuild", false, "train the model anew from its recipe instead of writing the embedded copy (3 to 4 hours on two cores; --corpus-scale 0.5 --steps 2400 trains the previous recipe, a quarter of the cost)")
	f.work = fs.String("work", "", "with --rebuild: directory for the intermediate files and checkpoints; an interrupted build continues from it (default: OUT.work)")
	f.steps = fs.Int("steps", 0, "with --rebuild: optimizer steps (default the recipe's)")
	f.episodes = fs.Int("episodes", 0, "with --rebuild: corpus episodes per cast of every environment, Werewolf's and SOTOPIA's included (default the recipe's, which differ by environment)")
	f.scale = fs.Float64("corpus-scale", 0, "with --rebuild: multiply every environment's corpus episodes by this factor, keeping the recipe's mix (2: twice the corpus)")
	f.preset = fs.String("preset", "", "with --rebuild: the model's shape, one of the model presets (default the recipe's, base)")
	f.seed = fs.Uint64("seed", 0, "with --rebuild: training seed, drawing the initial weights and the order of the batches (default the recipe's, 1; the corpus is the same): another draw of the same recipe")
	f.threads = fs.Int("threads", 0, "with --rebuild: trainer threads; 0 sizes them to the cores free for the process, measured every 5 s (the bytes are the same whatever the count)")
	f.daggerRounds = fs.Int("dagger-rounds", -1, "with --rebuild: DAgger rounds after behaviour cloning (default the recipe's; 0 none)")
	f.daggerSteps = fs.Int("dagger-steps", 0, "with --rebuild: optimizer steps per DAgger round (default the recipe's)")
	f.daggerEpisodes = fs.Int("dagger-episodes", 0, "with --rebuild: DAgger episodes per game, seat and opponent (default the recipe's)")
	f.daggerEnvs = fs.String("dagger-envs", "", "with --rebuild: environments of the DAgger rounds, comma-separated (default the six negotiation games; others are labelled and opposed by their default script)")
	f.daggerMax = fs.Int("dagger-max-per-seat", -1, "with --rebuild: most labelled turns of one seat per DAgger episode (default the recipe's; 0 all)")
	f.variant = fs.String("cpu-variant", "", "with --rebuild: ggml CPU kernels to train on, e.g. "+cpuvariant.Portable+" (every x86-64 CPU with AVX2 runs it): the same bytes on every machine that runs them (default the best for this CPU, whose bytes hold on CPUs of its kind)")
	f.lib = fs.String("llama-lib", llamaLibEnv(), "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)")
	return f
}

// writeEmbedded writes the embedded built-in model to out; the flags that
// shape a build are refused without --rebuild.
func writeEmbedded(fs *flag.FlagSet, env *cliEnv, out string) error {
	var only []string // the flags that shape a build, meaningless for the embedded copy
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "out" && f.Name != "rebuild" && f.Name != "llama-lib" {
			only = append(only, "--"+f.Name)
		}
	})
	if len(only) > 0 {
		return usagef("%s only with --rebuild (without it the embedded model is written as it is)", strings.Join(only, ", "))
	}
	if err := os.WriteFile(out, builtin.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote the built-in model (%s, sha256 %s) to %s\n", builtin.Name, builtin.SHA256, out)
	return nil
}

// builtinOptions are the recipe with the flags' changes.
func (f *modelDefaultFlags) builtinOptions(fs *flag.FlagSet) (bc.BuildOptions, error) {
	// A count given as 0 or less would read as "the recipe's": say so.
	var bad []string
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "steps", "episodes", "dagger-steps", "dagger-episodes", "seed":
			if n, err := strconv.ParseInt(fl.Value.String(), 10, 64); err == nil && n <= 0 {
				bad = append(bad, fmt.Sprintf("--%s %d: want 1 or more (leave it out for the recipe's)", fl.Name, n))
			}
		case "corpus-scale":
			if !(*f.scale > 0 && *f.scale <= 1000) {
				bad = append(bad, fmt.Sprintf("--corpus-scale %v: want a factor in (0, 1000]", *f.scale))
			}
		}
	})
	o := bc.DefaultBuild()
	if len(bad) > 0 {
		return o, usagef("%s", strings.Join(bad, "; "))
	}
	if *f.steps > 0 {
		o.Steps, o.Train.TotalSteps = *f.steps, *f.steps
	}
	if *f.preset != "" {
		if !slices.Contains(model.Presets, *f.preset) {
			return o, usagef("--preset %q: want one of %v", *f.preset, model.Presets)
		}
		o.Preset = *f.preset
	}
	if *f.seed > 0 {
		o.Seed = *f.seed
	}
	if *f.threads < 0 {
		return o, usagef("--threads %d: want 0 (the free cores) or more", *f.threads)
	}
	o.Train.Threads = *f.threads
	switch {
	case *f.episodes > 0 && *f.scale != 0:
		return o, usagef("--episodes and --corpus-scale: give one")
	case *f.episodes > 0:
		for i := range o.Corpus.Envs {
			o.Corpus.Envs[i].Episodes = *f.episodes
		}
	case *f.scale != 0:
		if !(*f.scale > 0 && *f.scale <= 1000) {
			return o, usagef("--corpus-scale %v: want a factor in (0, 1000]", *f.scale)
		}
		o.Corpus = o.Corpus.Scaled(*f.scale)
	}
	if *f.daggerRounds >= 0 {
		o.Dagger.Rounds = *f.daggerRounds
	}
	if *f.daggerSteps > 0 {
		o.Dagger.Steps = *f.daggerSteps
	}
	if *f.daggerEpisodes > 0 {
		o.Dagger.Episodes = *f.daggerEpisodes
	}
	if *f.daggerEnvs != "" {
		o.Dagger.Games = nil
		for _, e := range strings.Split(*f.daggerEnvs, ",") {
			g, err := bc.DaggerGameFor(strings.TrimSpace(e))
			if err != nil {
				return o, usagef("--dagger-envs: %v", err)
			}
			o.Dagger.Games = append(o.Dagger.Games, g)
		}
	}
	if *f.daggerMax >= 0 {
		o.Dagger.MaxPerSeat = *f.daggerMax
	}
	o.CPUVariant = *f.variant
	return o, nil
}

// buildBuiltin trains the built-in model from o with a progress bar.
func buildBuiltin(ctx context.Context, env *cliEnv, o bc.BuildOptions, f *modelDefaultFlags) error {
	if *f.work == "" {
		*f.work = *f.out + ".work"
	}
	var bar *progress.Bar
	stage := ""
	hooks := bc.BuildHooks{
		Stage: func(s string) {
			stage = s
			fmt.Fprintf(env.stderr, "model default: %s\n", s)
			if s == "train" && bar == nil {
				bar = progress.New(env.stderr, env.interactive, o.TotalSteps(), "train")
			}
		},
		Step: func(step, total int, loss float64) {
			bar.Set(step)
			bar.Describe(fmt.Sprintf("train loss %.3f", loss))
			if !env.interactive && (step%50 == 0 || step == total) {
				fmt.Fprintf(env.stderr, "model default: step %d/%d loss %.4f\n", step, total, loss)
			}
		},
	}
	rep, err := bc.Build(ctx, o, *f.out, *f.work, *f.lib, hooks)
	bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted in the %s stage; continue with the same command (the checkpoint is in %s): %w", stage, *f.work, err)
		}
		return err
	}
	return rep.WriteSummary(env.stdout, *f.out, o.TotalSteps())
}
