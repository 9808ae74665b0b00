package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
)

// goldenFullFile pins the full-parameter trainer's numerics: the built-in
// model is rebuilt byte for byte from its recipe (bc.DefaultBuild), so
// any change of what a full step computes changes that model and must be
// deliberate.
const goldenFullFile = "testdata/golden_full.json"

// TestGoldenFull runs six full-parameter cross-entropy steps (tied
// embeddings in qwen2, untied in llama) and compares a SHA-256 of the
// step losses and of the saved model with testdata/golden_full.json. Run
// with -update to record new values after an intended change.
func TestGoldenFull(t *testing.T) {
	skipUnlessPinned(t)
	want := map[string]map[string]string{}
	if b, err := os.ReadFile(goldenFullFile); err == nil {
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", goldenFullFile, err)
		}
	} else if !*update {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	got := map[string]map[string]string{}
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			o := fullOptions()
			o.LR, o.MiniBatch = 3e-3, 4
			o.LRSchedule, o.WarmupSteps, o.TotalSteps = ScheduleCosine, 2, 6
			tr := newFullTrainer(t, tinyModel(t, arch), o)
			seqs := corpusSeqs(t, tr.Vocab(), 8, 48)
			obj, err := NewObjective(CrossEntropy{})
			if err != nil {
				t.Fatal(err)
			}
			var h hasher
			for tr.Steps() < o.TotalSteps {
				st, err := tr.StepWith(context.Background(), obj, seqs)
				if err != nil {
					t.Fatal(err)
				}
				for _, u := range st.Updates {
					h.f64(float64(u.Loss), u.GradNorm)
				}
			}
			sums := map[string]string{"steps": h.sum()}
			path := filepath.Join(t.TempDir(), "model.gguf")
			if err := tr.SaveModel(path, gguf.F32); err != nil {
				t.Fatal(err)
			}
			sums["model"] = fileSum(t, path)
			got[arch] = sums
			if *update {
				return
			}
			for _, k := range []string{"steps", "model"} {
				if sums[k] != want[arch][k] {
					t.Errorf("%s: got sha256 %s, want %s", k, sums[k], want[arch][k])
				}
			}
		})
	}
	if *update && !t.Failed() {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFullFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
