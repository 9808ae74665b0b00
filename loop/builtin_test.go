package loop

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/train"
)

// shortBuiltin is the built-in recipe cut down to run in seconds: a few
// episodes of three games, the tiny shape, a few steps.
func shortBuiltin() BuiltinOptions {
	o := DefaultBuiltin()
	var es []CorpusEnv
	for _, e := range o.Corpus.Envs {
		if e.Env == "casino" || e.Env == "craigslist" || e.Env == "werewolf" {
			e.Episodes = 2
			es = append(es, e)
		}
	}
	o.Corpus.Envs = es
	o.Preset, o.Vocab = "tiny", 400
	o.Steps, o.Batch, o.CheckpointEvery = 12, 2, 6
	o.Train.TotalSteps, o.Train.WarmupSteps = o.Steps, 4
	o.Train.LR = 5e-3
	return o
}

// TestBuildBuiltinShort builds a short version of the built-in model (what
// CI can afford): the loss falls, and a build interrupted after a
// checkpoint and resumed, on two threads instead of one, ends with the
// same bytes.
func TestBuildBuiltinShort(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("the llama.cpp libraries are not installed (make deps)")
	}
	dir := t.TempDir()
	o := shortBuiltin()
	a := filepath.Join(dir, "a.gguf")
	rep, err := BuildBuiltin(context.Background(), o, a, filepath.Join(dir, "a.work"), lib, BuildHooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Losses) != o.Steps || rep.Corpus.Trajectories == 0 {
		t.Fatalf("report %+v", rep)
	}
	head, tail := mean(rep.Losses[:4]), mean(rep.Losses[len(rep.Losses)-4:])
	if tail >= head {
		t.Errorf("loss %.3f over the first steps, %.3f over the last: it did not fall", head, tail)
	}

	// The second build runs on two threads: the bytes do not depend on
	// the count (ggml's CPU kernels give each output row to one thread).
	o.Train.Threads = 2
	b := filepath.Join(dir, "b.gguf")
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	_, err = BuildBuiltin(ctx, o, b, filepath.Join(dir, "b.work"), lib, BuildHooks{Step: func(step, _ int, _ float64) {
		if steps++; step == o.CheckpointEvery+3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted build: %v", err)
	}
	rep2, err := BuildBuiltin(context.Background(), o, b, filepath.Join(dir, "b.work"), lib, BuildHooks{})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.ResumedSteps == 0 {
		t.Errorf("the second build did not resume from the checkpoint")
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Errorf("an interrupted and resumed build wrote other bytes (%d and %d)", len(x), len(y))
	}
}

func TestWithPromptWeight(t *testing.T) {
	s := train.Sequence{Tokens: []int32{5, 6, 7, 8}, Mask: []bool{false, false, true, true}}
	if got := withPromptWeight(s, 0); !slices.Equal(got.Mask, s.Mask) || got.Weights != nil {
		t.Errorf("weight 0: %+v, want the sequence unchanged", got)
	}
	got := withPromptWeight(s, 0.25)
	if !slices.Equal(got.Mask, []bool{true, true, true, true}) || !slices.Equal(got.Weights, []float32{0.25, 0.25, 1, 1}) {
		t.Errorf("weight 0.25: mask %v weights %v", got.Mask, got.Weights)
	}
	if !slices.Equal(s.Mask, []bool{false, false, true, true}) {
		t.Errorf("the input's mask changed: %v", s.Mask)
	}
	o := shortBuiltin()
	for _, w := range []float64{-0.1, 1.5, math.NaN()} {
		o.PromptWeight = w
		if err := o.Validate(); err == nil {
			t.Errorf("prompt weight %g: no error", w)
		}
	}
}
