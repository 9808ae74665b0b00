package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/train"
)

func runBenchTrain(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "bench train")
	modelPath := fs.String("model", "", "GGUF model file (default: a random model of --preset)")
	preset := fs.String("preset", "tiny", "without --model: the size of the random model ("+strings.Join(model.Presets, ", ")+")")
	arch := fs.String("arch", "llama", "without --model: its architecture ("+strings.Join(model.Architectures, ", ")+")")
	device := fs.String("device", "cpu", "the trainer's device: cpu or cuda")
	compare := fs.String("compare", "", "also run on this device (cpu or cuda) from the same seed and sequences, and print the largest differences")
	threads := fs.Int("threads", 1, "CPU threads of the trainer (the CUDA trainer's CPU fallback too)")
	lib := fs.String("llama-lib", llamaLibEnv(), "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)")
	nSeqs := fs.Int("seqs", 8, "sequences per PPO step (one minibatch)")
	minLen := fs.Int("min-len", 64, "shortest sequence, tokens")
	maxLen := fs.Int("max-len", 128, "longest sequence, tokens")
	steps := fs.Int("steps", 5, "timed PPO steps per device (after one untimed)")
	rank := fs.Int("lora-rank", 8, "LoRA rank")
	batchTokens := fs.Int("batch-tokens", 2048, "padded tokens per forward/backward pass")
	seed := fs.Uint64("seed", 1, "seed of the sequences, the model and the adapter")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cliflag.Usagef("no positional arguments")
	case *device != "cpu" && *device != "cuda":
		return cliflag.Usagef("--device %q: want cpu or cuda", *device)
	case *compare != "" && *compare != "cpu" && *compare != "cuda":
		return cliflag.Usagef("--compare %q: want cpu or cuda", *compare)
	case *nSeqs < 1 || *steps < 1 || *threads < 1:
		return cliflag.Usagef("--seqs, --steps and --threads: want 1 or more")
	case *minLen < 2 || *maxLen < *minLen:
		return cliflag.Usagef("--min-len %d, --max-len %d: want 2 ≤ min ≤ max", *minLen, *maxLen)
	}
	if *modelPath == "" {
		mo := model.Options{Arch: *arch, Preset: *preset, Seed: *seed}.Defaults()
		if err := mo.Validate(); err != nil {
			return cliflag.Usage(err)
		}
		path, remove, err := model.WriteTemp(mo, *preset+".gguf")
		if err != nil {
			return err
		}
		defer remove()
		*modelPath = path
		fmt.Fprintf(env.stderr, "no --model: using a random %s %s model (omar model init --arch %s --preset %s --seed %d)\n", *arch, *preset, *arch, *preset, *seed)
	}
	o := train.Options{}.Defaults()
	o.Threads, o.LoRARank, o.BatchTokens, o.Seed, o.LibDir = *threads, *rank, *batchTokens, *seed, *lib
	o.Epochs, o.MiniBatch = 1, *nSeqs // one optimizer step per Step
	res, err := train.BenchStep(ctx, *modelPath, o, train.BenchOptions{Device: *device, Compare: *compare, Sequences: *nSeqs, MinLen: *minLen, MaxLen: *maxLen, Steps: *steps, Seed: *seed})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(res)
	}
	res.WriteText(env.stdout)
	return nil
}
