package bc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
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
	"github.com/omar-selfplay/omar/internal/atomicfile"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/cpuvariant"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// BuildOptions are the recipe of the built-in model: a corpus of the
// scripted policies' play, a tokenizer fitted to it, and a small model
// trained from scratch on it with every weight trainable.
type BuildOptions struct {
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
	// Seed draws the initial weights and the order of the batches (the
	// corpus has its own, Corpus.Seed): another seed is another draw of
	// the same recipe, which is how far apart two builds of it land.
	Seed uint64
	// Dagger are the rounds of dataset aggregation after behaviour
	// cloning (none when Rounds is 0).
	Dagger DaggerOptions
	// CPUVariant pins ggml's CPU kernels (cpuvariant.Dir) so that every
	// machine that runs them builds the same bytes; "" loads the best
	// variant for the CPU, whose bytes hold on CPUs of that kind alone.
	CPUVariant string `json:",omitempty"`
}

// DefaultBuild is the recipe `omar model default` follows.
func DefaultBuild() BuildOptions {
	var es []CorpusEnv
	for _, id := range envs.Negotiation {
		es = append(es, CorpusEnv{
			Env: id, Params: loop.BuiltinParams(), Episodes: 576,
			// Strategic against both scripts, from both sides; only the
			// strategic seats are learnt.
			Casts: [][]string{{"strategic"}, {"strategic", "naive"}, {"naive", "strategic"}},
			Learn: []string{"strategic"}, Weight: 1,
		})
	}
	es = append(es,
		CorpusEnv{Env: "werewolf", Episodes: 48, Weight: 0.5},
		CorpusEnv{Env: "sotopia", Episodes: 48, Weight: 0.25},
	)
	t := train.Options{}.FullDefaults()
	t.LR = 2e-3
	t.LRSchedule, t.WarmupSteps, t.MinLRRatio = "cosine", 20, 0.1
	t.BatchTokens = 4096
	o := BuildOptions{
		Corpus: CorpusOptions{Envs: es, Seed: 1, MaxTokens: 64, Context: 4096},
		Arch:   "llama", Preset: "base", Vocab: 1024, SplitDigits: true, PromptWeight: 0.2,
		Steps: 4800, Batch: 8, Train: t, CheckpointEvery: 25, Seed: 1,
		// Off: two rounds did not change the held-out reward
		// (docs/results/2026-12-03-builtin-model-dagger.md);
		// `--dagger-rounds N` turns them on.
		Dagger: DaggerOptions{
			Rounds: 0, Games: DaggerGames(), Episodes: 64, Steps: 600, LR: 5e-4, Weight: 2,
		},
	}
	o.Train.TotalSteps = o.Steps
	return o
}

// Validate reports the first invalid option.
func (o BuildOptions) Validate() error {
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
	if err := o.Dagger.Validate(); err != nil {
		return err
	}
	return loop.ValidateTrain(o.Train)
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
	// ReusedSteps are the cloning stage's steps not run because its model
	// was in the work directory (a build with DAgger rounds resumed).
	ReusedSteps int
	// Dagger are the DAgger rounds' play and labels, in order.
	Dagger []DaggerStats
}

// Build builds the built-in model into out. work is a directory
// for the intermediate files (the untrained model, checkpoints): a build
// interrupted (ctx cancelled) resumes from its last checkpoint there and
// finishes with the same bytes as an uninterrupted one.
func Build(ctx context.Context, o BuildOptions, out, work, libDir string, h BuildHooks) (*BuildReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	if err := checkWork(work, o); err != nil {
		return nil, err
	}
	libDir, err := loadCPUVariant(o.CPUVariant, libDir)
	if err != nil {
		return nil, err
	}
	b := &build{o: o, out: out, work: work, libDir: libDir, h: h, rep: &BuildReport{}, losses: filepath.Join(work, lossesFile)}
	if b.recorded, err = readLosses(b.losses); err != nil {
		return nil, err
	}
	start := time.Now()
	// 1. The tokenizer and 2. the untrained model with it.
	b.stage("tokenizer")
	init, err := b.untrained(ctx)
	if err != nil {
		return nil, err
	}
	// 3. The corpus rendered through the model's own tokenizer and chat
	// template (llama.cpp's, as self-play will render it).
	b.stage("corpus")
	corpus, lb, err := b.corpus(ctx, init)
	if err != nil {
		return nil, err
	}
	defer lb.Close()
	b.rep.CorpusTime = time.Since(start)
	// 4. Train every weight on the replies: behaviour cloning, then the
	// DAgger rounds, each from the previous stage's weights.
	b.stage("train")
	start = time.Now()
	if err := b.train(ctx, init, corpus); err != nil {
		return nil, err
	}
	b.rep.TrainTime = time.Since(start)
	return b.rep, nil
}

