package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// fakeTrainer is a deterministic stand-in for train.Trainer: its
// "weights" are a running hash of every sequence it was stepped on, its
// scores a function of the tokens and the weights. It checks what the
// loop hands it: reference logprobs from Evaluate must reach Step.
type fakeTrainer struct {
	t       *testing.T
	weights uint64
	steps   int
}

func (f *fakeTrainer) score(s train.Sequence) train.Score {
	n := len(s.Tokens)
	sc := train.Score{Values: make([]float32, n), Logprobs: make([]float32, n), RefLogprobs: make([]float32, n)}
	for i := 1; i < n; i++ {
		h := uint64(s.Tokens[i])*0x9e3779b97f4a7c15 ^ f.weights
		sc.Values[i] = float32(h%1000) / 1000
		if s.Mask[i] {
			// The policy has moved away from the base: kl_ref > 0.
			sc.RefLogprobs[i] = -float32(uint64(s.Tokens[i])%997) / 300
			sc.Logprobs[i] = sc.RefLogprobs[i] + float32(h%100+1)/1000
		}
	}
	return sc
}

func (f *fakeTrainer) Evaluate(_ context.Context, seqs []train.Sequence) ([]train.Score, error) {
	out := make([]train.Score, len(seqs))
	for i, s := range seqs {
		out[i] = f.score(s)
	}
	return out, nil
}

func (f *fakeTrainer) Step(_ context.Context, seqs []train.Sequence) (train.Stats, error) {
	var st train.Stats
	var policy float64
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, f.weights)
	for i, s := range seqs {
		if len(s.RefLogprobs) != len(s.Tokens) || len(s.Advantages) != len(s.Tokens) || len(s.OldLogprobs) != len(s.Tokens) {
			f.t.Errorf("sequence %d reached Step without its scores (ref %d, adv %d, old %d for %d tokens)", i, len(s.RefLogprobs), len(s.Advantages), len(s.OldLogprobs), len(s.Tokens))
			continue
		}
		want := f.score(s)
		for k := range s.Tokens {
			if s.RefLogprobs[k] != want.RefLogprobs[k] {
				f.t.Errorf("sequence %d token %d: reference logprob %g, Evaluate gave %g", i, k, s.RefLogprobs[k], want.RefLogprobs[k])
				break
			}
		}
		binary.Write(h, binary.LittleEndian, s.Tokens)
		binary.Write(h, binary.LittleEndian, s.Advantages)
		for k, on := range s.Mask {
			if on {
				policy -= float64(s.Advantages[k])
				st.TrainedTokens++
			}
		}
		st.Tokens += len(s.Tokens)
	}
	f.weights = binary.LittleEndian.Uint64(h.Sum(nil))
	f.steps++
	st.OptimizerSteps = 1
	st.Terms = []train.TermStat{{Name: train.TermPolicy, Value: policy}, {Name: train.TermEntropy, Value: 1 + float64(f.weights%100)/100}}
	return st, nil
}

func (f *fakeTrainer) SaveAdapter(path string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf("fake adapter %d %d\n", f.steps, f.weights)), 0o644)
}

func (f *fakeTrainer) LoadAdapter(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = fmt.Sscanf(string(b), "fake adapter %d %d\n", &f.steps, &f.weights)
	return err
}

type fakeCheckpoint struct {
	Steps   int    `json:"steps"`
	Weights uint64 `json:"weights"`
	Extra   []byte `json:"extra"`
}

func (f *fakeTrainer) SaveCheckpoint(dir string, extra []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(fakeCheckpoint{f.steps, f.weights, extra})
	if err := os.WriteFile(filepath.Join(dir, "fake.ckpt"), b, 0o644); err != nil {
		return err
	}
	return f.SaveAdapter(filepath.Join(dir, train.AdapterFile))
}

func (f *fakeTrainer) LoadCheckpoint(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, "fake.ckpt"))
	if err != nil {
		return nil, err
	}
	var c fakeCheckpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	f.steps, f.weights = c.Steps, c.Weights
	return c.Extra, nil
}

