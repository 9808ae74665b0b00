package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/train"
)

// trainBench is what 'omar bench train' measures; --json prints it with
// these (flat) keys, which scripts/gpu-check.sh reads.
type trainBench struct {
	Model        string  `json:"model"`
	Arch         string  `json:"arch"`
	Device       string  `json:"device"`
	Backend      string  `json:"backend"`
	Threads      int     `json:"threads"`
	Sequences    int     `json:"sequences"`
	Tokens       int     `json:"tokens"`
	Trained      int     `json:"trained_tokens"`
	Steps        int     `json:"steps"`
	StepMSMedian float64 `json:"step_ms_median"`
	StepMSMin    float64 `json:"step_ms_min"`
	TokensPerS   float64 `json:"tokens_per_s"`
	// The same on the --compare device, and the largest differences
	// between the two (absent without --compare).
	CompareDevice       string   `json:"compare_device,omitempty"`
	CompareBackend      string   `json:"compare_backend,omitempty"`
	CompareStepMSMedian float64  `json:"compare_step_ms_median,omitempty"`
	CompareStepMSMin    float64  `json:"compare_step_ms_min,omitempty"`
	Speedup             float64  `json:"speedup,omitempty"` // compare median / median
	DiffLogprobs        *float64 `json:"max_diff_logprobs,omitempty"`
	DiffRefLogprobs     *float64 `json:"max_diff_ref_logprobs,omitempty"`
	DiffLoss            *float64 `json:"max_diff_loss,omitempty"`
	DiffGradNorm        *float64 `json:"max_diff_grad_norm,omitempty"`
	DiffLogprobsAfter   *float64 `json:"max_diff_logprobs_after_step,omitempty"`
	DiffValuesAfter     *float64 `json:"max_diff_values_after_step,omitempty"`
}

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
		return usagef("no positional arguments")
	case *device != "cpu" && *device != "cuda":
		return usagef("--device %q: want cpu or cuda", *device)
	case *compare != "" && *compare != "cpu" && *compare != "cuda":
		return usagef("--compare %q: want cpu or cuda", *compare)
	case *nSeqs < 1 || *steps < 1 || *threads < 1:
		return usagef("--seqs, --steps and --threads: want 1 or more")
	case *minLen < 2 || *maxLen < *minLen:
		return usagef("--min-len %d, --max-len %d: want 2 ≤ min ≤ max", *minLen, *maxLen)
	}
	if *modelPath == "" {
		dir, err := os.MkdirTemp("", "omar-bench-train")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*modelPath = filepath.Join(dir, *preset+".gguf")
		mo := model.Options{Arch: *arch, Preset: *preset, Seed: *seed}.Defaults()
		if err := mo.Validate(); err != nil {
			return usageError{err}
		}
		if err := model.WriteFile(*modelPath, mo); err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "no --model: using a random %s %s model (omar model init --arch %s --preset %s --seed %d)\n", *arch, *preset, *arch, *preset, *seed)
	}
	o := train.Options{}.Defaults()
	o.Threads, o.LoRARank, o.BatchTokens, o.Seed, o.LibDir = *threads, *rank, *batchTokens, *seed, *lib
	o.Epochs, o.MiniBatch = 1, *nSeqs // one optimizer step per Step
	res, err := benchTrain(ctx, *modelPath, o, *device, *compare, *nSeqs, *minLen, *maxLen, *steps, *seed)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(res)
	}
	writeTrainBench(env, res)
	return nil
}

