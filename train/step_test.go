package train

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TestSFTLossDecreases trains on one fixed batch and expects the masked
// cross-entropy to fall well below its starting value.
func TestSFTLossDecreases(t *testing.T) {
	o := testOptions()
	o.LR = 1e-5 // raised below: SetLearningRates takes effect
	tr := newTrainer(t, "llama", o)
	if err := tr.SetLearningRates(0, 1); err == nil {
		t.Error("SetLearningRates(0, 1): got no error")
	}
	if err := tr.SetLearningRates(3e-3, 1e-3); err != nil {
		t.Fatal(err)
	}
	seqs := randomSeqs(21, 4, 16, 40, tr.Vocab())
	ctx := context.Background()
	var first, last float64
	for i := range 25 {
		l, err := tr.SFTStep(ctx, seqs)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = l
		}
		last = l
	}
	if !(last < 0.7*first) {
		t.Errorf("SFT loss: got %.4f after 25 steps, want below 70%% of the first %.4f", last, first)
	}
	if got := tr.Steps(); got != 25 {
		t.Errorf("optimizer steps: got %d, want 25", got)
	}
}

// TestPPOStepImprovesObjective checks that PPO raises the logprob of tokens
// with positive advantage and lowers it for negative ones, that the first
// epoch starts on-policy (ratio 1, nothing clipped, KL 0), and that the value
// head moves towards the returns.
func TestPPOStepImprovesObjective(t *testing.T) {
	o := testOptions()
	o.LR, o.ValueLR = 2e-3, 1e-2
	o.Epochs, o.MiniBatch = 4, 2
	tr := newTrainer(t, "qwen2", o)
	ctx := context.Background()
	seqs := randomSeqs(31, 4, 20, 40, tr.Vocab())
	values, lps, _, err := columns(tr.Evaluate(ctx, seqs))
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		copy(seqs[i].OldLogprobs, lps[i])
		copy(seqs[i].OldValues, values[i])
		for j := range seqs[i].Mask {
			if !seqs[i].Mask[j] {
				seqs[i].OldLogprobs[j], seqs[i].OldValues[j] = 0, 0
			}
			seqs[i].Returns[j] = 1
		}
	}
	st, err := tr.Step(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if st.OptimizerSteps != 8 {
		t.Errorf("optimizer steps: got %d, want 8 (4 epochs × 2 minibatches)", st.OptimizerSteps)
	}
	if st.Tokens == 0 || st.TrainedTokens == 0 || st.GradNorm <= 0 {
		t.Errorf("stats: got %+v, want tokens, trained tokens and gradient norm > 0", st)
	}
	values2, lps2, _, err := columns(tr.Evaluate(ctx, seqs))
	if err != nil {
		t.Fatal(err)
	}
	var gain, verr0, verr1 float64
	for i, s := range seqs {
		for j, m := range s.Mask {
			if !m || j == 0 {
				continue
			}
			gain += float64(s.Advantages[j]) * float64(lps2[i][j]-lps[i][j])
			verr0 += math.Abs(float64(values[i][j] - 1))
			verr1 += math.Abs(float64(values2[i][j] - 1))
		}
	}
	if gain <= 0 {
		t.Errorf("Σ A·Δlogprob = %g, want > 0", gain)
	}
	if verr1 >= verr0 {
		t.Errorf("value error: got %g after the step, want below %g", verr1, verr0)
	}

	// SFT updates the adapter only: the value head keeps its weights even
	// though its AdamW moments are non-zero now.
	vh := readParams(tr, false)[len(tr.params)-2]
	if _, err := tr.SFTStep(ctx, seqs); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(vh, readParams(tr, false)[len(tr.params)-2]); d != 0 {
		t.Errorf("SFT step moved the value head by %g", d)
	}
}

