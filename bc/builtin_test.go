package bc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/train"
)

// shortBuiltin is the built-in recipe cut down to run in seconds: a few
// episodes of three games, the tiny shape, a few steps.
func shortBuiltin() BuildOptions {
	o := DefaultBuild()
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
	o.Dagger.Rounds, o.Dagger.Episodes, o.Dagger.Steps = 2, 2, 8
	o.Dagger.Games = []DaggerGame{
		{Env: "casino", Expert: "strategic", Opponents: []string{"naive", "strategic"}},
		{Env: "craigslist", Expert: "strategic", Opponents: []string{"strategic"}},
	}
	return o
}

// TestBuildShort builds a short version of the built-in model (what
// CI can afford): the loss falls, and a build interrupted after a
// checkpoint and resumed, on two threads instead of one, ends with the
// same bytes.
func TestBuildShort(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("the llama.cpp libraries are not installed (make deps)")
	}
	dir := t.TempDir()
	o := shortBuiltin()
	a := filepath.Join(dir, "a.gguf")
	rep, err := Build(context.Background(), o, a, filepath.Join(dir, "a.work"), lib, BuildHooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Losses) != o.TotalSteps() || rep.Corpus.Trajectories == 0 {
		t.Fatalf("report %+v", rep)
	}
	head, tail := mean(rep.Losses[:4]), mean(rep.Losses[o.Steps-4:o.Steps])
	if tail >= head {
		t.Errorf("loss %.3f over the first steps, %.3f over the last: it did not fall", head, tail)
	}
	var sum strings.Builder
	if err := rep.WriteSummary(&sum, a, o.TotalSteps()); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`corpus tokens \(replies\): casino [0-9.]+K? \([0-9.]+K?\), craigslist .*, werewolf `).MatchString(sum.String()) {
		t.Errorf("the summary does not divide the corpus among its games:\n%s", sum.String())
	}

	// The second build runs on two threads: the bytes do not depend on
	// the count (ggml's CPU kernels give each output row to one thread).
	o.Train.Threads = 2
	b := filepath.Join(dir, "b.gguf")
	// It is interrupted twice: in behaviour cloning after its first
	// checkpoint, and in the second DAgger round after that round's first.
	for _, at := range []int{o.CheckpointEvery + 3, o.Steps + o.Dagger.Steps + o.CheckpointEvery + 1} {
		ctx, cancel := context.WithCancel(context.Background())
		_, err = Build(ctx, o, b, filepath.Join(dir, "b.work"), lib, BuildHooks{Step: func(step, _ int, _ float64) {
			if step == at {
				cancel()
			}
		}})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("build interrupted at step %d: %v", at, err)
		}
	}
	rep2, err := Build(context.Background(), o, b, filepath.Join(dir, "b.work"), lib, BuildHooks{})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.ResumedSteps == 0 {
		t.Errorf("the last build did not resume from the checkpoint")
	}
	if !reflect.DeepEqual(rep2.Losses, rep.Losses) {
		t.Errorf("the resumed build reports the losses %v, the uninterrupted one %v", rep2.Losses, rep.Losses)
	}
	if len(rep.Dagger) != 2 || rep.Dagger[0].Episodes == 0 || rep.Dagger[0].Sequences == 0 || !reflect.DeepEqual(rep.Dagger, rep2.Dagger) {
		t.Errorf("DAgger rounds %+v, resumed %+v", rep.Dagger, rep2.Dagger)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Errorf("an interrupted and resumed build wrote other bytes (%d and %d)", len(x), len(y))
	}
}

// fourStepBuiltin is the shortest build: four steps of cloning,
// checkpoints every two, no DAgger; it skips without llama.cpp.
func fourStepBuiltin(t *testing.T) (string, BuildOptions) {
	t.Helper()
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("the llama.cpp libraries are not installed (make deps)")
	}
	o := shortBuiltin()
	o.Dagger.Rounds = 0
	o.Steps, o.CheckpointEvery = 4, 2
	o.Train.TotalSteps, o.Train.WarmupSteps = 4, 1
	return lib, o
}