// loadCPUVariant loads the library of the pinned CPU variant of ggml's
// kernels, before the backend and the trainer would load the default one,
// and returns its directory (libDir itself when variant is "").
func loadCPUVariant(variant, libDir string) (string, error) {
	if variant == "" {
		return libDir, nil
	}
	dir, err := cpuvariant.Dir(llamacpp.DefaultLibDir(libDir), variant)
	if err != nil {
		return "", fmt.Errorf("builtin: %w", err)
	}
	if err := llamacpp.Load(dir); err != nil {
		return "", fmt.Errorf("builtin: the %s CPU kernels (does this CPU run them?): %w", variant, err)
	}
	return dir, nil
}

// build is one Build in progress: its options, directories, hooks, the
// report it fills, and the losses file of its work directory (recorded:
// what that file held when the build started).
type build struct {
	o                 BuildOptions
	out, work, libDir string
	h                 BuildHooks
	rep               *BuildReport
	losses            string
	recorded          []float64
}

func (b *build) stage(s string) {
	if b.h.Stage != nil {
		b.h.Stage(s)
	}
}

// untrained fits the tokenizer — BPE merges fitted to the corpus's text,
// read through the generated models' byte-level vocabulary (any
// vocabulary renders the same text) — and writes the untrained model
// with it into the work directory, whose path it returns.
func (b *build) untrained(ctx context.Context) (string, error) {
	o := b.o
	first, err := scripted.New(scripted.Options{Rule: func(inference.Request) string { return "" }})
	if err != nil {
		return "", err
	}
	p := &selfplay.Player{Label: "corpus", Backend: first, Tokenizer: first}
	trajs, _, err := BuildCorpus(ctx, o.Corpus, p, nil)
	if err != nil {
		return "", err
	}
	var text strings.Builder
	for _, t := range trajs {
		s, err := first.Detokenize(t.Tokens)
		if err != nil {
			return "", err
		}
		text.WriteString(s)
		text.WriteByte('\n')
	}
	merges, err := model.TrainBPEWith(text.String(), o.Vocab-3, model.BPEOptions{SplitDigits: o.SplitDigits})
	if err != nil {
		return "", fmt.Errorf("builtin: fit the tokenizer: %w", err)
	}
	init := filepath.Join(b.work, "init.gguf")
	mo := model.Options{Arch: o.Arch, Preset: o.Preset, Seed: o.Seed, Merges: merges, ContextLength: o.Corpus.Context}
	if err := model.WriteFile(init, mo); err != nil {
		return "", err
	}
	return init, nil
}

// corpus renders the corpus through the untrained model's tokenizer and
// chat template, on a llama backend of it that the caller closes once the
// build is done.
func (b *build) corpus(ctx context.Context, init string) ([]WeightedTrajectory, *llama.Backend, error) {
	lo := llama.Options{}.Defaults()
	if b.libDir != "" {
		lo.LibDir = b.libDir
	}
	lo.Model, lo.Parallel, lo.Context = init, 1, 256
	lb, err := players.OpenLlamaOptions(lo)
	if err != nil {
		return nil, nil, err
	}
	corpus, st, err := BuildCorpus(ctx, b.o.Corpus, &selfplay.Player{Label: "corpus", Backend: lb, Tokenizer: lb}, b.h.Corpus)
	if err != nil {
		lb.Close()
		return nil, nil, err
	}
	b.rep.Corpus = st
	return corpus, lb, nil
}