func (f *fakeTrainer) Close() error { return nil }

// fakeSwapper records the adapters it is given.
type fakeSwapper struct {
	mu      sync.Mutex
	version int
	loaded  []string
	named   []string
}

func (s *fakeSwapper) SetAdapter(_ context.Context, path string, _ float32) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	s.loaded = append(s.loaded, strings.TrimSpace(string(b)))
	return s.version, nil
}

func (s *fakeSwapper) PolicyVersion() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// fakeParts plays sealed-bid auctions with a scripted "policy" that bids
// by the sampling seed, so that rewards vary between episodes.
func fakeParts(t *testing.T) *Parts {
	t.Helper()
	be, err := scripted.New(scripted.Options{Rule: func(req inference.Request) string {
		return "BID " + strconv.Itoa(int(req.Sampling.Seed%7))
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &Parts{
		Game:    sealedbid.New(),
		Policy:  &selfplay.Player{Label: "scripted-policy", Backend: be, Tokenizer: be},
		Swapper: &fakeSwapper{},
		Trainer: &fakeTrainer{t: t},
	}
}

func fakeOptions(iterations int) Options {
	o := Options{}.Defaults()
	o.Iterations = iterations
	o.Rollout.Env = "sealedbid"
	o.Rollout.Params = map[string]any{"rounds": 1, "bidders": 2}
	o.Rollout.Model = "unused.gguf" // Parts replace the model
	o.Rollout.Episodes, o.Rollout.Parallel = 4, 2
	o.Rollout.MaxTokens, o.Rollout.MinReplyTokens, o.Rollout.Context = 8, 4, 512
	o.Estimator = "rae"
	o.League.Enabled, o.Eval.Every = false, 0 // the tests that want them turn them on
	return o
}

// TestFakeRunResume runs the loop with fakes and no llama.cpp: three
// iterations straight, and again interrupted in iteration 2's rollout and
// resumed. Metrics (timings aside), the adapter and the swapped adapters
// must agree.
func TestFakeRunResume(t *testing.T) {
	dir := t.TempDir()
	straight := filepath.Join(dir, "straight")
	r, err := Open(straight, fakeOptions(3), Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	r.Hooks.Iteration = func(m *runfiles.Metrics) { seen = append(seen, m.Iteration) }
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seen) != "[1 2 3]" || r.State().Iteration != 3 || !r.Done() {
		t.Fatalf("iterations seen %v, state %+v", seen, r.State())
	}
	ms, err := runfiles.ReadMetrics(r.Path(runfiles.MetricsFile))
	if err != nil || len(ms) != 3 {
		t.Fatalf("metrics: %d lines, %v", len(ms), err)
	}
	for _, m := range ms {
		if m.Episodes != 4 || m.TrainedTokens == 0 || len(m.Reward) != 1 {
			t.Errorf("iteration %d: %d episodes, %d trained tokens, rewards %v", m.Iteration, m.Episodes, m.TrainedTokens, m.Reward)
		}
	}

	broken := filepath.Join(dir, "broken")
	parts := fakeParts(t)
	r, err = Open(broken, fakeOptions(3), Fresh, parts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Hooks.Phase = func(it int, phase string) {
		if it == 2 && phase == "rollout" {
			cancel()
		}
	}
	if err := r.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: got %v, want context.Canceled", err)
	}
	if r.State().Iteration != 1 {
		t.Fatalf("interrupted after iteration %d, want 1", r.State().Iteration)
	}
	// A resumed process starts with fresh parts.
	o, err := ReadConfig(broken)
	if err != nil {
		t.Fatal(err)
	}
	fresh := fakeParts(t)
	r, err = Open(broken, o, Resume, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, b := stable(t, filepath.Join(straight, runfiles.MetricsFile)), stable(t, filepath.Join(broken, runfiles.MetricsFile)); a != b {
		t.Errorf("metrics after resume:\n%s\nwant\n%s", b, a)
	}
	a, _ := os.ReadFile(filepath.Join(straight, runfiles.AdapterFile))
	b, _ := os.ReadFile(filepath.Join(broken, runfiles.AdapterFile))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("adapter after resume %q, want %q", b, a)
	}
	if sw := fresh.Swapper.(*fakeSwapper); len(sw.loaded) != 3 {
		t.Errorf("the resumed backend loaded %d adapters, want 3 (the checkpoint's, then iterations 2 and 3): %q", len(sw.loaded), sw.loaded)
	}
}

// stable is metrics.jsonl without what depends on timing and on the
// machine's load (the trainer's thread count).
func stable(t *testing.T, path string) string {
	t.Helper()
	ms, err := runfiles.ReadMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range ms {
		m.Seconds, m.TokensPerSec, m.MeanBatch, m.LogprobGap, m.TrainThreads = nil, nil, 0, 0, 0
		b, _ := json.Marshal(m)
		lines = append(lines, string(b))
	}
	return strings.Join(lines, "\n")
}

// TestResumeRefusesShortFiles: a metrics file cut after the checkpoint
// would leave a hole in the run's history; resume refuses and says so.
func TestResumeRefusesShortFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r, err := Open(dir, fakeOptions(2), Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{runfiles.MetricsFile, runfiles.EpisodesFile} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b[:len(b)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(filepath.Join(dir, name), b, 0o644)
			o, err := ReadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir, o, Resume, fakeParts(t))
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "cut or replaced") {
				t.Errorf("got %v, want a refusal naming %s", err, name)
			}
		})
	}
}

