package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

func fullOptions() Options {
	o := Options{}.FullDefaults()
	o.Threads = 1
	o.BatchTokens = 512
	return o
}

func newFullTrainer(t testing.TB, path string, o Options) *Trainer {
	t.Helper()
	tr, err := New(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// corpusSeqs cuts the built-in corpus, tokenized with the generated
// vocabulary of vocab tokens, into n sequences of length tokens (from the
// start of the corpus, so the data is fixed), every token trained.
func corpusSeqs(t testing.TB, vocab, n, length int) []Sequence {
	t.Helper()
	tok, err := model.NewModelTokenizer(vocab)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(model.Corpus(), false)
	if len(ids) < n*length {
		t.Fatalf("corpus has %d tokens, want %d", len(ids), n*length)
	}
	seqs := make([]Sequence, n)
	for i := range seqs {
		s := Sequence{Tokens: slices.Clone(ids[i*length : (i+1)*length]), Mask: make([]bool, length)}
		for j := 1; j < length; j++ {
			s.Mask[j] = true
		}
		seqs[i] = s
	}
	return seqs
}

// meanCE is the mean cross-entropy (−logprob) of the masked tokens under
// the current weights.
func meanCE(t testing.TB, tr *Trainer, seqs []Sequence) float64 {
	t.Helper()
	scores, err := tr.EvaluatePolicy(context.Background(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	n := 0
	for i, s := range seqs {
		for j, m := range s.Mask {
			if j > 0 && m {
				sum -= float64(scores[i].Logprobs[j])
				n++
			}
		}
	}
	return sum / float64(n)
}

// TestFullOptions: full mode ignores the LoRA fields, refuses a KL term
// (there is no frozen reference) and validates the schedule.
func TestFullOptions(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"lora fields ignored", func(o *Options) { o.LoRARank, o.LoRAModules = 0, nil }, ""},
		{"kl", func(o *Options) { o.KLCoef = 0.05 }, "no frozen reference"},
		{"cosine", func(o *Options) { o.LRSchedule, o.WarmupSteps, o.TotalSteps = "cosine", 10, 100 }, ""},
		{"cosine without total", func(o *Options) { o.LRSchedule, o.WarmupSteps = "cosine", 10 }, "total steps (0) > warmup steps (10)"},
		{"unknown schedule", func(o *Options) { o.LRSchedule = "step" }, `lr schedule "step"`},
		{"negative warmup", func(o *Options) { o.WarmupSteps = -1 }, "warmup steps -1"},
		{"negative total", func(o *Options) { o.TotalSteps = -1 }, "total steps -1"},
		{"min ratio", func(o *Options) { o.MinLRRatio = 1.5 }, "min lr ratio 1.5"},
		{"min ratio NaN", func(o *Options) { o.MinLRRatio = float32(math.NaN()) }, "min lr ratio NaN"},
		{"lr", func(o *Options) { o.LR = 0 }, "learning rates must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{}.FullDefaults()
			tt.edit(&o)
			err := o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestFullParams: in full mode every base weight but the rope frequency
// factors is a parameter, matrices in the decayed group and vectors not;
// there is no adapter.
func TestFullParams(t *testing.T) {
	for _, arch := range model.Architectures {
		t.Run(arch, func(t *testing.T) {
			path := tinyModel(t, arch)
			tr := newFullTrainer(t, path, fullOptions())
			c, err := model.Options{Arch: arch, Preset: "tiny"}.Config()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tr.TrainableParams(), int(c.Params())+c.EmbeddingLength+1; got != want {
				t.Errorf("trainable parameters: got %d, want %d (model weights + value head)", got, want)
			}
			if len(tr.loras) != 0 || !tr.Full() {
				t.Errorf("full trainer has %d LoRA matrices (Full() = %v), want none", len(tr.loras), tr.Full())
			}
			groups := map[string]int{}
			for _, p := range tr.params {
				groups[p.name] = p.group
			}
			want := map[string]int{
				"token_embd.weight":      groupDecay,
				"blk.1.attn_k.weight":    groupDecay,
				"blk.0.ffn_down.weight":  groupDecay,
				"blk.0.attn_norm.weight": groupNoDecay,
				"output_norm.weight":     groupNoDecay,
				"value_head.weight":      groupValue,
			}
			if c.QKVBias {
				want["blk.0.attn_q.bias"] = groupNoDecay
			}
			if c.QKNorm {
				want["blk.1.attn_k_norm.weight"] = groupNoDecay
			}
			if !c.TiedEmbeddings {
				want["output.weight"] = groupDecay
			}
			for name, w := range want {
				if got, ok := groups[name]; !ok || got != w {
					t.Errorf("%s: got group %d (a parameter: %v), want %d", name, got, ok, w)
				}
			}
			if err := tr.SaveAdapter(filepath.Join(t.TempDir(), "a.gguf")); err == nil || !strings.Contains(err.Error(), "no adapter") {
				t.Errorf("SaveAdapter in full mode: got %v, want a no-adapter error", err)
			}
			if _, err := tr.Evaluate(context.Background(), randomSeqs(1, 1, 10, 20, tr.Vocab())); err == nil || !strings.Contains(err.Error(), "no frozen reference") {
				t.Errorf("Evaluate in full mode: got %v, want a no-reference error", err)
			}
		})
	}
}

// TestFullTrainingLowersLoss: a short full-parameter run (warm-up and cosine
// decay, AdamW with weight decay, clipping) on a fixed piece of the corpus
// lowers its masked cross-entropy a lot, and every kind of weight moved.
func TestFullTrainingLowersLoss(t *testing.T) {
	o := fullOptions()
	o.LR = 3e-3
	o.MiniBatch = 8
	o.LRSchedule, o.WarmupSteps, o.TotalSteps = ScheduleCosine, 5, 40
	tr := newFullTrainer(t, tinyModel(t, "llama"), o)
	before := readParams(tr, false)
	seqs := corpusSeqs(t, tr.Vocab(), 16, 64)
	obj, err := NewObjective(CrossEntropy{})
	if err != nil {
		t.Fatal(err)
	}
	ce0 := meanCE(t, tr, seqs)
	var updates []Update
	for tr.Steps() < o.TotalSteps {
		st, err := tr.StepWith(context.Background(), obj, seqs)
		if err != nil {
			t.Fatal(err)
		}
		updates = append(updates, st.Updates...)
	}
	ce1 := meanCE(t, tr, seqs)
	t.Logf("cross-entropy %.3f → %.3f in %d steps", ce0, ce1, tr.Steps())
	if ce1 > 0.6*ce0 {
		t.Errorf("cross-entropy went from %.3f to %.3f, want below %.3f", ce0, ce1, 0.6*ce0)
	}
	if len(updates) != o.TotalSteps {
		t.Fatalf("got %d updates, want %d", len(updates), o.TotalSteps)
	}
	for i, u := range updates {
		if u.Step != i+1 || u.LR != o.LearningRate(i+1) || !(u.GradNorm > 0) || u.TrainedTokens != 8*63 {
			t.Errorf("update %d: got %+v, want step %d, lr %g, grad norm > 0, 504 trained tokens", i, u, i+1, o.LearningRate(i+1))
		}
	}
	if first, last := updates[0].Loss, updates[len(updates)-1].Loss; !(last < first) {
		t.Errorf("minibatch loss: first %g, last %g; want it to fall", first, last)
	}
	after := readParams(tr, false)
	for i, p := range tr.params {
		if p.group != groupValue && slices.Equal(before[i], after[i]) {
			t.Errorf("%s did not change", p.name)
		}
		if p.group == groupValue && !slices.Equal(before[i], after[i]) {
			t.Errorf("%s changed, but no term uses the value head", p.name)
		}
	}
}

// TestFullGradientsMatchFiniteDifferences: ggml's gradient of the
// cross-entropy with respect to base weights (a matrix, the embeddings, a
// norm; tied embeddings in qwen2, per-head norms in qwen3) agrees with
// central finite differences along the gradient and along a random
// direction.
func TestFullGradientsMatchFiniteDifferences(t *testing.T) {
	tests := []struct {
		arch   string
		params []string
	}{
		{"llama", []string{"blk.0.attn_k.weight", "token_embd.weight", "output.weight", "blk.1.ffn_norm.weight"}},
		{"qwen2", []string{"token_embd.weight", "blk.0.attn_v.bias", "blk.1.ffn_gate.weight"}},
		{"qwen3", []string{"blk.1.attn_q_norm.weight", "blk.0.attn_output.weight"}},
	}
	for _, tt := range tests {
		t.Run(tt.arch, func(t *testing.T) {
			tr := newFullTrainer(t, tinyModel(t, tt.arch), fullOptions())
			ctx := context.Background()
			seqs := randomSeqs(23, 3, 20, 50, tr.Vocab())
			idx := []int{0, 1, 2}
			loss := func() float64 {
				acc, err := tr.accumulate(ctx, tr.sft, seqs, idx, tr.tokenWeights(seqs, idx))
				if err != nil {
					t.Fatal(err)
				}
				return acc.loss
			}
			tr.gbuf.Clear(0)
			loss()
			grads := readParams(tr, true)
			tr.gbuf.Clear(0)
			theta := readParams(tr, false)
			r := rand.New(rand.NewPCG(4, 4))
			for _, name := range tt.params {
				pi := slices.IndexFunc(tr.params, func(p param) bool { return p.name == name })
				if pi < 0 {
					t.Fatalf("%s is not a parameter", name)
				}
				for _, dirName := range []string{"gradient", "random"} {
					dir := make([]float32, len(grads[pi]))
					var norm float64
					for j := range dir {
						dir[j] = grads[pi][j]
						if dirName == "random" {
							dir[j] = float32(r.NormFloat64())
						}
						norm += float64(dir[j]) * float64(dir[j])
					}
					norm = math.Sqrt(norm)
					var analytic float64
					for j := range dir {
						dir[j] /= float32(norm)
						analytic += float64(grads[pi][j]) * float64(dir[j])
					}
					const h = 1e-2
					at := func(s float64) float64 {
						v := slices.Clone(theta[pi])
						for j := range v {
							v[j] += float32(s) * dir[j]
						}
						llamacpp.SetF32(tr.params[pi].t, v)
						l := loss()
						tr.gbuf.Clear(0)
						return l
					}
					numeric := (at(h) - at(-h)) / (2 * h)
					llamacpp.SetF32(tr.params[pi].t, theta[pi])
					rel := math.Abs(numeric-analytic) / math.Max(math.Abs(analytic), 1e-3)
					t.Logf("%s along the %s: analytic %.6g, numeric %.6g (rel %.2g)", name, dirName, analytic, numeric, rel)
					if dirName == "gradient" && !(analytic > 1e-4) {
						t.Errorf("%s: gradient norm %g: the weight gets no gradient", name, analytic)
					}
					if rel > 2e-2 {
						t.Errorf("%s along the %s: analytic %g, numeric %g", name, dirName, analytic, numeric)
					}
				}
			}
		})
	}
}

// TestFullResumeBitIdentical: a full-parameter run interrupted by a
// checkpoint and resumed in a fresh trainer takes exactly the steps the
// uninterrupted run takes (weights, moments, schedule position, shuffling
// RNG), and the checkpoint's model.gguf is the saved model.
func TestFullResumeBitIdentical(t *testing.T) {
	o := fullOptions()
	o.LR = 2e-3
	o.MiniBatch = 3
	o.Epochs = 2 // the shuffling RNG decides the minibatches
	o.LRSchedule, o.WarmupSteps, o.TotalSteps = ScheduleCosine, 3, 30
	path := tinyModel(t, "qwen3")
	obj, err := NewObjective(CrossEntropy{})
	if err != nil {
		t.Fatal(err)
	}
	seqs := corpusSeqs(t, 512, 7, 40)
	run := func(tr *Trainer, calls int) []Update {
		var out []Update
		for range calls {
			st, err := tr.StepWith(context.Background(), obj, seqs)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st.Updates...)
		}
		return out
	}
	a := newFullTrainer(t, path, o)
	run(a, 2)
	dir := t.TempDir()
	if err := a.SaveCheckpoint(dir, []byte("cursor 2")); err != nil {
		t.Fatal(err)
	}
	wantUpdates := run(a, 2)
	want := readParams(a, false)

	b := newFullTrainer(t, path, o)
	extra, err := b.LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 7 sequences in minibatches of 3, 2 epochs: 6 steps per call.
	if string(extra) != "cursor 2" || b.Steps() != 12 {
		t.Fatalf("restored extra %q at step %d, want %q at step 12", extra, b.Steps(), "cursor 2")
	}
	gotUpdates := run(b, 2)
	if !slices.Equal(gotUpdates, wantUpdates) {
		t.Errorf("resumed updates differ:\ngot  %+v\nwant %+v", gotUpdates, wantUpdates)
	}
	got := readParams(b, false)
	for i, p := range a.params {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("%s differs after the resume", p.name)
		}
	}

	// The checkpoint's model is the trainer's state at the checkpoint.
	c := newFullTrainer(t, path, o)
	if _, err := c.LoadCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "m.gguf")
	if err := c.SaveModel(saved, gguf.F32); err != nil {
		t.Fatal(err)
	}
	if x, y := fileBytes(t, saved), fileBytes(t, filepath.Join(dir, ModelFile)); !slices.Equal(x, y) {
		t.Errorf("%s differs from SaveModel of the restored trainer", ModelFile)
	}

	// A LoRA trainer refuses a full checkpoint, and the other way round.
	lo := newTrainer(t, "qwen3", testOptions())
	if _, err := lo.LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "full-parameter trainer") {
		t.Errorf("LoRA trainer loading a full checkpoint: got %v, want a mode error", err)
	}
	ldir := t.TempDir()
	if err := lo.SaveCheckpoint(ldir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoadCheckpoint(ldir); err == nil || !strings.Contains(err.Error(), "LoRA trainer") {
		t.Errorf("full trainer loading a LoRA checkpoint: got %v, want a mode error", err)
	}
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSaveModel: the model SaveModel writes after full-parameter training
// (and, from a LoRA trainer, with the adapter merged in) has the input's
// metadata, tensor names and shapes; llama.cpp's llama_decode gives the
// trainer's logprobs, so does the inference backend generating from it; a
// trainer loading it holds exactly the saved weights; F16 is close.
func TestSaveModel(t *testing.T) {
	for _, arch := range model.Architectures {
		t.Run(arch, func(t *testing.T) {
			src := tinyModel(t, arch)
			o := fullOptions()
			o.LR = 3e-3
			tr := newFullTrainer(t, src, o)
			seqs := corpusSeqs(t, tr.Vocab(), 6, 48)
			obj, err := NewObjective(CrossEntropy{})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := tr.StepWith(context.Background(), obj, seqs); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "trained.gguf")
			if err := tr.SaveModel(path, gguf.F32); err != nil {
				t.Fatal(err)
			}
			checkSavedModel(t, src, path, gguf.F32)
			checkLogprobs(t, tr, path, seqs, 1e-4)

			// A trainer on the saved model holds the saved weights exactly.
			again := newFullTrainer(t, path, o)
			got, want := readParams(again, false), readParams(tr, false)
			for i, p := range tr.params {
				if p.group != groupValue && !slices.Equal(got[i], want[i]) {
					t.Errorf("%s: reloaded weights differ", p.name)
				}
			}
			// Saving twice gives the same bytes.
			if err := again.SaveModel(filepath.Join(dir, "again.gguf"), gguf.F32); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fileBytes(t, path), fileBytes(t, filepath.Join(dir, "again.gguf"))) {
				t.Error("saving the reloaded model gave other bytes")
			}

			half := filepath.Join(dir, "trained-f16.gguf")
			if err := tr.SaveModel(half, gguf.F16); err != nil {
				t.Fatal(err)
			}
			checkSavedModel(t, src, half, gguf.F16)
			checkLogprobs(t, tr, half, seqs, 3e-2)
		})
	}
	t.Run("lora merged", func(t *testing.T) {
		o := testOptions()
		o.LR = 1e-2
		tr := newTrainer(t, "llama", o)
		seqs := randomSeqs(52, 3, 30, 60, tr.Vocab())
		for range 5 {
			if _, err := tr.SFTStep(context.Background(), seqs); err != nil {
				t.Fatal(err)
			}
		}
		src := tinyModel(t, "llama")
		path := filepath.Join(t.TempDir(), "merged.gguf")
		if err := tr.SaveModel(path, gguf.F32); err != nil {
			t.Fatal(err)
		}
		checkSavedModel(t, src, path, gguf.F32)
		base, _, err := tr.score(context.Background(), seqs, kindBase)
		if err != nil {
			t.Fatal(err)
		}
		lps := checkLogprobs(t, tr, path, seqs, 1e-4)
		if d := maskedDiff(t, lps[0], base[0], seqs[0].Mask); d < 1e-2 {
			t.Errorf("the merged model differs from the base by only %g; the merge check is vacuous", d)
		}
	})
	t.Run("bad type", func(t *testing.T) {
		tr := newFullTrainer(t, tinyModel(t, "llama"), fullOptions())
		if err := tr.SaveModel(filepath.Join(t.TempDir(), "q.gguf"), gguf.Q8_0); err == nil || !strings.Contains(err.Error(), "want F32 or F16") {
			t.Errorf("got %v, want a weight-type error", err)
		}
	})
}

// checkSavedModel compares a saved model with its source: the same
// metadata (general.file_type set for typ) and the same tensor names, order
// and shapes, matrices stored as typ and vectors as F32.
func checkSavedModel(t *testing.T, src, saved string, typ gguf.TensorType) {
	t.Helper()
	a, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := gguf.Open(saved)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(a.Metadata) != len(b.Metadata) {
		t.Fatalf("metadata: got %d keys, want %d", len(b.Metadata), len(a.Metadata))
	}
	for i, kv := range a.Metadata {
		got := b.Metadata[i]
		want := kv.Value
		if kv.Key == "general.file_type" {
			want = map[gguf.TensorType]uint32{gguf.F32: 0, gguf.F16: 1}[typ]
		}
		if got.Key != kv.Key || !equalValue(got.Value, want) {
			t.Errorf("metadata %d: got %s = %v, want %s = %v", i, got.Key, short(got.Value), kv.Key, short(want))
		}
	}
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("tensors: got %d, want %d", len(b.Tensors), len(a.Tensors))
	}
	for i, ti := range a.Tensors {
		got := b.Tensors[i]
		want := gguf.F32
		if len(ti.Shape) > 1 && ti.Shape[1] > 1 {
			want = typ
		}
		if got.Name != ti.Name || !slices.Equal(got.Shape, ti.Shape) || got.Type != want {
			t.Errorf("tensor %d: got %s %v %v, want %s %v %v", i, got.Name, got.Shape, got.Type, ti.Name, ti.Shape, want)
		}
	}
}

