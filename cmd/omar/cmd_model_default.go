package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/bc"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
	"github.com/omar-selfplay/omar/llamacpp/cpuvariant"
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
		return cliflag.Usagef("need --out and no positional arguments")
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

// modelDefaultFlags are omar model default's flags: the changes to the
// recipe are bound to bc.BuildChanges.
type modelDefaultFlags struct {
	out, work, daggerEnvs, lib *string
	rebuild                    *bool
	c                          bc.BuildChanges
}

func bindModelDefault(fs *flag.FlagSet) *modelDefaultFlags {
	f := &modelDefaultFlags{c: bc.BuildChanges{}.Defaults()}
	f.out = fs.String("out", "", "output GGUF file (required)")
	f.rebuild = fs.Bool("rebuild", false, "train the model anew from its recipe instead of writing the embedded copy (3 to 4 hours on two cores; --corpus-scale 0.5 --steps 2400 trains the previous recipe, a quarter of the cost)")
	f.work = fs.String("work", "", "with --rebuild: directory for the intermediate files and checkpoints; an interrupted build continues from it (default: OUT.work)")
	fs.IntVar(&f.c.Steps, "steps", 0, "with --rebuild: optimizer steps (default the recipe's)")
	fs.IntVar(&f.c.Episodes, "episodes", 0, "with --rebuild: corpus episodes per cast of every environment, Werewolf's and SOTOPIA's included (default the recipe's, which differ by environment)")
	fs.Float64Var(&f.c.CorpusScale, "corpus-scale", 0, "with --rebuild: multiply every environment's corpus episodes by this factor, keeping the recipe's mix (2: twice the corpus)")
	fs.StringVar(&f.c.Preset, "preset", "", "with --rebuild: the model's shape, one of the model presets (default the recipe's, base)")
	fs.Uint64Var(&f.c.Seed, "seed", 0, "with --rebuild: training seed, drawing the initial weights and the order of the batches (default the recipe's, 1; the corpus is the same): another draw of the same recipe")
	fs.IntVar(&f.c.Threads, "threads", 0, "with --rebuild: trainer threads; 0 sizes them to the cores free for the process, measured every 5 s (the bytes are the same whatever the count)")
	fs.IntVar(&f.c.DaggerRounds, "dagger-rounds", -1, "with --rebuild: DAgger rounds after behaviour cloning (default the recipe's; 0 none)")
	fs.IntVar(&f.c.DaggerSteps, "dagger-steps", 0, "with --rebuild: optimizer steps per DAgger round (default the recipe's)")
	fs.IntVar(&f.c.DaggerEpisodes, "dagger-episodes", 0, "with --rebuild: DAgger episodes per game, seat and opponent (default the recipe's)")
	f.daggerEnvs = fs.String("dagger-envs", "", "with --rebuild: environments of the DAgger rounds, comma-separated (default the six negotiation games; others are labelled and opposed by their default script)")
	fs.IntVar(&f.c.DaggerMaxPerSeat, "dagger-max-per-seat", -1, "with --rebuild: most labelled turns of one seat per DAgger episode (default the recipe's; 0 all)")
	fs.StringVar(&f.c.CPUVariant, "cpu-variant", "", "with --rebuild: ggml CPU kernels to train on, e.g. "+cpuvariant.Portable+" (every x86-64 CPU with AVX2 runs it): the same bytes on every machine that runs them (default the best for this CPU, whose bytes hold on CPUs of its kind)")
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
		return cliflag.Usagef("%s only with --rebuild (without it the embedded model is written as it is)", strings.Join(only, ", "))
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
			if !(f.c.CorpusScale > 0 && f.c.CorpusScale <= 1000) {
				bad = append(bad, fmt.Sprintf("--corpus-scale %v: want a factor in (0, 1000]", f.c.CorpusScale))
			}
		}
	})
	if len(bad) > 0 {
		return bc.DefaultBuild(), cliflag.Usagef("%s", strings.Join(bad, "; "))
	}
	if *f.daggerEnvs != "" {
		f.c.DaggerEnvs = strings.Split(*f.daggerEnvs, ",")
	}
	o, err := f.c.Apply(bc.DefaultBuild())
	if err != nil {
		return o, cliflag.Usage(err)
	}
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
