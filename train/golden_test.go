package train

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenFile holds, per case of TestGolden, the SHA-256 of every stage's
// results: floating-point outputs bit for bit, the adapter file and the
// checkpoint. A refactor of the trainer must leave them all unchanged:
// self-play resume and the "same seed, same adapter" promise depend on it.
const goldenFile = "testdata/golden.json"

// goldenEvaluate scores seqs and returns values, policy and reference
// logprobs per sequence.
func goldenEvaluate(t *testing.T, tr *Trainer, seqs []Sequence) (values, lps, refs [][]float32) {
	t.Helper()
	scores, err := tr.Evaluate(context.Background(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scores {
		values, lps, refs = append(values, s.Values), append(lps, s.Logprobs), append(refs, s.RefLogprobs)
	}
	return values, lps, refs
}

// goldenStep runs one PPO Step and returns its statistics in a fixed order.
func goldenStep(t *testing.T, tr *Trainer, seqs []Sequence) []float64 {
	t.Helper()
	st, err := tr.Step(context.Background(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	early := 0.0
	if st.EarlyStopped {
		early = 1
	}
	t.Logf("%+v", st)
	return []float64{st.Term(TermPolicy), st.Term(TermValue), st.Term(TermKL), st.Term(TermEntropy), st.Term(TermClipFrac), st.ApproxKL, st.GradNorm,
		early, float64(st.Tokens), float64(st.TrainedTokens), float64(st.OptimizerSteps)}
}

// hasher accumulates the exact bits of float slices.
type hasher struct{ b []byte }

func (h *hasher) f32(xs ...[]float32) {
	for _, x := range xs {
		h.b = binary.LittleEndian.AppendUint32(h.b, uint32(len(x)))
		for _, v := range x {
			h.b = binary.LittleEndian.AppendUint32(h.b, math.Float32bits(v))
		}
	}
}

func (h *hasher) f64(xs ...float64) {
	for _, v := range xs {
		h.b = binary.LittleEndian.AppendUint64(h.b, math.Float64bits(v))
	}
}

func (h *hasher) sum() string {
	s := sha256.Sum256(h.b)
	h.b = h.b[:0]
	return hex.EncodeToString(s[:])
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestGolden runs a fixed script — Evaluate, two PPO Steps on the evaluated
// sequences, a Step on those plus sequences that were never evaluated (their
// reference logprobs come from the Step's own pass), an SFT step, a second
// Evaluate, then SaveAdapter and SaveCheckpoint — and compares a SHA-256 of
// each stage's results with testdata/golden.json. Every loss term is on
// (entropy bonus, clipped values); the second case aggregates per sequence
// and stops early on TargetKL. Run with -update to
// record new values after an intended change of the numerics.
// skipUnlessPinned skips a golden test where the tests cannot load the
// CPU kernels its numbers were recorded with (llamatest.PinnedVariant).
func skipUnlessPinned(t *testing.T) {
	t.Helper()
	if llamatest.LibDir() != "" && !llamatest.Pinned() {
		t.Skipf("the goldens hold the numbers of ggml's %s kernels, which this CPU cannot run", llamatest.PinnedVariant)
	}
}

func TestGolden(t *testing.T) {
	skipUnlessPinned(t)
	cases := []struct {
		name, arch string
		opts       func(*Options)
	}{
		{"llama_token", "llama", func(o *Options) {
			o.EntropyCoef = 0.01
			o.MiniBatch = 3
		}},
		{"qwen3_sequence", "qwen3", func(o *Options) {
			o.LossAggregation = "sequence"
			o.TargetKL = 0.2
			o.LR = 2e-3
			o.Epochs, o.MiniBatch = 3, 2
		}},
	}
	want := map[string]map[string]string{}
	if b, err := os.ReadFile(goldenFile); err == nil {
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", goldenFile, err)
		}
	} else if !*update {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	got := map[string]map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			c.opts(&o)
			tr := newTrainer(t, c.arch, o)
			randomize(tr, 5, 0.05)
			a := randomSeqs(41, 6, 8, 60, tr.Vocab())
			b := randomSeqs(43, 3, 8, 40, tr.Vocab())
			sums := map[string]string{}
			var h hasher

			values, lps, refs := goldenEvaluate(t, tr, a)
			h.f32(values...)
			h.f32(lps...)
			h.f32(refs...)
			sums["evaluate"] = h.sum()
			for i := range a {
				a[i].OldLogprobs, a[i].OldValues, a[i].RefLogprobs = lps[i], values[i], refs[i]
			}
			h.f64(goldenStep(t, tr, a)...)
			sums["step1"] = h.sum()
			h.f64(goldenStep(t, tr, a)...)
			sums["step2"] = h.sum()
			h.f64(goldenStep(t, tr, append(append([]Sequence(nil), a...), b...))...)
			sums["step_mixed"] = h.sum()
			sft, err := tr.SFTStep(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			h.f64(sft)
			sums["sft"] = h.sum()
			values, lps, refs = goldenEvaluate(t, tr, b)
			h.f32(values...)
			h.f32(lps...)
			h.f32(refs...)
			sums["evaluate_after"] = h.sum()

			dir := t.TempDir()
			if err := tr.SaveAdapter(filepath.Join(dir, "adapter.gguf")); err != nil {
				t.Fatal(err)
			}
			sums["adapter"] = fileSum(t, filepath.Join(dir, "adapter.gguf"))
			if err := tr.SaveCheckpoint(dir, []byte(`{"golden":true}`)); err != nil {
				t.Fatal(err)
			}
			sums["checkpoint"] = fileSum(t, filepath.Join(dir, CheckpointFile))
			got[c.name] = sums
			if *update {
				return
			}
			for _, stage := range []string{"evaluate", "step1", "step2", "step_mixed", "sft", "evaluate_after", "adapter", "checkpoint"} {
				if sums[stage] != want[c.name][stage] {
					t.Errorf("%s: got sha256 %s, want %s", stage, sums[stage], want[c.name][stage])
				}
			}
		})
	}
	if *update && !t.Failed() {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(goldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
