package train

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

// testLib loads the llama.cpp libraries, skipping only where the install
// script has not put them in lib/llama/cpu (make test installs them first).
func testLib(t testing.TB) {
	t.Helper()
	dir := llamatest.LibDir()
	if dir == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	if err := llamacpp.Load(dir); err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
}

var (
	modelsOnce sync.Once
	modelsDir  string
	modelsErr  error
)

// tinyModel returns the path of the tiny generated model of arch (written
// once per test binary).
func tinyModel(t testing.TB, arch string) string {
	t.Helper()
	testLib(t)
	modelsOnce.Do(func() {
		modelsDir, modelsErr = os.MkdirTemp("", "train-test")
		if modelsErr != nil {
			return
		}
		for _, a := range model.Architectures {
			p := filepath.Join(modelsDir, a+".gguf")
			if modelsErr = model.WriteFile(p, model.Options{Arch: a, Preset: "tiny", Seed: 7}); modelsErr != nil {
				return
			}
		}
	})
	if modelsErr != nil {
		t.Fatal(modelsErr)
	}
	return filepath.Join(modelsDir, arch+".gguf")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelsDir != "" {
		os.RemoveAll(modelsDir)
	}
	os.Exit(code)
}

func testOptions() Options {
	o := Options{}.Defaults()
	// One thread: the test machine is shared, and ggml's worker threads
	// busy-wait, which collapses when cores are oversubscribed.
	o.Threads = 1
	o.LoRARank = 4
	o.BatchTokens = 256
	return o
}

func newTrainer(t testing.TB, arch string, o Options) *Trainer {
	t.Helper()
	tr, err := New(tinyModel(t, arch), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// randomize gives B and the value head random values, so that the adapter
// changes the logits (B starts at zero) and values are not all zero.
func randomize(tr *Trainer, seed uint64, scale float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for i, p := range tr.params {
		if i%2 == 0 && p.group == 0 {
			continue // keep A
		}
		d := make([]float32, p.n)
		for j := range d {
			d[j] = float32(r.NormFloat64() * scale)
		}
		llamacpp.SetF32(p.t, d)
	}
}

// randomSeqs makes n sequences of lengths in [minLen, maxLen), with about
// 70% of the tokens after the first third masked, and plausible PPO fields.
func randomSeqs(seed uint64, n, minLen, maxLen, vocab int) []Sequence {
	r := rand.New(rand.NewPCG(seed, 2))
	seqs := make([]Sequence, n)
	for i := range seqs {
		l := minLen + r.IntN(maxLen-minLen)
		s := Sequence{Tokens: make([]int32, l), Mask: make([]bool, l), OldLogprobs: make([]float32, l),
			Advantages: make([]float32, l), Returns: make([]float32, l), OldValues: make([]float32, l)}
		for j := range l {
			s.Tokens[j] = int32(r.IntN(vocab))
			if j >= l/3 && r.Float64() < 0.7 { // several turns: runs of masked tokens
				s.Mask[j] = true
				s.OldLogprobs[j] = -float32(4 + r.Float64()*2)
				s.Advantages[j] = float32(r.NormFloat64())
				s.Returns[j] = float32(r.NormFloat64())
				s.OldValues[j] = float32(r.NormFloat64() * 0.5)
			}
		}
		seqs[i] = s
	}
	return seqs
}

// columns splits Evaluate's scores into per-field slices, indexed like
// seqs.
func columns(scores []Score, err error) (values, lps, refs [][]float32, _ error) {
	if err != nil {
		return nil, nil, nil, err
	}
	for _, s := range scores {
		values = append(values, s.Values)
		lps = append(lps, s.Logprobs)
		refs = append(refs, s.RefLogprobs)
	}
	return values, lps, refs, nil
}

// maskedDiff is the largest |a−b| on masked entries; it fails the test when
// an unmasked entry of got is not 0 (logprobs are only computed on masked
// tokens).
func maskedDiff(t *testing.T, got, want []float32, mask []bool) float64 {
	t.Helper()
	var m float64
	for i := range got {
		if i > 0 && mask[i] {
			m = math.Max(m, math.Abs(float64(got[i]-want[i])))
		} else if got[i] != 0 {
			t.Errorf("entry %d is off the mask but %g, want 0", i, got[i])
			return math.Inf(1)
		}
	}
	return m
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// TestForwardMatchesReference checks the batched, padded training graph
// against the plain-Go forward pass for every architecture, with a non-zero
// adapter and value head, on sequences of different lengths (several length
// buckets and several sequences per pass).
func TestForwardMatchesReference(t *testing.T) {
	for _, arch := range model.Architectures {
		t.Run(arch, func(t *testing.T) {
			tr := newTrainer(t, arch, testOptions())
			if tr.Arch() != arch || tr.Backend() != "CPU" {
				t.Errorf("trainer: got arch %q on %q, want %q on CPU", tr.Arch(), tr.Backend(), arch)
			}
			// 2 layers × rank 4 × Σ (n_in + n_out) over q, o (64→64), k, v
			// (64→32), gate, up (64→128), down (128→64); plus the value head.
			if got, want := tr.TrainableParams(), 2*4*(2*128+2*96+3*192)+64+1; arch == "llama" && got != want {
				t.Errorf("trainable parameters: got %d, want %d", got, want)
			}
			randomize(tr, 3, 0.05)
			ref := loadRef(t, tinyModel(t, arch), tr)
			seqs := randomSeqs(11, 4, 5, 70, tr.Vocab())
			values, lps, refLps, err := columns(tr.Evaluate(context.Background(), seqs))
			if err != nil {
				t.Fatal(err)
			}
			base := *ref
			base.lora = nil
			for i, s := range seqs {
				logits, vals := ref.forward(s.Tokens)
				want := refLogprobs(logits, s.Tokens)
				if d := maskedDiff(t, lps[i], want, s.Mask); d > 5e-5 {
					t.Errorf("seq %d: logprobs differ by %g (got %v…, want %v…)", i, d, lps[i][1:4], want[1:4])
				}
				// Values at the masked tokens, 0 elsewhere.
				wantV := make([]float32, len(s.Tokens))
				for j := 1; j < len(s.Tokens); j++ {
					if s.Mask[j] {
						wantV[j] = vals[j-1]
					}
				}
				if d := maxAbsDiff(values[i], wantV); d > 5e-5 {
					t.Errorf("seq %d: values differ by %g", i, d)
				}
				bl, _ := base.forward(s.Tokens)
				wantRef := refLogprobs(bl, s.Tokens)
				if d := maskedDiff(t, refLps[i], wantRef, s.Mask); d > 5e-5 {
					t.Errorf("seq %d: reference logprobs differ by %g", i, d)
				}
				if d := maskedDiff(t, refLps[i], lps[i], s.Mask); d < 1e-3 {
					t.Errorf("seq %d: adapter changed logprobs by only %g; the test does not exercise LoRA", i, d)
				}
			}
		})
	}
}
