package loop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// BuiltinParams are the negotiation games' parameters the built-in model
// is trained and played with: structured moves only (no free-text SAY
// lines), 4 turns per seat, short enough for a small model, and the
// compact texts (a seat stream about a third as long: the corpus trains
// 2.5× faster per step, rollouts and PPO passes cost less).
func BuiltinParams() map[string]any {
	return map[string]any{"structured_only": true, "rounds": 4, "compact": true}
}

// BuiltinOptions are the recipe of the built-in model: a corpus of the
// scripted policies' play, a tokenizer fitted to it, and a small model
// trained from scratch on it with every weight trainable.
type BuiltinOptions struct {
	Corpus CorpusOptions
	// Arch and Preset are the model's shape (model.PresetConfig); Vocab is
	// the fitted tokenizer's size (special tokens included).
	Arch, Preset string
	Vocab        int
	// SplitDigits keeps every digit its own token (model.BPEOptions).
	SplitDigits bool
	// PromptWeight trains on the prompt tokens too (briefings, other
	// seats' moves, the chat template), each at this fraction of a reply
	// token's weight; 0 trains on the replies alone. The prompts are most
	// of the corpus and full of what the replies need — numbers read back
	// in the next turn's notification, the rounds counting up — so a
	// model trained from scratch learns to read them sooner.
	PromptWeight float64
	// Steps optimizer steps of Batch sequences; Train the trainer's
	// options (Full, the schedule).
	Steps, Batch int
	Train        train.Options
	// CheckpointEvery steps a checkpoint is written into the work
	// directory (resume after an interrupt).
	CheckpointEvery int
	Seed            uint64
}

// DefaultBuiltin is the recipe `omar model default` follows.
func DefaultBuiltin() BuiltinOptions {
	var es []CorpusEnv
	for _, id := range envs.Negotiation {
		es = append(es, CorpusEnv{
			Env: id, Params: BuiltinParams(), Episodes: 288,
			// Strategic against both scripts, from both sides; only the
			// strategic seats are learnt.
			Casts: [][]string{{"strategic"}, {"strategic", "naive"}, {"naive", "strategic"}},
			Learn: []string{"strategic"}, Weight: 1,
		})
	}
	es = append(es,
		CorpusEnv{Env: "werewolf", Episodes: 24, Weight: 0.5},
		CorpusEnv{Env: "sotopia", Episodes: 24, Weight: 0.25},
	)
	t := train.Options{}.FullDefaults()
	t.LR = 2e-3
	t.LRSchedule, t.WarmupSteps, t.MinLRRatio = "cosine", 20, 0.1
	t.BatchTokens = 4096
	o := BuiltinOptions{
		Corpus: CorpusOptions{Envs: es, Seed: 1, MaxTokens: 64, Context: 4096},
		Arch:   "llama", Preset: "base", Vocab: 1024, SplitDigits: true, PromptWeight: 0.2,
		Steps: 2400, Batch: 8, Train: t, CheckpointEvery: 25, Seed: 1,
	}
	o.Train.TotalSteps = o.Steps
	return o
}

// Validate reports the first invalid option.
func (o BuiltinOptions) Validate() error {
	if err := o.Corpus.Validate(); err != nil {
		return err
	}
	switch {
	case o.Vocab < 300 || o.Vocab > 65536:
		return fmt.Errorf("builtin: vocab %d: want 300..65536", o.Vocab)
	case o.Steps < 1 || o.Batch < 1:
		return fmt.Errorf("builtin: steps %d and batch %d must be ≥ 1", o.Steps, o.Batch)
	case o.CheckpointEvery < 1:
		return fmt.Errorf("builtin: checkpoint every %d < 1", o.CheckpointEvery)
	case !o.Train.Full:
		return errors.New("builtin: the trainer must train every weight (train.full)")
	case !(o.PromptWeight >= 0 && o.PromptWeight <= 1):
		return fmt.Errorf("builtin: prompt weight %g: want 0..1", o.PromptWeight)
	}
	return validateTrain(o.Train)
}

// BuildHooks follow a build.
type BuildHooks struct {
	// Stage is called as a stage starts: corpus, tokenizer, train, save.
	Stage func(name string)
	// Corpus is called after each corpus episode.
	Corpus func(done, total int)
	// Step is called after each optimizer step with its loss.
	Step func(step, total int, loss float64)
}

// BuildReport says what a build did.
type BuildReport struct {
	Corpus       CorpusStats
	Sequences    int
	Params       int
	Losses       []float64 // per optimizer step
	CorpusTime   time.Duration
	TrainTime    time.Duration
	ResumedSteps int // steps taken from a checkpoint
}