// benchTrain times PPO steps on device and, with compare, on the other
// device too, after checking the two against each other from the same
// start: scores before any update, the first update's loss and gradient
// norm (same parameters on both), and scores after it.
func benchTrain(ctx context.Context, path string, o train.Options, device, compare string, n, minLen, maxLen, steps int, seed uint64) (trainBench, error) {
	res := trainBench{Model: path, Device: device, Threads: o.Threads, Steps: steps, Sequences: n}
	open := func(dev string) (*train.Trainer, error) {
		od := o
		od.Device = dev
		tr, err := train.New(path, od)
		if err != nil {
			return nil, fmt.Errorf("device %s: %w", dev, err)
		}
		return tr, nil
	}
	a, err := open(device)
	if err != nil {
		return res, err
	}
	defer a.Close()
	res.Backend, res.Arch = a.Backend(), a.Arch()
	seqs := benchSequences(seed, n, minLen, maxLen, a.Vocab())
	for _, s := range seqs {
		res.Tokens += len(s.Tokens)
		for _, m := range s.Mask {
			if m {
				res.Trained++
			}
		}
	}

	var b *train.Trainer
	if compare != "" {
		if b, err = open(compare); err != nil {
			return res, err
		}
		defer b.Close()
		res.CompareDevice, res.CompareBackend = compare, b.Backend()
	}
	// The behaviour policy: the reference side's scores (the compared
	// device's when there is one), as after a rollout's Evaluate.
	ref := a
	if b != nil {
		ref = b
	}
	before, err := ref.Evaluate(ctx, seqs)
	if err != nil {
		return res, err
	}
	for i := range seqs {
		seqs[i].OldLogprobs = before[i].Logprobs
		seqs[i].RefLogprobs = before[i].RefLogprobs
		seqs[i].OldValues = before[i].Values
	}
	if b != nil {
		got, err := a.Evaluate(ctx, seqs)
		if err != nil {
			return res, err
		}
		res.DiffLogprobs = maxDiff(got, before, func(s train.Score) []float32 { return s.Logprobs })
		res.DiffRefLogprobs = maxDiff(got, before, func(s train.Score) []float32 { return s.RefLogprobs })
	}
	// The first step: untimed on both (it builds the graphs), compared.
	sa, err := a.Step(ctx, seqs)
	if err != nil {
		return res, fmt.Errorf("device %s: %w", device, err)
	}
	if b != nil {
		sb, err := b.Step(ctx, seqs)
		if err != nil {
			return res, fmt.Errorf("device %s: %w", compare, err)
		}
		if len(sa.Updates) == 0 || len(sb.Updates) == 0 {
			return res, fmt.Errorf("a step took no optimizer step (%d and %d)", len(sa.Updates), len(sb.Updates))
		}
		loss := math.Abs(sa.Updates[0].Loss - sb.Updates[0].Loss)
		norm := math.Abs(sa.Updates[0].GradNorm - sb.Updates[0].GradNorm)
		res.DiffLoss, res.DiffGradNorm = &loss, &norm
		ga, err := a.Evaluate(ctx, seqs)
		if err != nil {
			return res, err
		}
		gb, err := b.Evaluate(ctx, seqs)
		if err != nil {
			return res, err
		}
		res.DiffLogprobsAfter = maxDiff(ga, gb, func(s train.Score) []float32 { return s.Logprobs })
		res.DiffValuesAfter = maxDiff(ga, gb, func(s train.Score) []float32 { return s.Values })
	}
	timeSteps := func(tr *train.Trainer) (median, low float64, err error) {
		ms := make([]float64, steps)
		for i := range ms {
			start := time.Now()
			if _, err := tr.Step(ctx, seqs); err != nil {
				return 0, 0, err
			}
			ms[i] = float64(time.Since(start).Microseconds()) / 1000
		}
		slices.Sort(ms)
		return ms[len(ms)/2], ms[0], nil
	}
	if res.StepMSMedian, res.StepMSMin, err = timeSteps(a); err != nil {
		return res, fmt.Errorf("device %s: %w", device, err)
	}
	res.TokensPerS = float64(res.Tokens) / (res.StepMSMedian / 1000)
	if b != nil {
		if res.CompareStepMSMedian, res.CompareStepMSMin, err = timeSteps(b); err != nil {
			return res, fmt.Errorf("device %s: %w", compare, err)
		}
		res.Speedup = res.CompareStepMSMedian / res.StepMSMedian
	}
	return res, nil
}

// maxDiff is the largest |a−b| over every entry of the field of every
// score; both sides score the same sequences, so the lengths agree.
func maxDiff(a, b []train.Score, field func(train.Score) []float32) *float64 {
	d := 0.0
	for i := range a {
		x, y := field(a[i]), field(b[i])
		for j := range min(len(x), len(y)) {
			d = max(d, math.Abs(float64(x[j])-float64(y[j])))
		}
	}
	return &d
}

// benchSequences draws n sequences of minLen to maxLen tokens with PPO's
// fields, deterministic in seed: masked runs of generated tokens after
// the first third (several turns of one seat), advantages and returns
// from a standard normal.
func benchSequences(seed uint64, n, minLen, maxLen, vocab int) []train.Sequence {
	r := rand.New(rand.NewPCG(seed, 0x62656e6368)) // "bench"
	seqs := make([]train.Sequence, n)
	for i := range seqs {
		l := minLen + r.IntN(maxLen-minLen+1)
		s := train.Sequence{Tokens: make([]int32, l), Mask: make([]bool, l),
			Advantages: make([]float32, l), Returns: make([]float32, l)}
		for j := range l {
			s.Tokens[j] = int32(r.IntN(vocab))
			if j >= l/3 && r.Float64() < 0.7 {
				s.Mask[j] = true
				s.Advantages[j] = float32(r.NormFloat64())
				s.Returns[j] = float32(r.NormFloat64())
			}
		}
		s.Mask[l-1] = true // at least one trained token
		seqs[i] = s
	}
	return seqs
}

func writeTrainBench(env *cliEnv, r trainBench) {
	fmt.Fprintf(env.stdout, "model %s (%s): %d sequences, %d tokens, %d trained\n", r.Model, r.Arch, r.Sequences, r.Tokens, r.Trained)
	fmt.Fprintf(env.stdout, "%-5s %-8s PPO step %9.2f ms median of %d (min %.2f), %10.0f tokens/s, %d CPU threads\n",
		r.Device, r.Backend, r.StepMSMedian, r.Steps, r.StepMSMin, r.TokensPerS, r.Threads)
	if r.CompareDevice == "" {
		return
	}
	fmt.Fprintf(env.stdout, "%-5s %-8s PPO step %9.2f ms median of %d (min %.2f): %s is %.2f× as fast\n",
		r.CompareDevice, r.CompareBackend, r.CompareStepMSMedian, r.Steps, r.CompareStepMSMin, r.Device, r.Speedup)
	fmt.Fprintf(env.stdout, "largest |%s − %s|:\n", r.Device, r.CompareDevice)
	for _, d := range []struct {
		name string
		v    *float64
	}{
		{"logprobs", r.DiffLogprobs}, {"reference logprobs", r.DiffRefLogprobs},
		{"loss (first update)", r.DiffLoss}, {"gradient norm (first update)", r.DiffGradNorm},
		{"logprobs after the update", r.DiffLogprobsAfter}, {"values after the update", r.DiffValuesAfter},
	} {
		fmt.Fprintf(env.stdout, "  %-30s %.3g\n", d.name, *d.v)
	}
}
