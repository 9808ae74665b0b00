package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
