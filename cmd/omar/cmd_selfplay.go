package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/cluster"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/web"
)

func init() {
	register(command{name: "selfplay", summary: "the main job: self-play rollouts, PPO updates and adapter hot-swaps in one process", run: runSelfplay})
}

// bindSelfplay binds omar selfplay's option flags.
func bindSelfplay(f *cliflag.OptionFlags[loop.Options]) {
	bindRollout(f, func(o *loop.Options) *loop.RolloutOptions { return &o.Rollout })
	f.Int("iterations", "iterations (overrides the config)", func(o *loop.Options) *int { return &o.Iterations })
	f.String("tensorboard", "also write each iteration's metrics as TensorBoard event files into this directory (relative: inside the run directory, e.g. "+runfiles.TensorBoardDir+"; logging.tensorboard)", func(o *loop.Options) *string { return &o.Logging.TensorBoard })
	f.String("estimator", "advantage estimator: "+strings.Join(advantage.Names(), ", "), func(o *loop.Options) *string { return &o.Estimator })
	f.Float32("lr", "adapter learning rate", func(o *loop.Options) *float32 { return &o.Train.LR })
	f.Float32("value-lr", "value head learning rate", func(o *loop.Options) *float32 { return &o.Train.ValueLR })
	f.Float32("kl-coef", "weight of the KL penalty to the base model", func(o *loop.Options) *float32 { return &o.Train.KLCoef })
	f.Int("lora-rank", "LoRA rank", func(o *loop.Options) *int { return &o.Train.LoRARank })
	f.Float32("lora-alpha", "LoRA alpha", func(o *loop.Options) *float32 { return &o.Train.LoRAAlpha })
	f.Strings("lora-modules", "adapted matrices, comma-separated (attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down)", func(o *loop.Options) *[]string { return &o.Train.LoRAModules })
	f.Int("ppo-epochs", "PPO epochs per iteration", func(o *loop.Options) *int { return &o.Train.Epochs })
	f.String("device", "trainer device: cpu or cuda", func(o *loop.Options) *string { return &o.Train.Device })
	f.OptionalFloat32("eval-temperature", "sampling temperature of the held-out evaluations and the before/after table (0: greedy; default the rollouts')", func(o *loop.Options) **float32 { return &o.Eval.Temperature })
}

// resumable are the flags a resumed run may take: it must be the same run,
// so only the iteration count and where the libraries are may change.
var resumable = []string{"iterations", "llama-lib"}