func equalValue(a, b any) bool {
	switch x := a.(type) {
	case []string:
		y, ok := b.([]string)
		return ok && slices.Equal(x, y)
	case []int32:
		y, ok := b.([]int32)
		return ok && slices.Equal(x, y)
	}
	return a == b
}

func short(v any) any {
	if s, ok := v.([]string); ok && len(s) > 3 {
		return s[:3]
	}
	return v
}

// checkLogprobs compares the trainer's logprobs of seqs with llama_decode's
// on the saved model at path (and returns the trainer's).
func checkLogprobs(t *testing.T, tr *Trainer, path string, seqs []Sequence, tol float64) [][]float32 {
	t.Helper()
	scores, err := tr.EvaluatePolicy(context.Background(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var worst float64
	var lps [][]float32
	for i, s := range seqs {
		worst = math.Max(worst, maskedDiff(t, scores[i].Logprobs, decodeAll(t, m, s.Tokens, nil), s.Mask))
		lps = append(lps, scores[i].Logprobs)
	}
	t.Logf("%s: max |Δ logprob| vs llama_decode = %.3g", filepath.Base(path), worst)
	if worst > tol {
		t.Errorf("%s: logprobs differ from llama_decode by up to %g, want ≤ %g", filepath.Base(path), worst, tol)
	}
	return lps
}

// TestSavedModelServes: the inference backend (inference/llama, what
// self-play plays with) serves a full-parameter model saved by SaveModel,
// and the raw logprobs of the tokens it generates equal the trainer's.
func TestSavedModelServes(t *testing.T) {
	o := fullOptions()
	o.LR = 3e-3
	tr := newFullTrainer(t, tinyModel(t, "llama"), o)
	seqs := corpusSeqs(t, tr.Vocab(), 8, 48)
	obj, err := NewObjective(CrossEntropy{})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := tr.StepWith(context.Background(), obj, seqs); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "trained.gguf")
	if err := tr.SaveModel(path, gguf.F32); err != nil {
		t.Fatal(err)
	}
	lo := llama.Options{}.Defaults()
	lo.LibDir, lo.Model = llamatest.LibDir(), path
	lo.Parallel, lo.Context = 2, 256
	lo.Threads, lo.ThreadsBatch = 1, 1
	lo.KVType = llamacpp.KVTypeF32
	be, err := llama.New(lo)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var reqs []inference.Request
	for i := range 2 {
		reqs = append(reqs, inference.Request{Key: fmt.Sprint(i), Prompt: seqs[i].Tokens[:20], MaxTokens: 24,
			Sampling: inference.Sampling{Temperature: 1, Seed: uint64(i + 1)}})
	}
	resps, err := be.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	var gen []Sequence
	for i, r := range resps {
		if len(r.Tokens) == 0 {
			t.Fatalf("request %d generated nothing", i)
		}
		s := Sequence{Tokens: append(slices.Clone(reqs[i].Prompt), r.Tokens...)}
		s.Mask = make([]bool, len(s.Tokens))
		for j := len(reqs[i].Prompt); j < len(s.Tokens); j++ {
			s.Mask[j] = true
		}
		gen = append(gen, s)
	}
	scores, err := tr.EvaluatePolicy(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i, r := range resps {
		want := make([]float32, len(gen[i].Tokens))
		copy(want[len(reqs[i].Prompt):], r.RawLogprobs)
		worst = math.Max(worst, maskedDiff(t, scores[i].Logprobs, want, gen[i].Mask))
	}
	t.Logf("max |Δ logprob| between the backend's generation and the trainer: %.3g", worst)
	if worst > 1e-4 {
		t.Errorf("the backend's raw logprobs differ from the trainer's by up to %g", worst)
	}
}
