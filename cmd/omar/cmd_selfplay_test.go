package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop"

	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// testSelfplayConfig writes a small sealed-bid run config: the tiny
// llama model (generated once per test), 2 episodes per iteration.
func testSelfplayConfig(t *testing.T, dir string, iterations int) string {
	t.Helper()
	withGame(t, sealedbid.New())
	modelPath := filepath.Join(dir, "tiny.gguf")
	if _, err := os.Stat(modelPath); err != nil {
		if err := model.WriteFile(modelPath, model.Options{Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "c.yaml")
	y := "iterations: " + string(rune('0'+iterations)) + `
rollout:
  env: sealedbid
  params: {rounds: 1, bidders: 2}
  model: ` + modelPath + `
  episodes: 2
  parallel: 2
  max_tokens: 8
  context: 1024
  kv_cache: f32
  threads: 1
estimator: rae
league: {enabled: false}
eval: {every: 0}
train:
  threads: 1
  epochs: 1
  minibatch: 2
  lr: 0.01
  value_lr: 0.01
`
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stableMetrics drops the fields that measure time from metrics.jsonl,
// and logprob_gap: llama.cpp's logits differ in the last bits with the
// composition of a batch, which depends on timing (the sampled tokens do
// not).
func stableMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range bytes.SplitSeq(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "seconds")
		delete(m, "tokens_per_s")
		delete(m, "mean_batch")
		delete(m, "logprob_gap")
		s, _ := json.Marshal(m)
		out = append(out, string(s))
	}
	return out
}

// TestSelfplayResume runs 2 iterations straight, and again one iteration
// and a resume through the CLI: the metrics (time aside) and the adapter
// bytes must be identical.
func TestSelfplayResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model for 4 iterations")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 2)
	straight := filepath.Join(dir, "straight")
	stdout, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", straight)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "reward plot") {
		t.Errorf("stdout does not say where the results are: %q", stdout)
	}

	// Stopped after iteration 1 and resumed by the CLI (the interrupted
	// case is loop's TestResume).
	broken := filepath.Join(dir, "broken")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", broken, "--iterations", "1"); code != 0 {
		t.Fatalf("iteration 1: exit %d: %s", code, stderr)
	}
	_, stderr, code = runCLI(t, "selfplay", "--resume", broken, "--iterations", "2")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}

	want, got := stableMetrics(t, filepath.Join(straight, "metrics.jsonl")), stableMetrics(t, filepath.Join(broken, "metrics.jsonl"))
	if len(got) != 2 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("metrics after resume:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	a, _ := os.ReadFile(filepath.Join(straight, "adapter.gguf"))
	b, _ := os.ReadFile(filepath.Join(broken, "adapter.gguf"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("adapter bytes differ after resume (%d and %d bytes)", len(a), len(b))
	}
	for _, f := range []string{"reward.svg", "episodes.jsonl", "config.yaml"} {
		if _, err := os.Stat(filepath.Join(broken, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSelfplayCorruptCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 1)
	out := filepath.Join(dir, "run")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	ckpt := filepath.Join(out, "checkpoint", "trainer.ckpt")
	b, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	os.WriteFile(ckpt, b, 0o644)
	_, stderr, code := runCLI(t, "selfplay", "--resume", out, "--iterations", "2")
	if code == 0 || !strings.Contains(stderr, "resume") {
		t.Errorf("corrupt checkpoint: got exit %d, stderr %q; want a clear resume error", code, stderr)
	}
}

func TestSelfplayRefusesPreviousRun(t *testing.T) {
	dir := t.TempDir()
	// A run that finished an iteration (a start that failed before one
	// leaves a directory that is reused: loop's TestClearRunDir).
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("iterations: 1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(`{"iteration":1}`+"\n"), 0o644)
	_, stderr, code := runCLI(t, "selfplay", "--out", dir)
	if code != 2 || !strings.Contains(stderr, "--resume") || !strings.Contains(stderr, "--overwrite") {
		t.Errorf("exit %d, stderr %q; want a usage error naming --resume and --overwrite", code, stderr)
	}
}

// TestSelfplayEarlyStop: with max_kl_ref tiny the run stops after the
// first iteration whose policy moved (iteration 2), says so, and a resume
// does not run past it.
func TestSelfplayEarlyStop(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 4)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte("early_stop: {max_kl_ref: 0.0001}\n")...), 0o644)
	out := filepath.Join(dir, "run")
	stdout, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "stopped early after iteration 2: kl_ref") {
		t.Errorf("stdout: %q", stdout)
	}
	stdout, stderr, code = runCLI(t, "selfplay", "--resume", out)
	if code != 0 || !strings.Contains(stdout, "stopped early after iteration 2") {
		t.Errorf("resume: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := len(stableMetrics(t, filepath.Join(out, "metrics.jsonl"))); n != 2 {
		t.Errorf("metrics lines: got %d, want 2", n)
	}
}

// TestSelfplayResumeAdapterFromTrainer: SaveCheckpoint renames
// trainer.ckpt and then adapter.gguf, so a crash between the two leaves
// the new trainer state next to the previous checkpoint's adapter (or
// none, at the first checkpoint). A resume must serve the adapter of the
// trainer state it loaded: the resumed run's metrics equal a straight
// run's, and a missing adapter file does not make the run unresumable.
func TestSelfplayResumeAdapterFromTrainer(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model for 9 iterations")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 3)
	straight := filepath.Join(dir, "straight")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", straight); code != 0 {
		t.Fatalf("straight: exit %d: %s", code, stderr)
	}
	tests := []struct {
		name string
		// crash simulates the crash between the renames of the checkpoint
		// after iteration 2, given iteration 1's adapter.
		crash func(adapter string, first []byte)
	}{
		{"stale adapter", func(adapter string, first []byte) { os.WriteFile(adapter, first, 0o644) }},
		{"missing adapter", func(adapter string, first []byte) { os.Remove(adapter) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", run, "--iterations", "1"); code != 0 {
				t.Fatalf("iteration 1: exit %d: %s", code, stderr)
			}
			adapter := filepath.Join(run, "checkpoint", "adapter.gguf")
			first, err := os.ReadFile(adapter)
			if err != nil {
				t.Fatal(err)
			}
			if _, stderr, code := runCLI(t, "selfplay", "--resume", run, "--iterations", "2"); code != 0 {
				t.Fatalf("iteration 2: exit %d: %s", code, stderr)
			}
			tc.crash(adapter, first)
			if _, stderr, code := runCLI(t, "selfplay", "--resume", run, "--iterations", "3"); code != 0 {
				t.Fatalf("resume after the crash: exit %d: %s", code, stderr)
			}
			want, got := stableMetrics(t, filepath.Join(straight, "metrics.jsonl")), stableMetrics(t, filepath.Join(run, "metrics.jsonl"))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("metrics after resume:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestSelfplayResumePolicyVersions: the policy version a trajectory
// records counts the adapter swaps before its rollout. A resumed run swaps
// once to load the checkpoint's adapter, so its backend counts from 1
// again; the trajectories must still carry the versions a straight run
// gives them, or two different policies share one number in one file.
func TestSelfplayResumePolicyVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model for 6 iterations")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 3)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte("save_trajectories: true\n")...), 0o644)
	versions := func(run string) []string {
		f, err := os.Open(filepath.Join(run, "trajectories.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		trs, err := selfplay.ReadTrajectories(f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tr := range trs {
			out = append(out, fmt.Sprintf("episode %d seat %d: %v", tr.Episode, tr.Seat, tr.PolicyVersions))
		}
		return out
	}
	straight := filepath.Join(dir, "straight")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", straight); code != 0 {
		t.Fatalf("straight: exit %d: %s", code, stderr)
	}
	resumed := filepath.Join(dir, "resumed")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", resumed, "--iterations", "2"); code != 0 {
		t.Fatalf("iterations 1-2: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "selfplay", "--resume", resumed, "--iterations", "3"); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	want, got := versions(straight), versions(resumed)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("policy versions after resume:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSelfplayResumeFromAnotherDirectory: a run started with a relative
// --out generates its model into the run directory; resuming it by its
// absolute path from another working directory must find that model.
func TestSelfplayResumeFromAnotherDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model for 2 iterations")
	}
	dir := t.TempDir()
	b, err := os.ReadFile(testSelfplayConfig(t, dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "model:") {
			lines = append(lines, line)
		}
	}
	cfg := filepath.Join(dir, "generated.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.Abs(llamatest.LibDir())
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	other := filepath.Join(dir, "elsewhere")
	for _, d := range []string{work, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(work)
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", filepath.Join("runs", "x"), "--llama-lib", lib); code != 0 {
		t.Fatalf("first iteration: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "runs", "x", "model.gguf")); err != nil {
		t.Fatalf("the model was not generated into the run directory: %v", err)
	}
	t.Chdir(other)
	if _, stderr, code := runCLI(t, "selfplay", "--resume", filepath.Join(work, "runs", "x"), "--iterations", "2", "--llama-lib", lib); code != 0 {
		t.Fatalf("resume from another directory: exit %d: %s", code, stderr)
	}
}

// TestSelfplayStartsFromRolloutAdapter: with rollout.adapter (an `omar
// sft` warm-up, here a previous run's adapter) the rollouts of iteration 1
// sample from the adapted model, so the trainer must start from the same
// adapter: its log-probabilities then differ from the base model's
// (kl_ref ≠ 0 before the first update), and agree with the sampler's.
func TestSelfplayStartsFromRolloutAdapter(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model for 2 iterations")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 1)
	warm := filepath.Join(dir, "warm")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", warm); code != 0 {
		t.Fatalf("warm-up run: exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(cfg)
	y := strings.Replace(string(b), "rollout:\n", "rollout:\n  adapter: "+filepath.Join(warm, "adapter.gguf")+"\n", 1)
	cfg2 := filepath.Join(dir, "from-adapter.yaml")
	os.WriteFile(cfg2, []byte(y), 0o644)
	out := filepath.Join(dir, "run")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg2, "--out", out); code != 0 {
		t.Fatalf("run from the adapter: exit %d: %s", code, stderr)
	}
	metrics := func(run string) runfiles.Metrics {
		b, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var m runfiles.Metrics
		if err := json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	base, got := metrics(warm), metrics(out)
	if got.KLRef == 0 {
		t.Errorf("iteration 1 from the adapter: kl_ref 0: the trainer started from the base model, not the adapter the rollouts sampled from")
	}
	if got.LogprobGap > 10*base.LogprobGap+1e-3 {
		t.Errorf("iteration 1 from the adapter: logprob_gap %g (the base run's %g): the trainer scores with other weights than the sampler", got.LogprobGap, base.LogprobGap)
	}
}

// TestSelfplayConfigRecordsAbsolutePaths: config.yaml is what --resume
// reads, maybe from another directory, so relative paths are made
// absolute when it is written.
func TestSelfplayConfigRecordsAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// The model does not exist: the run fails after writing its config.
	_, _, code := runCLI(t, "selfplay", "--model", "models/policy.gguf", "--out", "run")
	if code == 0 {
		t.Fatalf("a missing model should fail the run")
	}
	b, err := os.ReadFile(filepath.Join(dir, "run", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "model: " + filepath.Join(dir, "models", "policy.gguf"); !strings.Contains(string(b), want) {
		t.Errorf("config.yaml does not record %q:\n%s", want, b)
	}
}

func TestSelfplayGroupsMustNotStraddleIterations(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("rollout:\n  episodes: 6\n  group_size: 4\n"), 0o644)
	_, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", filepath.Join(dir, "run"))
	if code == 0 || !strings.Contains(stderr, "not a multiple of rollout.group_size") {
		t.Errorf("exit %d, stderr %q; want the group-size error", code, stderr)
	}
}

// TestSelfplayCluster runs the same 2 iterations with a cluster section
// (an embedded server, two in-process workers) through the CLI: the
// adapter must be the single-process run's.
func TestSelfplayCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model twice")
	}
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 2)
	single := filepath.Join(dir, "single")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", single); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(ccfg, append(b, "cluster: {enabled: true, name: cli, workers: 2, chunk: 1}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	clustered := filepath.Join(dir, "cluster")
	_, stderr, code := runCLI(t, "selfplay", "--config", ccfg, "--out", clustered)
	if code != 0 {
		t.Fatalf("cluster: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "embedded NATS server at nats://127.0.0.1:") {
		t.Errorf("stderr does not name the server: %q", stderr)
	}
	for _, f := range []string{runfiles.AdapterFile, runfiles.EpisodesFile} {
		a, _ := os.ReadFile(filepath.Join(single, f))
		c, _ := os.ReadFile(filepath.Join(clustered, f))
		if len(a) == 0 || !bytes.Equal(a, c) {
			t.Errorf("%s differs from the single-process run's (%d and %d bytes)", f, len(a), len(c))
		}
	}
}

// TestSelfplayFlags: omar selfplay's option flags land in the fields they
// name and leave the others at their values; a bad number is an error
// naming its flag.
func TestSelfplayFlags(t *testing.T) {
	parse := func(args ...string) (loop.Options, error) {
		fs := flag.NewFlagSet("selfplay", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		of := cliflag.NewOptionFlags(fs, loop.Options{}.Defaults())
		bindSelfplay(of)
		o := loop.Options{}.Defaults()
		if err := fs.Parse(args); err != nil {
			return o, err
		}
		return o, of.Apply(&o)
	}
	o, err := parse("--eval-temperature", "0", "--lr", "0.002", "--iterations", "7")
	if err != nil {
		t.Fatal(err)
	}
	if o.Eval.Temperature == nil || *o.Eval.Temperature != 0 || o.Train.LR != 0.002 || o.Iterations != 7 {
		t.Errorf("eval temperature %v, lr %v, iterations %d", o.Eval.Temperature, o.Train.LR, o.Iterations)
	}
	if o.Rollout.Temperature != 1 {
		t.Errorf("--eval-temperature changed the rollouts' temperature to %v", o.Rollout.Temperature)
	}
	if o, _ := parse(); o.Eval.Temperature != nil {
		t.Errorf("without the flag the evaluations' temperature is %v, want the rollouts' (nil)", *o.Eval.Temperature)
	}
	if _, err := parse("--eval-temperature", "cold"); err == nil || !strings.Contains(err.Error(), "--eval-temperature") {
		t.Errorf("a bad temperature: %v", err)
	}
	o, _ = parse("--eval-temperature", "-1")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "eval.temperature") {
		t.Errorf("a negative temperature validates: %v", err)
	}
}