// TestBuildOldWork: a build resumed from a work directory without
// the losses file (an older version's) reports the steps before the
// resume as unknown, plots the rest at their steps and says so.
func TestBuildOldWork(t *testing.T) {
	lib, o := fourStepBuiltin(t)
	dir := t.TempDir()
	out, work := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "m.work")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Build(ctx, o, out, work, lib, BuildHooks{Step: func(step, _ int, _ float64) {
		if step == 2 {
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted build: %v", err)
	}
	if err := os.Remove(filepath.Join(work, lossesFile)); err != nil {
		t.Fatal(err)
	}
	rep, err := Build(context.Background(), o, out, work, lib, BuildHooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Losses) != 4 || !math.IsNaN(rep.Losses[0]) || !math.IsNaN(rep.Losses[1]) || math.IsNaN(rep.Losses[2]) || math.IsNaN(rep.Losses[3]) {
		t.Fatalf("losses %v, want 2 unknown then 2", rep.Losses)
	}
	var sum strings.Builder
	if err := rep.WriteSummary(&sum, out, 4); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "the losses of 2 steps") {
		t.Errorf("the summary does not say that 2 losses are missing:\n%s", sum.String())
	}
	svg, err := os.ReadFile(strings.TrimSuffix(out, ".gguf") + ".loss.svg")
	if err != nil || bytes.Contains(svg, []byte("NaN")) {
		t.Errorf("the loss plot: %v, NaN in it: %v", err, bytes.Contains(svg, []byte("NaN")))
	}
}

// TestBuildSeed checks BuildOptions.Seed: another training seed
// is another draw of the recipe (other bytes from the same corpus), and a
// work directory of one seed refuses to resume into another.
func TestBuildSeed(t *testing.T) {
	lib, o := fourStepBuiltin(t)
	dir := t.TempDir()
	var files [2][]byte
	for i, seed := range []uint64{1, 2} {
		o.Seed = seed
		out := filepath.Join(dir, fmt.Sprintf("s%d.gguf", seed))
		rep, err := Build(context.Background(), o, out, out+".work", lib, BuildHooks{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Corpus.Trajectories == 0 {
			t.Fatalf("report %+v", rep)
		}
		if files[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.Equal(files[0], files[1]) {
		t.Error("seeds 1 and 2 wrote the same bytes")
	}
	o.Seed = 3
	out := filepath.Join(dir, "s1.gguf")
	if _, err := Build(context.Background(), o, out, out+".work", lib, BuildHooks{}); err == nil || !strings.Contains(err.Error(), "another recipe") {
		t.Errorf("seed 3 in seed 1's work directory: %v, want a refusal", err)
	}

	// Pinned kernels: the test process runs the pinned variant already,
	// so seed 1 pinned to it is seed 1's bytes; a variant the libraries
	// lack is refused before anything is built.
	o.Seed = 1
	o.CPUVariant = "no-such-cpu"
	out = filepath.Join(dir, "missing.gguf")
	if _, err := Build(context.Background(), o, out, out+".work", lib, BuildHooks{}); err == nil || !strings.Contains(err.Error(), "libggml-cpu-no-such-cpu.so") {
		t.Errorf("a variant the libraries lack: %v", err)
	}
	if !llamatest.Pinned() {
		return
	}
	o.CPUVariant = llamatest.PinnedVariant
	out = filepath.Join(dir, "pinned.gguf")
	if _, err := Build(context.Background(), o, out, out+".work", lib, BuildHooks{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, files[0]) {
		t.Errorf("seed 1 on the %s kernels named: other bytes than on the same kernels loaded by default", o.CPUVariant)
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

// TestCorpusScaled: every environment's episodes scale by the factor,
// rounded and at least 1, and the recipe it was called on is unchanged.
func TestCorpusScaled(t *testing.T) {
	o := CorpusOptions{Envs: []CorpusEnv{{Env: "casino", Episodes: 288}, {Env: "werewolf", Episodes: 24}, {Env: "sotopia", Episodes: 1}}}
	for _, tc := range []struct {
		f    float64
		want []int
	}{{2, []int{576, 48, 2}}, {0.5, []int{144, 12, 1}}, {0.01, []int{3, 1, 1}}, {1.25, []int{360, 30, 1}}} {
		var got []int
		for _, e := range o.Scaled(tc.f).Envs {
			got = append(got, e.Episodes)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("scaled by %v: episodes %v, want %v", tc.f, got, tc.want)
		}
	}
	if o.Envs[0].Episodes != 288 {
		t.Errorf("Scaled changed its receiver's environments: %+v", o.Envs)
	}
}

// TestCheckWork: a work directory keeps the recipe it was started with;
// another recipe is refused, other thread counts and more DAgger rounds
// are not.
func TestCheckWork(t *testing.T) {
	dir := t.TempDir()
	o := shortBuiltin()
	if err := checkWork(dir, o); err != nil {
		t.Fatal(err)
	}
	same := o
	same.Train.Threads, same.Dagger.Rounds = 2, 5
	if err := checkWork(dir, same); err != nil {
		t.Errorf("other threads and rounds: %v", err)
	}
	for name, f := range map[string]func(*BuildOptions){
		"steps":         func(o *BuildOptions) { o.Steps++ },
		"episodes":      func(o *BuildOptions) { o.Corpus.Envs[0].Episodes++ },
		"lr":            func(o *BuildOptions) { o.Train.LR *= 2 },
		"dagger steps":  func(o *BuildOptions) { o.Dagger.Steps++ },
		"dagger games":  func(o *BuildOptions) { o.Dagger.Games = o.Dagger.Games[:1] },
		"prompt weight": func(o *BuildOptions) { o.PromptWeight = 0 },
		"cpu variant":   func(o *BuildOptions) { o.CPUVariant = "haswell" },
	} {
		other := shortBuiltin()
		f(&other)
		err := checkWork(dir, other)
		if err == nil || !strings.Contains(err.Error(), "another recipe") {
			t.Errorf("%s changed: %v", name, err)
		}
	}
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
