package train

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// StepBench is what BenchStep measures ('omar bench train'); its JSON
// keys are flat, as scripts/gpu-check.sh reads them.
type StepBench struct {
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

// WriteText writes r for a person: the model and the sequences, each
// device's step time, and with a comparison the speed-up and the largest
// differences between the devices.
func (r StepBench) WriteText(w io.Writer) {
	fmt.Fprintf(w, "model %s (%s): %d sequences, %d tokens, %d trained\n", r.Model, r.Arch, r.Sequences, r.Tokens, r.Trained)
	fmt.Fprintf(w, "%-5s %-8s PPO step %9.2f ms median of %d (min %.2f), %10.0f tokens/s, %d CPU threads\n",
		r.Device, r.Backend, r.StepMSMedian, r.Steps, r.StepMSMin, r.TokensPerS, r.Threads)
	if r.CompareDevice == "" {
		return
	}
	fmt.Fprintf(w, "%-5s %-8s PPO step %9.2f ms median of %d (min %.2f): %s is %.2f× as fast\n",
		r.CompareDevice, r.CompareBackend, r.CompareStepMSMedian, r.Steps, r.CompareStepMSMin, r.Device, r.Speedup)
	fmt.Fprintf(w, "largest |%s − %s|:\n", r.Device, r.CompareDevice)
	for _, d := range []struct {
		name string
		v    *float64
	}{
		{"logprobs", r.DiffLogprobs}, {"reference logprobs", r.DiffRefLogprobs},
		{"loss (first update)", r.DiffLoss}, {"gradient norm (first update)", r.DiffGradNorm},
		{"logprobs after the update", r.DiffLogprobsAfter}, {"values after the update", r.DiffValuesAfter},
	} {
		fmt.Fprintf(w, "  %-30s %.3g\n", d.name, *d.v)
	}
}

// BenchOptions say what BenchStep measures: Steps timed PPO steps (after
// one untimed) on Device over Sequences random sequences of MinLen to
// MaxLen tokens drawn from Seed, and with Compare (a device, or "") the
// same on that device and the largest differences between the two.
type BenchOptions struct {
	Device, Compare                  string
	Sequences, MinLen, MaxLen, Steps int
	Seed                             uint64
}

// BenchStep times PPO steps of the model at path under o and, with
// b.Compare, checks one device against another from the same seed and
// sequences: logprobs and reference logprobs before the first update,
// its loss and gradient norm, logprobs and values after it.
func BenchStep(ctx context.Context, path string, o Options, b BenchOptions) (StepBench, error) {
	device, compare, n, minLen, maxLen, steps, seed := b.Device, b.Compare, b.Sequences, b.MinLen, b.MaxLen, b.Steps, b.Seed
	res := StepBench{Model: path, Device: device, Threads: o.Threads, Steps: steps, Sequences: n}
	open := func(dev string) (*Trainer, error) {
		od := o
		od.Device = dev
		tr, err := New(path, od)
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

	var cmp *Trainer
	if compare != "" {
		if cmp, err = open(compare); err != nil {
			return res, err
		}
		defer cmp.Close()
		res.CompareDevice, res.CompareBackend = compare, cmp.Backend()
	}
	// The behaviour policy: the reference side's scores (the compared
	// device's when there is one), as after a rollout's Evaluate.
	ref := a
	if cmp != nil {
		ref = cmp
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
	if cmp != nil {
		got, err := a.Evaluate(ctx, seqs)
		if err != nil {
			return res, err
		}
		res.DiffLogprobs = maxDiff(got, before, func(s Score) []float32 { return s.Logprobs })
		res.DiffRefLogprobs = maxDiff(got, before, func(s Score) []float32 { return s.RefLogprobs })
	}
	// The first step: untimed on both (it builds the graphs), compared.
	sa, err := a.Step(ctx, seqs)
	if err != nil {
		return res, fmt.Errorf("device %s: %w", device, err)
	}
	if cmp != nil {
		sb, err := cmp.Step(ctx, seqs)
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
		gb, err := cmp.Evaluate(ctx, seqs)
		if err != nil {
			return res, err
		}
		res.DiffLogprobsAfter = maxDiff(ga, gb, func(s Score) []float32 { return s.Logprobs })
		res.DiffValuesAfter = maxDiff(ga, gb, func(s Score) []float32 { return s.Values })
	}
	timeSteps := func(tr *Trainer) (median, low float64, err error) {
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
	if cmp != nil {
		if res.CompareStepMSMedian, res.CompareStepMSMin, err = timeSteps(cmp); err != nil {
			return res, fmt.Errorf("device %s: %w", compare, err)
		}
		res.Speedup = res.CompareStepMSMedian / res.StepMSMedian
	}
	return res, nil
}

// maxDiff is the largest |a−b| over every entry of the field of every
// score; both sides score the same sequences, so the lengths agree.
func maxDiff(a, b []Score, field func(Score) []float32) *float64 {
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
func benchSequences(seed uint64, n, minLen, maxLen, vocab int) []Sequence {
	r := rand.New(rand.NewPCG(seed, 0x62656e6368)) // "bench"
	seqs := make([]Sequence, n)
	for i := range seqs {
		l := minLen + r.IntN(maxLen-minLen+1)
		s := Sequence{Tokens: make([]int32, l), Mask: make([]bool, l),
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
