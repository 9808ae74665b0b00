package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

func init() {
	register(command{name: "sft", summary: "supervised warm-up: train a LoRA adapter on the generated tokens of recorded trajectories", run: runSFT})
}

// sftFlags are the options of omar sft.
type sftFlags struct {
	model, data, out, checkpoint, resume, llamaLib string
	epochs, batch                                  int
	minReward                                      float64
	train                                          train.Options
	modules                                        string
}

func (f *sftFlags) bind(fs *flag.FlagSet) {
	d := train.Options{}.Defaults()
	f.train = d
	fs.StringVar(&f.model, "model", "", "base model GGUF (F32/F16/BF16; llama, qwen2 or qwen3)")
	fs.StringVar(&f.data, "data", "", "trajectories JSONL (omar rollout/selfplay output, traj.jsonl)")
	fs.StringVar(&f.out, "out", "adapter.gguf", "where to write the LoRA adapter")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "directory for a trainer checkpoint at the end (optional)")
	fs.StringVar(&f.resume, "resume", "", "checkpoint directory to start from (optional)")
	fs.StringVar(&f.llamaLib, "llama-lib", os.Getenv("OMAR_LLAMA_LIB"), "llama.cpp library directory (default: OMAR_LLAMA_LIB or lib/llama/cpu)")
	fs.IntVar(&f.epochs, "epochs", 1, "passes over the data")
	fs.IntVar(&f.batch, "batch", 8, "trajectories per optimizer step")
	fs.Float64Var(&f.minReward, "min-reward", math.Inf(-1), "train only on trajectories with at least this terminal reward")
	fs.IntVar(&f.train.LoRARank, "lora-rank", d.LoRARank, "LoRA rank")
	fs.Func("lora-alpha", fmt.Sprintf("LoRA alpha (default %g)", d.LoRAAlpha), func(s string) error {
		var v float32
		_, err := fmt.Sscan(s, &v)
		f.train.LoRAAlpha = v
		return err
	})
	fs.StringVar(&f.modules, "lora-modules", strings.Join(d.LoRAModules, ","), "adapted matrices, comma-separated")
	fs.Func("lr", fmt.Sprintf("learning rate (default %g)", d.LR), func(s string) error {
		var v float32
		_, err := fmt.Sscan(s, &v)
		f.train.LR = v
		return err
	})
	fs.IntVar(&f.train.BatchTokens, "batch-tokens", d.BatchTokens, "padded tokens per forward/backward pass")
	fs.IntVar(&f.train.Threads, "threads", d.Threads, "CPU threads")
	fs.StringVar(&f.train.Device, "device", d.Device, "cpu or cuda")
	fs.Uint64Var(&f.train.Seed, "seed", d.Seed, "seed for the adapter initialisation and the data order")
}

// runSFT trains a LoRA adapter with masked cross-entropy on the tokens the
// policy generated in recorded trajectories (prompts and other seats'
// turns are context only), the supervised warm-up before RL.
func runSFT(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "sft")
	var f sftFlags
	f.bind(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sft: unexpected arguments %v", fs.Args())
	}
	if f.model == "" || f.data == "" {
		return errors.New("sft: --model and --data are required")
	}
	if f.epochs < 1 || f.batch < 1 {
		return fmt.Errorf("sft: --epochs %d and --batch %d must be ≥ 1", f.epochs, f.batch)
	}
	f.train.LoRAModules = strings.Split(f.modules, ",")
	if err := f.train.Validate(); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	seqs, err := readSFTData(f.data, f.minReward)
	if err != nil {
		return err
	}
	if len(seqs) == 0 {
		return fmt.Errorf("sft: no trajectory in %s has generated tokens and reward ≥ %g", f.data, f.minReward)
	}
	if err := llamacpp.Load(llamacpp.DefaultLibDir(f.llamaLib)); err != nil {
		return err
	}
	tr, err := train.New(f.model, f.train)
	if err != nil {
		return err
	}
	defer tr.Close()
	if f.resume != "" {
		if _, err := tr.LoadCheckpoint(f.resume); err != nil {
			return err
		}
	}

	steps := f.epochs * ((len(seqs) + f.batch - 1) / f.batch)
	bar := newProgress(env, steps, "sft")
	defer bar.finish()
	rng := rand.New(rand.NewPCG(f.train.Seed, 0x736674)) // "sft"
	start := time.Now()
	tokens := 0
	for epoch := range f.epochs {
		order := rng.Perm(len(seqs))
		var sum float64
		n := 0
		for s := 0; s < len(order); s += f.batch {
			batch := make([]train.Sequence, 0, f.batch)
			for _, i := range order[s:min(s+f.batch, len(order))] {
				batch = append(batch, seqs[i])
				tokens += len(seqs[i].Tokens)
			}
			loss, err := tr.SFTStep(ctx, batch)
			if err != nil {
				if ctx.Err() != nil {
					// Interrupted: the unfinished step was not applied, so
					// what was trained so far is consistent; keep it.
					if serr := saveSFT(tr, f); serr != nil {
						return errors.Join(err, serr)
					}
					fmt.Fprintf(env.stderr, "sft: interrupted; adapter after %d steps written to %s\n", tr.Steps(), f.out)
				}
				return err
			}
			sum += loss
			n++
			bar.add(1)
			bar.describe(fmt.Sprintf("sft loss %.3f", loss))
		}
		fmt.Fprintf(env.stdout, "epoch %d: mean loss %.4f over %d steps\n", epoch+1, sum/float64(n), n)
	}
	bar.finish()
	if err := saveSFT(tr, f); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(env.stdout, "trained on %d trajectories (%d tokens) in %s (%.0f tokens/s); adapter written to %s\n",
		len(seqs), tokens, el.Round(time.Millisecond), float64(tokens)/el.Seconds(), f.out)
	return nil
}

// saveSFT writes the adapter and, when asked for, a checkpoint.
func saveSFT(tr *train.Trainer, f sftFlags) error {
	if err := tr.SaveAdapter(f.out); err != nil {
		return err
	}
	if f.checkpoint != "" {
		return tr.SaveCheckpoint(f.checkpoint, nil)
	}
	return nil
}

// readSFTData reads trajectories and keeps those with generated tokens (and
// a reward of at least minReward) as training sequences.
func readSFTData(path string, minReward float64) ([]train.Sequence, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	defer fh.Close()
	trajs, err := selfplay.ReadTrajectories(fh)
	if err != nil {
		return nil, fmt.Errorf("sft: %s: %w", path, err)
	}
	var seqs []train.Sequence
	for _, t := range trajs {
		if t.Reward < minReward || len(t.Tokens) < 2 || t.Generated() == 0 {
			continue
		}
		seqs = append(seqs, train.Sequence{Tokens: t.Tokens, Mask: t.Mask})
	}
	return seqs, nil
}