// BuildBuiltin builds the built-in model into out. work is a directory
// for the intermediate files (the untrained model, checkpoints): a build
// interrupted (ctx cancelled) resumes from its last checkpoint there and
// finishes with the same bytes as an uninterrupted one.
func BuildBuiltin(ctx context.Context, o BuiltinOptions, out, work, libDir string, h BuildHooks) (*BuildReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	stage := func(s string) {
		if h.Stage != nil {
			h.Stage(s)
		}
	}
	rep := &BuildReport{}
	start := time.Now()
	// 1. The tokenizer: BPE merges fitted to the corpus's text, read
	// through the generated models' byte-level vocabulary (any vocabulary
	// renders the same text).
	stage("tokenizer")
	first, err := scripted.New(scripted.Options{Rule: func(inference.Request) string { return "" }})
	if err != nil {
		return nil, err
	}
	p := &selfplay.Player{Label: "corpus", Backend: first, Tokenizer: first}
	trajs, _, err := BuildCorpus(ctx, o.Corpus, p, nil)
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, t := range trajs {
		s, err := first.Detokenize(t.Tokens)
		if err != nil {
			return nil, err
		}
		text.WriteString(s)
		text.WriteByte('\n')
	}
	merges, err := model.TrainBPEWith(text.String(), o.Vocab-3, model.BPEOptions{SplitDigits: o.SplitDigits})
	if err != nil {
		return nil, fmt.Errorf("builtin: fit the tokenizer: %w", err)
	}
	// 2. The untrained model with that tokenizer.
	init := filepath.Join(work, "init.gguf")
	mo := model.Options{Arch: o.Arch, Preset: o.Preset, Seed: o.Seed, Merges: merges, ContextLength: o.Corpus.Context}
	if err := model.WriteFile(init, mo); err != nil {
		return nil, err
	}
	// 3. The corpus rendered through the model's own tokenizer and chat
	// template (llama.cpp's, as self-play will render it).
	stage("corpus")
	lo := llama.Options{}.Defaults()
	if libDir != "" {
		lo.LibDir = libDir
	}
	lo.Model, lo.Parallel, lo.Context = init, 1, 256
	lb, err := llama.New(lo)
	if err != nil {
		return nil, err
	}
	defer lb.Close()
	corpus, st, err := BuildCorpus(ctx, o.Corpus, &selfplay.Player{Label: "corpus", Backend: lb, Tokenizer: lb}, h.Corpus)
	if err != nil {
		return nil, err
	}
	rep.Corpus, rep.CorpusTime = st, time.Since(start)

	// 4. Train every weight on the replies.
	stage("train")
	start = time.Now()
	to := o.Train
	to.LibDir, to.Seed = libDir, o.Seed
	tr, err := train.New(init, to)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	rep.Params = tr.TrainableParams()
	ckpt := filepath.Join(work, "checkpoint")
	if _, err := os.Stat(filepath.Join(ckpt, train.CheckpointFile)); err == nil {
		if _, err := tr.LoadCheckpoint(ckpt); err != nil {
			return nil, fmt.Errorf("builtin: resume: %w", err)
		}
		rep.ResumedSteps = tr.Steps()
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x62756c74)) // "bult"
	var epoch []train.Sequence
	epochs := 0
	next := 0
	// The data order is a function of the seed alone: replay it up to the
	// resumed step.
	batch := func() []train.Sequence {
		b := make([]train.Sequence, 0, o.Batch)
		for len(b) < o.Batch {
			if next >= len(epoch) {
				epoch = WeightedSequences(corpus, o.Seed, epochs)
				rng.Shuffle(len(epoch), func(i, j int) { epoch[i], epoch[j] = epoch[j], epoch[i] })
				epochs++
				next = 0
			}
			b = append(b, withPromptWeight(epoch[next], float32(o.PromptWeight)))
			next++
		}
		return b
	}
	for range rep.ResumedSteps {
		batch()
	}
	for step := tr.Steps(); step < o.Steps; step++ {
		b := batch()
		rep.Sequences += len(b)
		loss, err := tr.SFTStep(ctx, b)
		if err != nil {
			if ctx.Err() != nil {
				if cerr := tr.SaveCheckpoint(ckpt, nil); cerr != nil {
					return nil, errors.Join(err, cerr)
				}
			}
			return nil, err
		}
		rep.Losses = append(rep.Losses, loss)
		if h.Step != nil {
			h.Step(step+1, o.Steps, loss)
		}
		if (step+1)%o.CheckpointEvery == 0 {
			if err := tr.SaveCheckpoint(ckpt, nil); err != nil {
				return nil, err
			}
		}
	}
	rep.TrainTime = time.Since(start)
	stage("save")
	if err := tr.SaveModel(out, gguf.F32); err != nil {
		return nil, err
	}
	return rep, nil
}

// withPromptWeight returns s trained on every token: the replies at weight
// 1, the rest at w (s itself when w is 0).
func withPromptWeight(s train.Sequence, w float32) train.Sequence {
	if w == 0 {
		return s
	}
	mask := make([]bool, len(s.Tokens))
	weights := make([]float32, len(s.Tokens))
	for i := range mask {
		mask[i] = true
		weights[i] = w
		if s.Mask[i] {
			weights[i] = 1
		}
	}
	s.Mask, s.Weights = mask, weights
	return s
}