// TestEarlyStop: the run stops after the iteration whose entropy fell,
// says why, and a further Step or Train does nothing.
func TestEarlyStop(t *testing.T) {
	o := fakeOptions(5)
	o.EarlyStop.MaxKLRef = 1e-9
	r, err := Open(t.TempDir(), o, Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("got %v, want ErrStopped", err)
	}
	if st := r.State(); st.Iteration != 1 || !strings.HasPrefix(st.Stopped, "kl_ref") {
		t.Errorf("state %+v, want stopped by kl_ref after iteration 1", st)
	}
	if _, err := r.Step(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Step after the stop: %v", err)
	}
}

func TestEarlyStopReason(t *testing.T) {
	tests := []struct {
		name  string
		c     EarlyStop
		first float64
		m     runfiles.Metrics
		stop  bool
	}{
		{"off", EarlyStop{}, 4, runfiles.Metrics{KLRef: 100, Entropy: 0}, false},
		{"kl below", EarlyStop{MaxKLRef: 1}, 4, runfiles.Metrics{KLRef: 0.5, Entropy: 4}, false},
		{"kl above", EarlyStop{MaxKLRef: 1}, 4, runfiles.Metrics{KLRef: 1.5, Entropy: 4}, true},
		{"entropy kept", EarlyStop{MinEntropyRatio: 0.5}, 4, runfiles.Metrics{Entropy: 2.5}, false},
		{"entropy collapsed", EarlyStop{MinEntropyRatio: 0.5}, 4, runfiles.Metrics{Entropy: 1.5}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.reason(tc.first, &tc.m) != ""; got != tc.stop {
				t.Errorf("stop: got %v, want %v", got, tc.stop)
			}
		})
	}
}

func TestRefusesPreviousRun(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, runfiles.ConfigFile), []byte("iterations: 1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, runfiles.MetricsFile), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	var prev *PreviousRunError
	if _, err := Open(dir, fakeOptions(1), Fresh, fakeParts(t)); !errors.As(err, &prev) || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("got %v, want a refusal naming --resume", err)
	}
	if err := clearRunDir(dir, true); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{runfiles.ConfigFile: false, runfiles.MetricsFile: false, "notes.txt": true} {
		if _, err := os.Stat(filepath.Join(dir, f)); (err == nil) != want {
			t.Errorf("%s exists: got %v, want %v", f, err == nil, want)
		}
	}
}