// train trains every weight of the model at init on the corpus's replies
// (behaviour cloning), then runs the DAgger rounds, each from the previous
// stage's weights; the last stage writes out. A stage whose model is in
// the work directory already (a resumed build with DAgger rounds) is not
// trained again.
func (b *build) train(ctx context.Context, init string, corpus []WeightedTrajectory) error {
	o := b.o
	final := b.out
	if o.Dagger.Rounds > 0 {
		final = filepath.Join(b.work, "bc.gguf")
	}
	pw := float32(o.PromptWeight)
	cloned := func(epoch int) []train.Sequence {
		seqs := WeightedSequences(corpus, o.Seed, epoch)
		for i := range seqs {
			seqs[i] = withPromptWeight(seqs[i], pw)
		}
		return seqs
	}
	to := o.Train
	to.LibDir, to.Seed = b.libDir, o.Seed
	if _, err := os.Stat(final); err != nil || o.Dagger.Rounds == 0 {
		sh := stepHook{h: b.h.Step, done: 0, total: o.TotalSteps(), losses: b.losses, recorded: b.recorded}
		if err := trainStage(ctx, init, final, filepath.Join(b.work, "checkpoint"), to, o.Steps, o.Batch, o.CheckpointEvery, cloned, rand.New(rand.NewPCG(o.Seed, 0x62756c74)), sh, b.rep); err != nil { // "bult"
			return err
		}
	} else {
		b.rep.ReusedSteps = o.Steps
		b.rep.Losses = append(b.rep.Losses, span(b.recorded, 0, o.Steps)...)
	}
	var labelled []train.Sequence
	for r := 1; r <= o.Dagger.Rounds; r++ {
		from := final
		final = filepath.Join(b.work, fmt.Sprintf("dagger%d.gguf", r))
		if r == o.Dagger.Rounds {
			final = b.out
		}
		seqs, err := b.playRound(ctx, r, from, pw)
		if err != nil {
			return err
		}
		labelled = append(labelled, seqs...)
		if _, err := os.Stat(final); err == nil && r < o.Dagger.Rounds {
			// Trained before an interrupt; its labels are needed again.
			b.rep.Losses = append(b.rep.Losses, span(b.recorded, len(b.rep.Losses), o.Dagger.Steps)...)
			continue
		}
		b.stage(fmt.Sprintf("dagger round %d: train", r))
		rto := to
		rto.LR, rto.TotalSteps = float32(o.Dagger.LR), o.Dagger.Steps
		mixed := func(epoch int) []train.Sequence {
			seqs := cloned(epoch)
			for i, s := range labelled {
				n := repeats(o.Dagger.Weight, seeds.Derive(o.Seed, uint64(r), uint64(epoch), uint64(i)))
				for range n {
					seqs = append(seqs, s)
				}
			}
			return seqs
		}
		sh := stepHook{h: b.h.Step, done: o.Steps + (r-1)*o.Dagger.Steps, total: o.TotalSteps(), losses: b.losses, recorded: b.recorded}
		ckpt := filepath.Join(b.work, fmt.Sprintf("checkpoint-dagger%d", r))
		if err := trainStage(ctx, from, final, ckpt, rto, o.Dagger.Steps, o.Batch, o.CheckpointEvery, mixed, rand.New(rand.NewPCG(o.Seed, 0x64616767+uint64(r))), sh, b.rep); err != nil {
			return err
		}
	}
	return nil
}

// playRound plays DAgger round r with the model at from and returns the
// sequences its labels teach (the round's stats go into the report).
func (b *build) playRound(ctx context.Context, r int, from string, pw float32) ([]train.Sequence, error) {
	b.stage(fmt.Sprintf("dagger round %d: play", r))
	lo := llama.Options{}.Defaults()
	if b.libDir != "" {
		lo.LibDir = b.libDir
	}
	lo.Model, lo.Parallel, lo.Context = from, 2, b.o.Corpus.Context
	// One sequence decodes at a time: more threads only spin.
	lo.Threads, lo.ThreadsBatch = 1, 1
	lo.KVType = llamacpp.KVTypeF32
	mb, err := players.OpenLlamaOptions(lo)
	if err != nil {
		return nil, err
	}
	seqs, dst, err := daggerPlay(ctx, b.o.Corpus, b.o.Dagger, r, labelPlayer(mb), pw, b.o.Seed)
	mb.Close()
	if err != nil {
		return nil, err
	}
	b.rep.Dagger = append(b.rep.Dagger, dst)
	return seqs, nil
}

// TotalSteps are the optimizer steps of a whole build.
func (o BuildOptions) TotalSteps() int { return o.Steps + o.Dagger.Rounds*o.Dagger.Steps }

// stepHook reports a stage's steps as steps of the whole build, and
// keeps their losses in the work directory's losses file (recorded is
// what that file held when the build started).
type stepHook struct {
	h           func(step, total int, loss float64)
	done, total int
	losses      string
	recorded    []float64
}