func runSelfplay(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "selfplay")
	config := fs.String("config", "", "YAML config (default: the built-in run: the built-in model in league self-play on Job Interview, docs/selfplay.md)")
	resume := fs.String("resume", "", "run directory to continue from its last checkpoint")
	out := fs.String("out", "", "run directory (default runs/selfplay-<time>)")
	overwrite := fs.Bool("overwrite", false, "start afresh in an --out directory that holds a previous run (its files are replaced)")
	ui := fs.String("ui", "", "serve a live training dashboard on this address, e.g. 127.0.0.1:8090 (its secret: $"+serveSecretEnv+", else drawn and printed)")
	of := cliflag.NewOptionFlags(fs, loop.Options{}.Defaults())
	bindSelfplay(of)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v: %w", fs.Args(), cliflag.ErrUsage)
	}
	o := loop.Options{}.Defaults()
	dir, mode := *out, loop.Fresh
	if *overwrite {
		mode = loop.Overwrite
	}
	var err error
	switch {
	case *resume != "":
		var bad []string
		for _, name := range of.Given() {
			if !slices.Contains(resumable, name) {
				bad = append(bad, "--"+name)
			}
		}
		if *config != "" || *overwrite || *out != "" && *out != *resume {
			bad = append(bad, "--config/--overwrite/--out")
		}
		if len(bad) > 0 {
			return fmt.Errorf("--resume continues a run with its own config and directory; %s cannot change it: %w", strings.Join(bad, ", "), cliflag.ErrUsage)
		}
		dir, mode = *resume, loop.Resume
		if o, err = loop.ReadConfig(dir); err != nil {
			return err
		}
	case *config != "":
		if err := strictyaml.DecodeFile(*config, &o); err != nil {
			return err
		}
	}
	if err := of.Apply(&o); err != nil {
		return err
	}
	if o.Rollout.LlamaLib == "" {
		o.Rollout.LlamaLib = llamaLibEnv()
	}
	if dir == "" {
		dir = filepath.Join("runs", "selfplay-"+time.Now().UTC().Format("20060102-150405"))
	}
	run, err := loop.Open(dir, o, mode, nil)
	if err != nil {
		var prev *loop.PreviousRunError
		if errors.As(err, &prev) {
			return fmt.Errorf("%w: %w", err, cliflag.ErrUsage)
		}
		return err
	}
	defer run.Close()
	if run.Options().Cluster.Enabled {
		l, err := cluster.Attach(ctx, run, env.stderr)
		if err != nil {
			return err
		}
		defer l.Close()
	}
	if err := run.PlotReward(); err != nil {
		return err
	}
	attachSelfplay(run, env)
	if *ui != "" {
		feed := web.NewRunFeed(run.Path(""))
		feed.Start(run.Options().Iterations)
		run.Hooks.Chain(loop.Hooks{Phase: feed.Phase, Episode: feed.Episode, Iteration: feed.Iteration})
		d, err := web.ServeDashboard(feed, *ui, os.Getenv(serveSecretEnv))
		if err != nil {
			return err
		}
		defer d.Close()
		fmt.Fprintf(env.stdout, "dashboard: %s\n", d.URL)
	}
	err = run.Train(ctx)
	if n := run.ScheduleBypasses(); n > 0 {
		fmt.Fprintf(env.stderr, "omar selfplay: warning: %d requests from outside the episodes' decode schedule were decoded out of turn; this run may not be reproducible to the bit\n", n)
	}
	st := run.State()
	switch {
	case errors.Is(err, loop.ErrStopped):
		fmt.Fprintf(env.stdout, "stopped early after iteration %d: %s\n", st.Iteration, st.Stopped)
		return nil
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(env.stdout, "interrupted after iteration %d; checkpoint in %s (continue with: omar selfplay --resume %s)\n",
			st.Iteration, run.Path(runfiles.CheckpointDir), dir)
		return nil
	case err != nil:
		return err
	}
	return run.WriteEnd(ctx, env.stdout)
}

// attachSelfplay prints a line per iteration, redraws the reward plot and,
// on a terminal, shows a progress bar.
func attachSelfplay(run *loop.Run, env *cliEnv) {
	total := run.Options().Iterations
	left := run.TimeLeft()
	// The bar shows the elapsed time: its description carries the time
	// left, which counts evaluations as a prediction from iterations
	// alone would not.
	bar := progress.NewElapsed(env.stderr, env.interactive, total, "selfplay")
	bar.Set(run.State().Iteration)
	phase := ""
	run.Hooks.Phase = func(it int, name string) {
		left.Enter(name)
		phase = name
		bar.Describe(fmt.Sprintf("iteration %d: %s · %s", it, name, left.Label(it, false)))
	}
	if bar.Drawn() {
		run.Hooks.Episode = func(it, done, n int) {
			bar.Describe(fmt.Sprintf("iteration %d: %s %d/%d episodes · %s", it, phase, done, n, left.Label(it, false)))
		}
	}
	run.Hooks.Iteration = func(m *runfiles.Metrics) {
		left.Finish()
		line := m.Line(total)
		if m.Iteration < total {
			line += "  " + left.Label(m.Iteration, true)
		}
		bar.Describe(fmt.Sprintf("iteration %d: reward %.3f · %s", m.Iteration, m.RewardMean, left.Label(m.Iteration, true)))
		bar.Set(m.Iteration)
		// The summary line goes to stdout next; the bar is drawn again by
		// its next update.
		bar.Clear()
		fmt.Fprintln(env.stdout, line)
		if err := run.PlotReward(); err != nil {
			fmt.Fprintf(env.stderr, "selfplay: reward plot: %v\n", err)
		}
	}
}