// TestAppendFileCutsBackOnFailure: a write that fails leaves the file as
// it was, never a partial line.
func TestAppendFileCutsBackOnFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	if err := appendFile(path, []byte("{\"a\":1}\n")); err != nil {
		t.Fatal(err)
	}
	// /dev/full fails every write: the same code path as a full disk.
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	if err := appendFile("/dev/full", []byte("{\"b\":2}\n")); err == nil {
		t.Errorf("a write to /dev/full succeeded")
	}
	b, _ := os.ReadFile(path)
	if string(b) != "{\"a\":1}\n" {
		t.Errorf("file holds %q", b)
	}
}

func TestValidateNamesFields(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"iterations", func(o *Options) { o.Iterations = 0 }, "iterations"},
		{"episodes negative", func(o *Options) { o.Rollout.Episodes = -1 }, "episodes -1"},
		{"episodes huge", func(o *Options) { o.Rollout.Episodes = 9e18 }, "episodes"},
		{"temperature inf", func(o *Options) { o.Rollout.Temperature = float32(math.Inf(1)) }, "temperature"},
		{"temperature negative", func(o *Options) { o.Rollout.Temperature = -1 }, "temperature"},
		{"temperature nan", func(o *Options) { o.Rollout.Temperature = float32(math.NaN()) }, "temperature"},
		{"top_p", func(o *Options) { o.Rollout.TopP = 2 }, "top_p"},
		{"lr nan", func(o *Options) { o.Train.LR = float32(math.NaN()) }, "train.lr"},
		{"kv", func(o *Options) { o.Rollout.KVCache = "f8" }, "kv_cache"},
		{"estimator", func(o *Options) { o.Estimator = "magic" }, "estimator"},
		{"group split", func(o *Options) { o.Rollout.Episodes, o.Rollout.GroupSize = 6, 4 }, "not a multiple of rollout.group_size"},
		{"context", func(o *Options) { o.Rollout.Context = 2_000_000_000 }, "context"},
		{"eval temperature negative", func(o *Options) { o.Eval.Temperature = ptr(float32(-0.5)) }, "eval.temperature"},
		{"eval temperature nan", func(o *Options) { o.Eval.Temperature = ptr(float32(math.NaN())) }, "eval.temperature"},
		{"train threads 100000", func(o *Options) { o.Train.Threads = 100000 }, "train: train: threads 100000: want 1.."},
		{"train epochs 1e9", func(o *Options) { o.Train.Epochs = 1e9 }, "epochs 1000000000: want 1..100"},
		{"rollout threads 100000", func(o *Options) { o.Rollout.Threads = 100000 }, "threads 100000: want 1.."},
		{"checkpoint_every huge", func(o *Options) { o.CheckpointEvery = 1 << 40 }, "checkpoint_every"},
		{"min_reply_tokens above max_tokens", func(o *Options) { o.Rollout.MinReplyTokens, o.Rollout.MaxTokens = 100, 10 }, "min_reply_tokens 100 > max_tokens 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{}.Defaults()
			tc.mod(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
	d := Options{}.Defaults()
	if err := d.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestDecodeOptions(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown key", "rollout:\n  envv: x\n", `line 2: unknown key "envv"`},
		{"wrong type", "iterations: many\n", `"many" is not an integer`},
		{"fraction", "iterations: 3.5\n", `line 1: iterations: "3.5" is not an integer`},
		{"nested fraction", "rollout:\n  episodes: 4\n  threads: 1.5\n", `line 3: rollout.threads: "1.5" is not an integer`},
		{"fraction in a flow map", "train: {lora_rank: 8, epochs: 2.25}\n", `train.epochs: "2.25" is not an integer`},
		{"fraction merged in", "rollout:\n  <<: [{threads: 1}, {episodes: 2.5}]\n", `rollout.episodes: "2.5" is not an integer`},
		{"whole number as a float", "iterations: 3.0\nrollout: {episodes: 1e1}\n", ""},
		{"float where a float goes", "train: {lr: 1.5e-3}\nrollout: {params: {price: 2.5}}\n", ""},
		{"two documents", "iterations: 2\n---\niterations: 3\n", "second YAML document"},
		{"empty", "", ""},
		{"ok", "iterations: 3\nrollout: {episodes: 4}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{}.Defaults()
			err := strictyaml.Decode(strings.NewReader(tc.in), &o)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "loop."):
				t.Errorf("error names a Go type: %v", err)
			}
		})
	}
}

