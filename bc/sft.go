package bc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// SFTOptions configure a supervised warm-up: masked cross-entropy on the
// tokens a policy generated in recorded trajectories (prompts and other
// seats' turns are context only).
type SFTOptions struct {
	// Model is the base GGUF; Data a trajectories JSONL file (the tokens
	// a policy generated are learnt).
	Model, Data string
	// Records are episode record files (omar play, rollout or selfplay
	// output) to clone: the seats whose agent is in Learn (empty: every
	// seat) are rendered through the model's own seat streams and chat
	// template exactly as self-play renders them (selfplay.Clone) with
	// MaxTokens and Context, and their replies are learnt. Data, Records
	// or both.
	Records            []string
	Learn              []string
	MaxTokens, Context int
	// Out is where the adapter is written; Checkpoint, when set, a
	// directory for a trainer checkpoint at the end; Resume one to start
	// from.
	Out, Checkpoint, Resume string
	// Adapter, when set, is a LoRA adapter (of Train's rank and modules)
	// the training starts from instead of a fresh one: a warm-up that
	// continues an earlier one (a cascade's SFT stage after another
	// stage). A Resume checkpoint replaces it.
	Adapter string
	// Epochs over the data; Batch trajectories per optimizer step.
	Epochs, Batch int
	// MinReward keeps only trajectories with at least this terminal
	// reward (−Inf keeps all).
	MinReward float64
	Train     train.Options
}

// Defaults returns one epoch, batches of 8, every trajectory, train's
// defaults with the trainer on the free cores, adapter.gguf.
func (SFTOptions) Defaults() SFTOptions {
	d := selfplay.Options{}.Defaults()
	t := train.Options{}.Defaults()
	t.Threads = 0 // the free cores (loop.TrainThreads)
	return SFTOptions{Out: "adapter.gguf", Epochs: 1, Batch: 8, MinReward: math.Inf(-1), Train: t,
		MaxTokens: d.MaxTokens, Context: d.Context}
}

// Validate reports the first invalid option.
func (o SFTOptions) Validate() error {
	switch {
	case o.Model == "" || o.Data == "" && len(o.Records) == 0:
		return errors.New("sft: a model and data (trajectories or episode records) are required")
	case len(o.Records) > 0 && (o.MaxTokens < 1 || o.Context < 2*o.MaxTokens):
		return fmt.Errorf("sft: max tokens %d and context %d: want max tokens ≥ 1 and context ≥ 2 × max tokens", o.MaxTokens, o.Context)
	case o.Epochs < 1 || o.Batch < 1:
		return fmt.Errorf("sft: epochs %d and batch %d must be ≥ 1", o.Epochs, o.Batch)
	case math.IsNaN(o.MinReward):
		return errors.New("sft: min reward is NaN")
	}
	if err := loop.ValidateTrain(o.Train); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	return nil
}

// SFTHooks follow an SFT run.
type SFTHooks struct {
	// Start is called with the number of optimizer steps to come.
	Start func(steps int)
	// Step is called after each optimizer step with its loss.
	Step func(loss float64)
	// Epoch is called after each epoch with its mean loss and steps.
	Epoch func(epoch int, meanLoss float64, steps int)
}

// SFTResult summarises an SFT run.
type SFTResult struct {
	Trajectories, Tokens, Steps int
	// Saved reports that the adapter was written (after an interrupt too).
	Saved bool
	// Skipped counts records that could not be cloned (a reply longer
	// than max tokens, a replay that diverged).
	Skipped int
}

// cloneForSFT clones o.Records through the model's own tokenizer and chat
// template (a llama backend of o.Model), keeping the rewards ≥ MinReward.
func cloneForSFT(ctx context.Context, o SFTOptions) ([]train.Sequence, int, error) {
	lo := llama.Options{}.Defaults()
	if o.Train.LibDir != "" {
		lo.LibDir = o.Train.LibDir
	}
	lo.Model, lo.Parallel, lo.Context = o.Model, 1, 256
	b, err := players.OpenLlamaOptions(lo)
	if err != nil {
		return nil, 0, fmt.Errorf("sft: %w", err)
	}
	defer b.Close()
	p := &selfplay.Player{Label: "clone", Backend: b, Tokenizer: b}
	trajs, skipped, err := CloneRecords(ctx, o.Records, o.Learn, p, o.MaxTokens, o.Context)
	if err != nil {
		return nil, skipped, fmt.Errorf("sft: %w", err)
	}
	keep := trajs[:0]
	for _, t := range trajs {
		if t.Reward >= o.MinReward && t.Generated() > 0 {
			keep = append(keep, t)
		}
	}
	seqs, _ := loop.Sequences(keep)
	return seqs, skipped, nil
}

