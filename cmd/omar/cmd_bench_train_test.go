package main

import (
	"encoding/json"
	"testing"

	"github.com/omar-selfplay/omar/train"
)

// TestBenchTrainCompareCPU: the CPU trainer compared with itself from the
// same seed and sequences differs in nothing (ggml's CPU results do not
// depend on the run), so the comparison reads the right fields of both
// sides; and the step is timed.
func TestBenchTrainCompareCPU(t *testing.T) {
	stdout, stderr, code := runCLI(t, "bench", "train", "--compare", "cpu", "--seqs", "2", "--steps", "1",
		"--min-len", "8", "--max-len", "24", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r train.StepBench
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if r.Device != "cpu" || r.CompareDevice != "cpu" || r.Sequences != 2 || r.Tokens < 16 || r.Trained < 2 {
		t.Errorf("got %+v, want 2 sequences on cpu compared with cpu", r)
	}
	if r.StepMSMedian <= 0 || r.CompareStepMSMedian <= 0 || r.TokensPerS <= 0 {
		t.Errorf("got step %g ms, compared %g ms, %g tokens/s; want them > 0", r.StepMSMedian, r.CompareStepMSMedian, r.TokensPerS)
	}
	for name, d := range map[string]*float64{
		"logprobs": r.DiffLogprobs, "ref logprobs": r.DiffRefLogprobs, "loss": r.DiffLoss,
		"grad norm": r.DiffGradNorm, "logprobs after": r.DiffLogprobsAfter, "values after": r.DiffValuesAfter,
	} {
		if d == nil || *d != 0 {
			t.Errorf("%s: got difference %v, want 0", name, d)
		}
	}
}