func FuzzDecodeOptions(f *testing.F) {
	f.Add("iterations: 3\nrollout: {episodes: 4, temperature: .inf}\n")
	f.Add("train: {lr: .nan}\n")
	f.Add("rollout:\n  context: 2000000000\n")
	f.Add("early_stop: {max_kl_ref: -1}\n---\n")
	f.Add("rollout: &r {threads: 1.5}\neval: {opponents: [*r]}\n")
	f.Add("a: &x [*x]\n")
	f.Add("rollout:\n  <<: {episodes: 2.5}\n")
	f.Fuzz(func(t *testing.T, in string) {
		o := Options{}.Defaults()
		if err := strictyaml.Decode(strings.NewReader(in), &o); err != nil {
			return
		}
		if err := o.Validate(); err != nil {
			return
		}
		// Whatever validates must be usable: finite sampling, positive
		// counts within bounds.
		r := o.Rollout
		if r.Episodes < 1 || r.Parallel < 1 || math.IsNaN(float64(r.Temperature)) || math.IsInf(float64(r.Temperature), 0) || r.Temperature < 0 || o.Iterations < 1 {
			t.Errorf("validated options %+v", o)
		}
		for _, a := range r.Agents {
			if s, _ := players.Parse(a); s.Kind != players.KindPolicy && s.Kind != players.KindFrozen && s.Kind != players.KindScripted {
				return // needs its opened players
			}
		}
		if _, err := r.RunnerOptions(nil); err != nil {
			t.Errorf("validated rollout options do not convert: %v", err)
		}
	})
}