// SFTSequences reads trajectories and keeps those with generated tokens
// and a reward of at least minReward, as training sequences
// (loop.Sequences' bridge: exactly the sampled ids).
func SFTSequences(path string, minReward float64) ([]train.Sequence, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	defer fh.Close()
	trajs, err := selfplay.ReadTrajectories(fh)
	if err != nil {
		return nil, fmt.Errorf("sft: %s: %w", path, err)
	}
	keep := trajs[:0]
	for _, t := range trajs {
		if t.Reward >= minReward && t.Generated() > 0 {
			keep = append(keep, t)
		}
	}
	seqs, _ := loop.Sequences(keep)
	return seqs, nil
}

// SFT trains a LoRA adapter on o.Data and writes it to o.Out. When ctx is
// cancelled between steps the adapter trained so far is written (the
// unfinished step was not applied, so it is consistent) and ctx's error is
// returned.
func SFT(ctx context.Context, o SFTOptions, hooks SFTHooks) (SFTResult, error) {
	var res SFTResult
	if err := o.Validate(); err != nil {
		return res, err
	}
	var seqs []train.Sequence
	if o.Data != "" {
		var err error
		if seqs, err = SFTSequences(o.Data, o.MinReward); err != nil {
			return res, err
		}
	}
	if len(o.Records) > 0 {
		cloned, skipped, err := cloneForSFT(ctx, o)
		if err != nil {
			return res, err
		}
		res.Skipped = skipped
		seqs = append(seqs, cloned...)
	}
	if len(seqs) == 0 {
		return res, fmt.Errorf("sft: no trajectory has generated tokens and reward ≥ %g", o.MinReward)
	}
	to := o.Train
	threads := loop.NewTrainThreads(&to)
	tr, err := train.New(o.Model, to)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	longest := 0
	for _, s := range seqs {
		longest = max(longest, len(s.Tokens))
	}
	// Refuse before the first step a trajectory no step could hold.
	if err := tr.CheckSequence(longest); err != nil {
		return res, fmt.Errorf("sft: the longest trajectory, %d tokens: %w", longest, err)
	}
	threads.Begin()
	if o.Adapter != "" {
		if err := tr.LoadAdapter(o.Adapter); err != nil {
			return res, fmt.Errorf("sft: %w", err)
		}
	}
	if o.Resume != "" {
		if _, err := tr.LoadCheckpoint(o.Resume); err != nil {
			return res, err
		}
	}
	res.Trajectories = len(seqs)
	if hooks.Start != nil {
		hooks.Start(o.Epochs * ((len(seqs) + o.Batch - 1) / o.Batch))
	}
	rng := rand.New(rand.NewPCG(o.Train.Seed, 0x736674)) // "sft"
	for epoch := range o.Epochs {
		order := rng.Perm(len(seqs))
		var sum float64
		n := 0
		for s := 0; s < len(order); s += o.Batch {
			batch := make([]train.Sequence, 0, o.Batch)
			for _, i := range order[s:min(s+o.Batch, len(order))] {
				batch = append(batch, seqs[i])
				res.Tokens += len(seqs[i].Tokens)
			}
			loss, err := tr.SFTStep(ctx, batch)
			if err == nil {
				err = threads.Tick(tr)
			}
			if err != nil {
				if ctx.Err() != nil {
					res.Steps = tr.Steps()
					if serr := saveSFT(tr, o); serr != nil {
						return res, errors.Join(err, serr)
					}
					res.Saved = true
				}
				return res, err
			}
			sum += loss
			n++
			if hooks.Step != nil {
				hooks.Step(loss)
			}
		}
		if hooks.Epoch != nil {
			hooks.Epoch(epoch+1, sum/float64(n), n)
		}
	}
	res.Steps = tr.Steps()
	if err := saveSFT(tr, o); err != nil {
		return res, err
	}
	res.Saved = true
	return res, nil
}

// saveSFT writes the adapter and, when asked for, a checkpoint.
func saveSFT(tr *train.Trainer, o SFTOptions) error {
	if err := tr.SaveAdapter(o.Out); err != nil {
		return err
	}
	if o.Checkpoint != "" {
		return tr.SaveCheckpoint(o.Checkpoint, nil)
	}
	return nil
}