func TestValidateRejectsBadSequences(t *testing.T) {
	tr := newTrainer(t, "llama", testOptions())
	good := randomSeqs(1, 1, 10, 11, tr.Vocab())[0]
	tests := []struct {
		name string
		edit func(*Sequence)
		want string
	}{
		{"short", func(s *Sequence) { s.Tokens, s.Mask = s.Tokens[:1], s.Mask[:1] }, "at least 2"},
		{"mask", func(s *Sequence) { s.Mask = s.Mask[:3] }, "mask"},
		{"token", func(s *Sequence) { s.Tokens[2] = int32(tr.Vocab()) }, "vocabulary"},
		{"advantages", func(s *Sequence) { s.Advantages = nil }, "advantages"},
		{"old logprobs", func(s *Sequence) { s.OldLogprobs = s.OldLogprobs[:4] }, "old logprobs"},
		{"returns", func(s *Sequence) { s.Returns = nil }, "returns"},
		{"old values", func(s *Sequence) { s.OldValues = nil }, "old values"}, // ValueClip > 0 reads them
		{"reference logprobs", func(s *Sequence) { s.RefLogprobs = make([]float32, 3) }, "reference logprobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			s.Tokens = append([]int32(nil), good.Tokens...)
			tt.edit(&s)
			_, err := tr.Step(context.Background(), []Sequence{s})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestCheckpointRoundTrip saves after some training, loads into a fresh
// trainer, and expects identical bytes on re-save, the caller's blob back,
// and the same next Step as the uninterrupted trainer (moments, step and
// shuffling RNG restored).
func TestCheckpointRoundTrip(t *testing.T) {
	o := testOptions()
	o.LR = 1e-3
	o.Epochs, o.MiniBatch = 1, 2
	ctx := context.Background()
	a := newTrainer(t, "llama", o)
	seqs := randomSeqs(41, 4, 12, 30, a.Vocab())
	if _, err := a.Step(ctx, seqs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	extra := []byte(`{"scenario_cursor":17}`)
	if err := a.SaveCheckpoint(filepath.Join(dir, "a"), extra); err != nil {
		t.Fatal(err)
	}
	b := newTrainer(t, "llama", o)
	got, err := b.LoadCheckpoint(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, extra) {
		t.Errorf("extra: got %q, want %q", got, extra)
	}
	if err := b.SaveCheckpoint(filepath.Join(dir, "b"), extra); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CheckpointFile, AdapterFile} {
		x, _ := os.ReadFile(filepath.Join(dir, "a", f))
		y, _ := os.ReadFile(filepath.Join(dir, "b", f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s: re-saved checkpoint differs (%d vs %d bytes)", f, len(x), len(y))
		}
	}
	sa, err := a.Step(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Step(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) {
		t.Errorf("step after resume: got %+v, want %+v", sb, sa)
	}
	if err := a.SaveAdapter(filepath.Join(dir, "a.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveAdapter(filepath.Join(dir, "b.gguf")); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(filepath.Join(dir, "a.gguf"))
	y, _ := os.ReadFile(filepath.Join(dir, "b.gguf"))
	if !bytes.Equal(x, y) {
		t.Error("adapters differ after the same step from the same state")
	}
}

func TestCorruptCheckpoint(t *testing.T) {
	o := testOptions()
	tr := newTrainer(t, "llama", o)
	dir := t.TempDir()
	if err := tr.SaveCheckpoint(dir, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointFile)
	good, _ := os.ReadFile(path)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"flipped byte", func() []byte { d := bytes.Clone(good); d[len(d)/2] ^= 1; return d }(), "checksum"},
		{"truncated", good[:len(good)-100], "checksum"},
		{"empty", nil, "not an omar trainer checkpoint"},
		{"foreign", []byte("GGUF and then some more bytes than the minimum length of a header ......"), "not an omar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := tr.LoadCheckpoint(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// A checkpoint of another shape is refused with a clear message.
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.LoRARank = 2
	other := newTrainer(t, "llama", o2)
	if _, err := other.LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "rank") {
		t.Errorf("rank mismatch: got %v, want an error naming the rank", err)
	}
}

// FuzzLoadCheckpoint mutates a valid checkpoint: loading must either fail
// with an error and leave the trainer unchanged, or (when the bytes are
// unchanged) succeed — never panic.
func FuzzLoadCheckpoint(f *testing.F) {
	tr := newTrainer(f, "llama", testOptions())
	dir := f.TempDir()
	if err := tr.SaveCheckpoint(dir, []byte(`{"k":1}`)); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("OMARCKPT"))
	f.Add([]byte{})
	before := readParams(tr, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, CheckpointFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := tr.LoadCheckpoint(d)
		if err == nil && !bytes.Equal(data, good) {
			t.Fatalf("a modified checkpoint (%d bytes) loaded", len(data))
		}
		after := readParams(tr, false)
		for i := range before {
			if maxAbsDiff(before[i], after[i]) != 0 {
				t.Fatal("parameters changed")
			}
		}
	})
}

func TestStepHonoursCancellation(t *testing.T) {
	tr := newTrainer(t, "llama", testOptions())
	seqs := randomSeqs(3, 4, 10, 20, tr.Vocab())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Step(ctx, seqs); err == nil {
		t.Error("Step with a cancelled context: got no error")
	}
	if _, _, _, err := columns(tr.Evaluate(ctx, seqs)); err == nil {
		t.Error("Evaluate with a cancelled context: got no error")
	}
	if tr.Steps() != 0 {
		t.Errorf("optimizer steps after cancellation: got %d, want 0", tr.Steps())
	}
}

func TestTokenWeights(t *testing.T) {
	seqs := []Sequence{
		{Tokens: make([]int32, 5), Mask: []bool{false, true, true, true, false}}, // 3 trained
		{Tokens: make([]int32, 3), Mask: []bool{false, false, true}},             // 1 trained
		{Tokens: make([]int32, 3), Mask: []bool{true, false, false}},             // 0 (index 0 has no prediction)
	}
	tests := []struct {
		agg  string
		want map[int]float32
	}{
		{"token", map[int]float32{0: 0.25, 1: 0.25}},
		{"", map[int]float32{0: 0.25, 1: 0.25}},
		{"sequence", map[int]float32{0: 1.0 / 6, 1: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.agg, func(t *testing.T) {
			tr := &Trainer{opts: Options{LossAggregation: tt.agg}}
			got := tr.tokenWeights(seqs, []int{0, 1, 2})
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				if math.Abs(float64(got[i]-w)) > 1e-7 {
					t.Errorf("sequence %d: got weight %g, want %g", i, got[i], w)
				}
			}
		})
	}
}

// TestTargetKLStopsEarly: with off-policy data (old logprobs far from the
// current ones) and a small TargetKL, Step stops before its first update.
func TestTargetKLStopsEarly(t *testing.T) {
	for _, tt := range []struct {
		target    float32
		wantSteps int
		wantStop  bool
	}{{0, 4, false}, {0.01, 0, true}} {
		o := testOptions()
		o.Epochs, o.MiniBatch, o.TargetKL = 2, 2, tt.target
		tr := newTrainer(t, "llama", o)
		seqs := randomSeqs(81, 4, 20, 30, tr.Vocab()) // old logprobs ≈ −5, current ≈ −6.2
		st, err := tr.Step(context.Background(), seqs)
		if err != nil {
			t.Fatal(err)
		}
		if st.OptimizerSteps != tt.wantSteps || st.EarlyStopped != tt.wantStop || tr.Steps() != tt.wantSteps {
			t.Errorf("target %g: got %d steps, early stop %v; want %d, %v", tt.target, st.OptimizerSteps, st.EarlyStopped, tt.wantSteps, tt.wantStop)
		}
	}
}

// TestLoadAdapter: an adapter saved by one trainer and loaded into a fresh
// one (with another alpha) gives the same logprobs; foreign or mismatched
// files are refused.
func TestLoadAdapter(t *testing.T) {
	o := testOptions()
	o.LR = 1e-2
	a := newTrainer(t, "llama", o)
	seqs := randomSeqs(91, 3, 20, 40, a.Vocab())
	for range 3 {
		if _, err := a.SFTStep(context.Background(), seqs); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "adapter.gguf")
	if err := a.SaveAdapter(path); err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.LoRAAlpha = 4
	b := newTrainer(t, "llama", o2)
	if err := b.LoadAdapter(path); err != nil {
		t.Fatal(err)
	}
	_, la, _, err := columns(a.Evaluate(context.Background(), seqs))
	if err != nil {
		t.Fatal(err)
	}
	_, lb, _, err := columns(b.Evaluate(context.Background(), seqs))
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		if d := maxAbsDiff(la[i], lb[i]); d > 1e-5 {
			t.Errorf("seq %d: loaded adapter's logprobs differ by %g", i, d)
		}
	}

	o3 := o
	o3.LoRARank = 2
	c := newTrainer(t, "llama", o3)
	if err := c.LoadAdapter(path); err == nil || !strings.Contains(err.Error(), "rank") {
		t.Errorf("rank mismatch: got %v, want an error naming the rank", err)
	}
	o4 := o
	o4.LoRAModules = []string{"attn_q"}
	d := newTrainer(t, "llama", o4)
	if err := d.LoadAdapter(path); err == nil || !strings.Contains(err.Error(), "not adapted") {
		t.Errorf("module mismatch: got %v, want an error", err)
	}
	if err := b.LoadAdapter(tinyModel(t, "llama")); err == nil || !strings.Contains(err.Error(), "general.type") {
		t.Errorf("a model file as adapter: got %v, want an error naming general.type", err)
	}
}

// TestDeviceCUDAWithoutGPU: asking for CUDA where the registry has no GPU
// is a clear error, not a crash (this machine has none).
func TestDeviceCUDAWithoutGPU(t *testing.T) {
	path := tinyModel(t, "llama")
	devs, err := llamacpp.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Type == llamacpp.DeviceGPU {
			t.Skipf("a GPU is registered (%s): this test is about its absence", d.Name)
		}
	}
	o := testOptions()
	o.Device = "cuda"
	if _, err := New(path, o); err == nil || !strings.Contains(err.Error(), "cuda") {
		t.Errorf("got %v, want an error about the cuda device", err)
	}
}

// TestSFTWeights: with per-token Weights the loss SFTStep reports is the
// weighted mean of the tokens' negative logprobs (EvaluatePolicy's), and
// bad weights are refused.
func TestSFTWeights(t *testing.T) {
	o := testOptions()
	tr := newTrainer(t, "llama", o)
	ctx := context.Background()
	seqs := randomSeqs(41, 3, 16, 30, tr.Vocab())
	for i := range seqs {
		seqs[i].Weights = make([]float32, len(seqs[i].Tokens))
		for j := range seqs[i].Weights {
			seqs[i].Weights[j] = float32(1 + (i+j)%4) // 1..4
		}
	}
	scores, err := tr.EvaluatePolicy(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for i, s := range seqs {
		for j := 1; j < len(s.Tokens); j++ {
			if s.Mask[j] {
				num -= float64(s.Weights[j]) * float64(scores[i].Logprobs[j])
				den += float64(s.Weights[j])
			}
		}
	}
	got, err := tr.SFTStep(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if want := num / den; math.Abs(got-want) > 1e-4*want {
		t.Errorf("weighted SFT loss %.6f, want %.6f", got, want)
	}
	bad := []Sequence{{Tokens: seqs[0].Tokens, Mask: seqs[0].Mask, Weights: make([]float32, 3)}}
	if _, err := tr.SFTStep(ctx, bad); err == nil || !strings.Contains(err.Error(), "weights") {
		t.Errorf("weights of the wrong length: err %v", err)
	}
	bad[0].Weights = slices.Repeat([]float32{-1}, len(seqs[0].Tokens))
	if _, err := tr.SFTStep(ctx, bad); err == nil || !strings.Contains(err.Error(), "weight -1") {
		t.Errorf("a negative weight: err %v", err)
	}
}

// TestThreadsDoNotChangeResults trains the same steps with one thread and
// with two (switched between steps): SetThreads is safe for a caller that
// picks the count from the cores free at the moment, because every score
// and weight comes out the same to the bit.
func TestThreadsDoNotChangeResults(t *testing.T) {
	run := func(threads func(step int) int) (scores []Score, params [][]float32) {
		o := testOptions()
		o.Epochs, o.MiniBatch = 2, 2
		tr := newTrainer(t, "llama", o)
		randomize(tr, 3, 0.05)
		ctx := context.Background()
		seqs := randomSeqs(11, 5, 20, 90, tr.Vocab())
		for step := range 3 {
			if err := tr.SetThreads(threads(step)); err != nil {
				t.Fatal(err)
			}
			sc, err := tr.Evaluate(ctx, seqs)
			if err != nil {
				t.Fatal(err)
			}
			scores = append(scores, sc...)
			if _, err := tr.Step(ctx, seqs); err != nil {
				t.Fatal(err)
			}
		}
		return scores, readParams(tr, false)
	}
	s1, p1 := run(func(int) int { return 1 })
	s2, p2 := run(func(step int) int { return 2 - step%2 })
	for i := range s1 {
		for _, c := range [][2][]float32{{s1[i].Values, s2[i].Values}, {s1[i].Logprobs, s2[i].Logprobs}, {s1[i].RefLogprobs, s2[i].RefLogprobs}} {
			if !slices.Equal(c[0], c[1]) {
				t.Fatalf("score %d differs between thread counts (max |Δ| %g)", i, maxAbsDiff(c[0], c[1]))
			}
		}
	}
	for i := range p1 {
		if !slices.Equal(p1[i], p2[i]) {
			t.Fatalf("parameter %d differs between thread counts (max |Δ| %g)", i, maxAbsDiff(p1[i], p2[i]))
		}
	}
	tr := newTrainer(t, "llama", testOptions())
	if err := tr.SetThreads(0); err == nil {
		t.Error("SetThreads(0): no error")
	}
}
