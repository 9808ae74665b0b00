package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/train"
)

// TestGPUCheckScriptCPU runs scripts/gpu-check.sh in its CPU mode at its
// smallest sizes, as on a machine without a GPU, with this test binary as
// omar (a wrapper re-executes it into runMain, so no build is needed):
// the CUDA steps are skipped saying why, the CPU half runs, and the
// summary states every bar of the GPU check and the comparison's
// self-check.
func TestGPUCheckScriptCPU(t *testing.T) {
	if os.Getenv("OMAR_TEST_AS_OMAR") == "1" {
		// The wrapper's child: be omar.
		env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
		os.Exit(runMain(context.Background(), env, flag.Args()))
	}
	if testing.Short() {
		t.Skip("runs the GPU check's CPU half (about 20 s)")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "omar")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nOMAR_TEST_AS_OMAR=1 exec '" + self + "' -test.run='^TestGPUCheckScriptCPU$' -- \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bash, filepath.Join("..", "..", "scripts", "gpu-check.sh"), out)
	cmd.Env = append(os.Environ(), "GPU_CHECK_DEVICE=cpu", "GPU_CHECK_QUICK=1", "GPU_CHECK_BUDGET=240", "OMAR_BIN="+wrapper)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, log)
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	summary := read("summary.md")
	for _, want := range []string{
		"- mode: CPU only — GPU_CHECK_DEVICE=cpu",
		"- cuda-logprobs-f32: SKIPPED — needs a CUDA device",
		"- rollout-32-vs-raw: SKIPPED — needs a CUDA device",
		"- ppo-small-gpu-vs-cpu2: SKIPPED — needs a CUDA device",
		"- cpu-parity-self-check: PASS — the CPU trainer against itself",
		"- train-cpu-tiny: cpu ",
		"- train-cpu-small: cpu ",
		"- selfplay-cpu: iteration 1 ",
		"failed steps: none",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, summary)
		}
	}
	// The CPU numbers the skipped bars quote are there.
	if strings.Contains(summary, "at 1 sequence,  at") || strings.Contains(summary, "small:  ms") {
		t.Errorf("summary.md quotes an empty CPU number:\n%s", summary)
	}
	// Each step has its row and output; the CUDA ones say why they did
	// not run, the CPU ones ran.
	steps := read("steps.tsv")
	for _, row := range []string{"decode-cpu\tok", "train-cpu-tiny\tok", "train-cpu-small\tok", "selfplay-cpu\tok",
		"decode-gpu\tskipped", "train-parity-small\tskipped", "selfplay-gpu\tskipped", "nvidia-smi.before\tskipped"} {
		if !strings.Contains(steps, row) {
			t.Errorf("steps.tsv lacks %q:\n%s", row, steps)
		}
	}
	if got := read("decode-gpu.txt"); !strings.HasPrefix(got, "skipped: needs a CUDA device") {
		t.Errorf("decode-gpu.txt: got %q, want the reason it was skipped", got)
	}
	if got := read("decode-cpu.txt"); !strings.Contains(got, "backend tok/s") {
		t.Errorf("decode-cpu.txt: got %q, want bench decode's table", got)
	}
	if got := read("selfplay-cpu.metrics.jsonl"); strings.Count(got, `"seconds":`) != 2 {
		t.Errorf("selfplay-cpu.metrics.jsonl: got %q, want 2 iterations with their seconds", got)
	}
}

// TestGPUCheckScriptUsage: without an output directory the script
// refuses with its usage, and an unknown device mode is refused.
func TestGPUCheckScriptUsage(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join("..", "..", "scripts", "gpu-check.sh")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no output directory", nil, []string{"OUT="}, "usage: gpu-check.sh OUT_DIR"},
		{"unknown device", []string{t.TempDir()}, []string{"GPU_CHECK_DEVICE=tpu"}, "GPU_CHECK_DEVICE=tpu: want auto, cpu or cuda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bash, append([]string{script}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Errorf("got %v, want exit status 2", err)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("got %q, want it to contain %q", out, tc.want)
			}
		})
	}
}