// TestEvalInRun: with an eval section the starting policy and every
// second iteration's are evaluated on held-out deals; metrics carry the
// held-out reward, eval.jsonl an evaluation per due point, best/ the best
// adapter; a resumed run continues the file without repeating the base
// evaluation.
func TestEvalInRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	o := fakeOptions(4)
	o.Eval = EvalOptions{Every: 2, Episodes: 4, Opponents: []string{"scripted:random", "scripted:shading"}}
	r, err := Open(dir, o, Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	r.Hooks.Phase = func(it int, phase string) {
		if phase == "eval" {
			phases = append(phases, fmt.Sprint(it))
		}
	}
	if _, err := r.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Resume after iteration 2 in a new process.
	ro, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err = Open(dir, ro, Resume, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Hooks.Phase = func(it int, phase string) {
		if phase == "eval" {
			phases = append(phases, fmt.Sprint(it))
		}
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(phases, ","); got != "0,2,4" {
		t.Errorf("evaluations after iterations %s, want 0,2,4", got)
	}
	evs, err := ReadEvaluations(filepath.Join(dir, runfiles.EvalFile))
	if err != nil || len(evs) != 3 {
		t.Fatalf("eval.jsonl: %d evaluations, %v", len(evs), err)
	}
	for _, ev := range evs {
		if len(ev.Cells) != 4 || len(ev.Reward) != 2 { // 2 opponents × 2 sides (the bidders)
			t.Errorf("evaluation %d: %d cells, rewards %v", ev.Iteration, len(ev.Cells), ev.Reward)
		}
	}
	ms, _ := runfiles.ReadMetrics(filepath.Join(dir, runfiles.MetricsFile))
	for _, m := range ms {
		if (m.Eval != nil) != (m.Iteration%2 == 0) {
			t.Errorf("iteration %d: eval %v", m.Iteration, m.Eval)
		}
	}
	st := r.State()
	if st.BestIteration != 2 && st.BestIteration != 4 {
		t.Errorf("best iteration %d", st.BestIteration)
	}
	if _, err := os.Stat(filepath.Join(dir, runfiles.BestDir, runfiles.AdapterFile)); err != nil {
		t.Errorf("best/: %v", err)
	}
}

// TestEvalTemperature: eval.temperature plays the evaluations at its own
// temperature while the rollouts keep theirs; unset, the evaluations
// sample as the rollouts do. The setting survives a resume.
func TestEvalTemperature(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *float32
		want float32
	}{{"greedy", ptr(float32(0)), 0}, {"unset", nil, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			o := fakeOptions(1)
			o.Rollout.Temperature = 1
			o.Eval = EvalOptions{Every: 1, Episodes: 2, Opponents: []string{"scripted:random"}, Temperature: tc.set}
			r, err := Open(dir, o, Fresh, fakeParts(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Train(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, it := range []string{"iter-0", "iter-1"} {
				b, err := os.ReadFile(filepath.Join(dir, runfiles.EvalDir, it, arena.ConfigFile))
				if err != nil {
					t.Fatal(err)
				}
				var played struct {
					Temperature *float32 `json:"temperature"`
				}
				if err := json.Unmarshal(b, &played); err != nil || played.Temperature == nil {
					t.Fatalf("%s: %s: %v", it, b, err)
				}
				if *played.Temperature != tc.want {
					t.Errorf("%s played at temperature %v, want %v", it, *played.Temperature, tc.want)
				}
			}
			back, err := ReadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Eval.Temperature, tc.set) || back.Rollout.Temperature != 1 {
				t.Errorf("config.yaml reads back eval.temperature %v, rollout %v", back.Eval.Temperature, back.Rollout.Temperature)
			}
		})
	}
}

func (s *fakeSwapper) LoadAdapter(_ context.Context, name, path string, _ float32) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.named = append(s.named, name)
	return nil
}

func leagueOptions(iterations int) Options {
	o := fakeOptions(iterations)
	o.Rollout.Episodes = 8
	o.League = DefaultLeague()
	o.League.Enabled = true
	o.League.Scripted = []string{"random", "shading"}
	return o
}

// TestLeague: with a league the policy meets scripts, the base model and
// its own snapshots; the draws follow the pool, snapshots join it every
// second iteration, and a run interrupted and resumed draws and learns the
// same as a straight one.
func TestLeague(t *testing.T) {
	dir := t.TempDir()
	straight := filepath.Join(dir, "straight")
	parts := fakeParts(t)
	r, err := Open(straight, leagueOptions(5), Fresh, parts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms, err := runfiles.ReadMetrics(r.Path(runfiles.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	met := map[string]int{}
	for _, m := range ms {
		for name, st := range m.League {
			met[name] += st.Episodes
		}
	}
	for _, want := range []string{"scripted:random", "scripted:shading", "base", "iter-2"} {
		if met[want] == 0 {
			t.Errorf("the policy never met %s (met %v)", want, met)
		}
	}
	if st := r.State(); fmt.Sprint(st.League.Snapshots) != "[2 4]" || len(st.League.Reward) == 0 {
		t.Errorf("league state %+v", st.League)
	}
	if sw := parts.Swapper.(*fakeSwapper); fmt.Sprint(sw.named) != "[iter-2 iter-4]" {
		t.Errorf("named adapters loaded %v", sw.named)
	}
	// Every iteration played its episodes.
	trajs := 0
	for _, m := range ms {
		trajs += m.Episodes
	}
	if trajs == 0 {
		t.Fatal("no episodes")
	}

	broken := filepath.Join(dir, "broken")
	r, err = Open(broken, leagueOptions(5), Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Hooks.Phase = func(it int, phase string) {
		if it == 4 && phase == "rollout" {
			cancel()
		}
	}
	if err := r.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
	o, _ := ReadConfig(broken)
	resumed := fakeParts(t)
	r, err = Open(broken, o, Resume, resumed)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, b := stable(t, filepath.Join(straight, runfiles.MetricsFile)), stable(t, filepath.Join(broken, runfiles.MetricsFile)); a != b {
		t.Errorf("league metrics after resume:\n%s\nwant\n%s", b, a)
	}
	if sw := resumed.Swapper.(*fakeSwapper); fmt.Sprint(sw.named) != "[iter-2 iter-4]" {
		t.Errorf("the resumed run loaded %v, want its snapshot and the next", sw.named)
	}
}

func TestLeagueValidate(t *testing.T) {
	l := DefaultLeague()
	l.Enabled = true
	for _, tc := range []struct {
		name string
		mod  func(*LeagueOptions)
		want string
	}{
		{"self play", func(l *LeagueOptions) { l.SelfPlay = 1.5 }, "self_play"},
		{"priority", func(l *LeagueOptions) { l.Priority = math.NaN() }, "priority"},
		{"empty pool", func(l *LeagueOptions) { l.Scripted, l.Base, l.SnapshotEvery = nil, false, 0 }, "empty pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := l
			tc.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if err := l.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestCompare: the before-and-after table pairs the base weights and the
// trained policy on the same deals (here both play the same scripted
// backend, so the paired gain is exactly 0), taken from the evaluations
// before the first iteration and after the last, which played them.
func TestCompare(t *testing.T) {
	o := fakeOptions(1)
	o.Eval = EvalOptions{Every: 1, Episodes: 4, Opponents: []string{"scripted:random"}}
	r, err := Open(filepath.Join(t.TempDir(), "run"), o, Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	total, reused := 0, 0
	rep, err := r.Compare(context.Background(), arena.Hooks{Start: func(n, done int) { total, reused = n, done }})
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || reused != total {
		t.Errorf("the comparison played %d of its %d episodes, want none (the evaluations played them)", total-reused, total)
	}
	if fmt.Sprint(rep.Players) != "[base trained]" || rep.Reference != "base" {
		t.Fatalf("players %v, reference %q", rep.Players, rep.Reference)
	}
	found := false
	for _, d := range rep.Differences {
		if d.Env == "" && d.Player == "trained" {
			found = true
			if d.Diff.Mean != 0 || !d.Diff.Contains(0) {
				t.Errorf("overall gain %+v, want exactly 0", d.Diff)
			}
		}
	}
	if !found {
		t.Errorf("no overall difference in %+v", rep.Differences)
	}
	if _, err := os.Stat(filepath.Join(r.Dir(), runfiles.CompareDir, arena.MarkdownFile)); err != nil {
		t.Errorf("compare/: %v", err)
	}

	// A run that starts from an adapter evaluated that adapter at
	// iteration 0, not the base weights: the base is played.
	o.Rollout.Adapter = filepath.Join(t.TempDir(), "warm.gguf")
	r, err = Open(filepath.Join(t.TempDir(), "run"), o, Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Compare(context.Background(), arena.Hooks{Start: func(n, done int) { total, reused = n, done }}); err != nil {
		t.Fatal(err)
	}
	if reused != total/2 {
		t.Errorf("from an adapter, the comparison reused %d of %d episodes, want the trained policy's %d", reused, total, total/2)
	}
}

// TestReadConfigOldRun: a run directory written before the guard, the
// league and the evaluation existed resumes without them.
func TestReadConfigOldRun(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, runfiles.ConfigFile), []byte("iterations: 3\nrollout: {env: craigslist, model: /m.gguf}\n"), 0o644)
	o, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.League.Enabled || o.Eval.Every != 0 || o.Rollout.Guard.Enabled {
		t.Errorf("an old run resumes with league %v, eval every %d, guard %v; want all off", o.League.Enabled, o.Eval.Every, o.Rollout.Guard.Enabled)
	}
	// A run written now records them.
	fresh := filepath.Join(t.TempDir(), "run")
	if _, err := Open(fresh, leagueOptions(1), Fresh, fakeParts(t)); err != nil {
		t.Fatal(err)
	}
	if o, err := ReadConfig(fresh); err != nil || !o.League.Enabled {
		t.Errorf("a new run's league: %v, %v", o.League.Enabled, err)
	}
}

func ptr[T any](v T) *T { return &v }
