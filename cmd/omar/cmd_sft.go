package main

import (
	"context"
	"fmt"
	"time"

	"github.com/omar-selfplay/omar/bc"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
)

func init() {
	register(command{name: "sft", summary: "supervised warm-up: train a LoRA adapter on the generated tokens of recorded trajectories", run: runSFT})
}

// bindSFT binds omar sft's flags to its options.
func bindSFT(f *cliflag.OptionFlags[bc.SFTOptions]) {
	d := bc.SFTOptions{}.Defaults()
	f.String("model", "base model GGUF (F32/F16/BF16; llama, qwen2 or qwen3)", func(o *bc.SFTOptions) *string { return &o.Model })
	f.String("data", "trajectories JSONL (omar rollout/selfplay output): the policy's generated tokens are learnt", func(o *bc.SFTOptions) *string { return &o.Data })
	f.Strings("records", "episode records, comma-separated (omar play output): the seats' replies are learnt through the model's own seat streams (behaviour cloning)", func(o *bc.SFTOptions) *[]string { return &o.Records })
	f.Strings("learn", "with --records: learn only the seats of these agents, e.g. strategic (default every seat)", func(o *bc.SFTOptions) *[]string { return &o.Learn })
	f.Int("max-tokens", fmt.Sprintf("with --records: the seat streams' reply budget, as in self-play (default %d)", d.MaxTokens), func(o *bc.SFTOptions) *int { return &o.MaxTokens })
	f.Int("context", fmt.Sprintf("with --records: the seat streams' context, as in self-play (default %d)", d.Context), func(o *bc.SFTOptions) *int { return &o.Context })
	f.String("out", "where to write the LoRA adapter (default "+d.Out+")", func(o *bc.SFTOptions) *string { return &o.Out })
	f.String("checkpoint", "directory for a trainer checkpoint at the end (optional)", func(o *bc.SFTOptions) *string { return &o.Checkpoint })
	f.String("resume", "checkpoint directory to start from (optional)", func(o *bc.SFTOptions) *string { return &o.Resume })
	f.String("llama-lib", "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)", func(o *bc.SFTOptions) *string { return &o.Train.LibDir })
	f.Int("epochs", fmt.Sprintf("passes over the data (default %d)", d.Epochs), func(o *bc.SFTOptions) *int { return &o.Epochs })
	f.Int("batch", fmt.Sprintf("trajectories per optimizer step (default %d)", d.Batch), func(o *bc.SFTOptions) *int { return &o.Batch })
	f.Func("min-reward", "train only on trajectories with at least this terminal reward", func(o *bc.SFTOptions, v string) error {
		_, err := fmt.Sscan(v, &o.MinReward)
		return err
	})
	t := d.Train
	f.Int("lora-rank", fmt.Sprintf("LoRA rank (default %d)", t.LoRARank), func(o *bc.SFTOptions) *int { return &o.Train.LoRARank })
	f.Float32("lora-alpha", fmt.Sprintf("LoRA alpha (default %g)", t.LoRAAlpha), func(o *bc.SFTOptions) *float32 { return &o.Train.LoRAAlpha })
	f.Strings("lora-modules", "adapted matrices, comma-separated (default all)", func(o *bc.SFTOptions) *[]string { return &o.Train.LoRAModules })
	f.Float32("lr", fmt.Sprintf("learning rate (default %g)", t.LR), func(o *bc.SFTOptions) *float32 { return &o.Train.LR })
	f.Int("batch-tokens", fmt.Sprintf("padded tokens per forward/backward pass (default %d)", t.BatchTokens), func(o *bc.SFTOptions) *int { return &o.Train.BatchTokens })
	f.Int("threads", "CPU threads (default 0: the cores free for the process, measured every 5 s)", func(o *bc.SFTOptions) *int { return &o.Train.Threads })
	f.String("device", "cpu or cuda", func(o *bc.SFTOptions) *string { return &o.Train.Device })
	f.Uint64("seed", "seed for the adapter initialisation and the data order", func(o *bc.SFTOptions) *uint64 { return &o.Train.Seed })
}

// runSFT trains a LoRA adapter with masked cross-entropy on the tokens the
// policy generated in recorded trajectories (prompts and other seats'
// turns are context only), the supervised warm-up before RL.
func runSFT(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "sft")
	of := cliflag.NewOptionFlags(fs, bc.SFTOptions{}.Defaults())
	bindSFT(of)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v: %w", fs.Args(), cliflag.ErrUsage)
	}
	o := bc.SFTOptions{}.Defaults()
	if err := of.Apply(&o); err != nil {
		return err
	}
	if o.Train.LibDir == "" {
		o.Train.LibDir = llamaLibEnv()
	}
	if o.Model == "" || o.Data == "" && len(o.Records) == 0 {
		return fmt.Errorf("--model and --data or --records are required: %w", cliflag.ErrUsage)
	}
	var bar *progress.Bar
	start := time.Now()
	res, err := bc.SFT(ctx, o, bc.SFTHooks{
		Start: func(steps int) { bar = progress.New(env.stderr, env.interactive, steps, "sft") },
		Step: func(loss float64) {
			bar.Add(1)
			bar.Describe(fmt.Sprintf("sft loss %.3f", loss))
		},
		Epoch: func(epoch int, loss float64, steps int) {
			fmt.Fprintf(env.stdout, "epoch %d: mean loss %.4f over %d steps\n", epoch, loss, steps)
		},
	})
	bar.Finish()
	if err != nil {
		if res.Saved {
			fmt.Fprintf(env.stderr, "sft: interrupted; adapter after %d steps written to %s\n", res.Steps, o.Out)
		}
		return err
	}
	el := time.Since(start)
	if res.Skipped > 0 {
		fmt.Fprintf(env.stderr, "sft: %d records could not be cloned (a reply over --max-tokens, or a replay that diverged)\n", res.Skipped)
	}
	fmt.Fprintf(env.stdout, "trained on %d trajectories (%d tokens) in %s (%.0f tokens/s); adapter written to %s\n",
		res.Trajectories, res.Tokens, el.Round(time.Millisecond), float64(res.Tokens)/el.Seconds(), o.Out)
	return nil
}