// TestGPUCheckSummaryCUDA: the bars of a CUDA run, judged from outputs in
// the formats bench decode and bench train --json print (written here by
// their own formatters), through the script's summary-only mode: each bar
// passes at its threshold's good side and fails at its bad side, and a
// failed bar fails the run.
func TestGPUCheckSummaryCUDA(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name            string
		logprobs, after float64
		ratio32         float64
		gpuMS, cpuMS    float64
		want            []string
		code            int
	}{
		{"all pass", 2e-5, 4e-5, 0.95, 10, 250, []string{
			"- cuda-logprobs-f32: PASS — max |Δ| CUDA − CPU on the F32 small model: logprobs 0.00002, after one update 0.00004",
			"- rollout-32-vs-raw: PASS — backend/raw tokens/s at 32 sequences, all layers on the GPU (small model): 0.950 (want ≥ 0.9)",
			"- ppo-small-gpu-vs-cpu2: PASS — PPO step on the small shape, 8 sequences: GPU 10 ms, CPU (2 threads) 250 ms: 25× (want ≥ 20)",
			"- cpu-parity-self-check: PASS",
			"- mode: CUDA — NVIDIA H100 80GB HBM3, 81559 MiB, 580.65",
			"failed steps: none",
		}, 0},
		{"all fail", 2e-3, 1e-4, 0.85, 20, 300, []string{
			"- cuda-logprobs-f32: FAIL — max |Δ| CUDA − CPU on the F32 small model: logprobs 0.002",
			"- rollout-32-vs-raw: FAIL — backend/raw tokens/s at 32 sequences, all layers on the GPU (small model): 0.850",
			"- ppo-small-gpu-vs-cpu2: FAIL — PPO step on the small shape, 8 sequences: GPU 20 ms, CPU (2 threads) 300 ms: 15×",
		}, 1},
		{"logprobs after the update fail alone", 1e-4, 5e-3, 0.9, 10, 200, []string{
			"- cuda-logprobs-f32: FAIL", "after one update 0.005", "- rollout-32-vs-raw: PASS", "- ppo-small-gpu-vs-cpu2: PASS",
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, text string) {
				t.Helper()
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("state.env", `declare -- cuda="1"
declare -- cuda_broken="0"
declare -- why_cpu=""
declare -- cuda_skip=""
declare -- gpu_name="NVIDIA H100 80GB HBM3, 81559 MiB, 580.65"
declare -- quick="0"
declare -- budget="450"
declare -- used="300"
declare -- commit="abc1234"
`)
			write("steps.tsv", "step\tstatus\tseconds\toutput\tnote\ndecode-gpu\tok\t20\tdecode-gpu.txt\t\n")
			var dec strings.Builder
			llama.WriteDecodeHeader(&dec)
			for _, p := range []int{1, 8, 32, 128} {
				ratio := 1.0
				if p == 32 {
					ratio = tc.ratio32
				}
				// 1 s of raw decoding; the backend's time gives the ratio.
				llama.DecodeBench{Parallel: p, BackendTokens: int64(128 * p), RawTokens: int64(128 * p),
					RawTime: time.Second, BackendTime: time.Duration(float64(time.Second) / ratio)}.WriteRow(&dec)
			}
			write("decode-gpu.txt", dec.String())
			jsonOf := func(r train.StepBench) string {
				b, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				return string(b) + "\n"
			}
			write("train-parity-small.txt", jsonOf(train.StepBench{Device: "cuda", Backend: "CUDA0", Threads: 2, Sequences: 8, Tokens: 800,
				StepMSMedian: tc.gpuMS, CompareDevice: "cpu", CompareStepMSMedian: tc.cpuMS, Speedup: tc.cpuMS / tc.gpuMS,
				DiffLogprobs: f(tc.logprobs), DiffRefLogprobs: f(tc.logprobs), DiffLoss: f(1e-6), DiffGradNorm: f(1e-5),
				DiffLogprobsAfter: f(tc.after), DiffValuesAfter: f(1e-6)}))
			zero := f(0)
			write("train-cpu-tiny.txt", jsonOf(train.StepBench{Device: "cpu", CompareDevice: "cpu", StepMSMedian: 5, CompareStepMSMedian: 5, Speedup: 1,
				DiffLogprobs: zero, DiffRefLogprobs: zero, DiffLoss: zero, DiffGradNorm: zero, DiffLogprobsAfter: zero, DiffValuesAfter: zero}))
			cmd := exec.Command(bash, filepath.Join("..", "..", "scripts", "gpu-check.sh"), dir)
			cmd.Env = append(os.Environ(), "GPU_CHECK_SUMMARY_ONLY=1")
			out, err := cmd.CombinedOutput()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(summary), w) {
					t.Errorf("summary.md lacks %q:\n%s", w, summary)
				}
			}
		})
	}
}