// trainStage trains every weight of the model at from for steps optimizer
// steps of batch sequences and writes it to out. The data is epochs of
// data(epoch), shuffled by rng: a function of the seeds alone, replayed up
// to a step resumed from the checkpoint in ckpt (written every
// checkpointEvery steps and on an interrupt).
func trainStage(ctx context.Context, from, out, ckpt string, to train.Options, steps, batch, checkpointEvery int, data func(epoch int) []train.Sequence, rng *rand.Rand, sh stepHook, rep *BuildReport) error {
	threads := loop.NewTrainThreads(&to)
	tr, err := train.New(from, to)
	if err != nil {
		return err
	}
	defer tr.Close()
	threads.Begin()
	rep.Params = tr.TrainableParams()
	resumed := 0
	if _, err := os.Stat(filepath.Join(ckpt, train.CheckpointFile)); err == nil {
		if _, err := tr.LoadCheckpoint(ckpt); err != nil {
			return fmt.Errorf("builtin: resume: %w", err)
		}
		resumed = tr.Steps()
		rep.ResumedSteps += resumed
		rep.Losses = append(rep.Losses, span(sh.recorded, sh.done, resumed)...)
	}
	var epoch []train.Sequence
	epochs, next := 0, 0
	take := func() []train.Sequence {
		b := make([]train.Sequence, 0, batch)
		for len(b) < batch {
			if next >= len(epoch) {
				epoch = data(epochs)
				rng.Shuffle(len(epoch), func(i, j int) { epoch[i], epoch[j] = epoch[j], epoch[i] })
				epochs++
				next = 0
			}
			b = append(b, epoch[next])
			next++
		}
		return b
	}
	for range resumed {
		take()
	}
	for step := tr.Steps(); step < steps; step++ {
		b := take()
		rep.Sequences += len(b)
		loss, err := tr.SFTStep(ctx, b)
		if err != nil {
			if ctx.Err() != nil {
				if cerr := tr.SaveCheckpoint(ckpt, nil); cerr != nil {
					return errors.Join(err, cerr)
				}
				if cerr := writeLosses(sh.losses, rep.Losses); cerr != nil {
					return errors.Join(err, cerr)
				}
			}
			return err
		}
		rep.Losses = append(rep.Losses, loss)
		if err := threads.Tick(tr); err != nil {
			return err
		}
		if sh.h != nil {
			sh.h(sh.done+step+1, sh.total, loss)
		}
		if (step+1)%checkpointEvery == 0 {
			if err := tr.SaveCheckpoint(ckpt, nil); err != nil {
				return err
			}
			if err := writeLosses(sh.losses, rep.Losses); err != nil {
				return err
			}
		}
	}
	if err := tr.SaveModel(out, gguf.F32); err != nil {
		return err
	}
	return writeLosses(sh.losses, rep.Losses)
}

// lossesFile keeps in a work directory the loss of every optimizer step
// trained so far, in build order (null: a step whose loss a work
// directory of an older version did not keep), so that a resumed build
// reports and plots every step. A training step is a function of the
// recipe and the step alone (resumes are bit-identical), so the losses
// recorded for steps a resume trains again are the same numbers.
const lossesFile = "losses.json"

// readLosses reads a losses file (none: nil; null: NaN).
func readLosses(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var vs []*float64
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, fmt.Errorf("builtin: %s: %w (remove it to resume without the earlier steps' losses)", path, err)
	}
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = math.NaN()
		if v != nil {
			out[i] = *v
		}
	}
	return out, nil
}

// writeLosses writes a losses file (NaN: null).
func writeLosses(path string, losses []float64) error {
	vs := make([]*float64, len(losses))
	for i := range losses {
		if !math.IsNaN(losses[i]) {
			vs[i] = &losses[i]
		}
	}
	b, err := json.Marshal(vs)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

// span is the recorded losses of the n steps from step from (NaN where
// none was recorded).
func span(recorded []float64, from, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
		if j := from + i; j < len(recorded) {
			out[i] = recorded[j]
		}
	}
	return out
}

// repeats is how many times an item of sampling weight w is kept in an
// epoch: ⌊w⌋, plus one with probability w − ⌊w⌋ decided by the hash h.
func repeats(w float64, h uint64) int {
	n := int(w)
	if frac := w - float64(n); frac > 0 && float64(h>>11)/(1<<53) < frac {
		n++
	}
	return n
}

// recipeFile records in a work directory the recipe its files were made
// with.
const recipeFile = "recipe.json"

// checkWork records o's recipe in work, or checks that the files already
// there were made with the same one: checkpoints and stage models of
// another recipe would resume into a model of neither. What does not
// change the bytes — the thread count, the library directory, how many
// DAgger rounds follow the ones already trained — may differ.
func checkWork(work string, o BuildOptions) error {
	o.Train.Threads, o.Train.LibDir, o.Dagger.Rounds = 0, "", 0
	want, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("builtin: %w", err)
	}
	want = append(want, '\n')
	path := filepath.Join(work, recipeFile)
	got, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return atomicfile.Write(path, want, 0o644)
	case err != nil:
		return fmt.Errorf("builtin: %w", err)
	case !bytes.Equal(got, want):
		return fmt.Errorf("builtin: the work directory %s holds the files of another recipe (its %s differs from this build's options); remove it or choose another work directory", work, recipeFile)
	}
	return nil
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
