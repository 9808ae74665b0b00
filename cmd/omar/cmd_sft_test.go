package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/selfplay"
)

// writeSFTTrajectories writes n trajectories whose generated turns repeat a
// fixed token pattern, so that a few epochs of SFT must lower the loss.
func writeSFTTrajectories(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := selfplay.NewTrajectoryWriter(f)
	for i := range n {
		tr := selfplay.Trajectory{Env: "test", Episode: i, Scenario: "test/" + strconv.Itoa(i), Role: "a", Agent: "policy", Reward: float64(i % 2)}
		for turn := range 2 {
			for j := range 6 { // prompt
				tr.Tokens = append(tr.Tokens, int32(100+(i*7+j*3+turn)%50))
				tr.Mask = append(tr.Mask, false)
			}
			for j := range 5 { // reply: a fixed pattern
				tr.Tokens = append(tr.Tokens, int32(300+j*11))
				tr.Mask = append(tr.Mask, true)
			}
			tr.TurnEnds = append(tr.TurnEnds, len(tr.Tokens)-1)
			tr.TurnRewards = append(tr.TurnRewards, 0)
			tr.PolicyVersions = append(tr.PolicyVersions, 0)
		}
		tr.Logprobs = make([]float32, len(tr.Tokens))
		tr.RawLogprobs = make([]float32, len(tr.Tokens))
		for j, m := range tr.Mask {
			if m {
				tr.Logprobs[j], tr.RawLogprobs[j] = -3, -3
			}
		}
		if err := w.Write(&tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestSFTCommand(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	dir := t.TempDir()
	mpath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(mpath, model.Options{Arch: "llama", Preset: "tiny", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "traj.jsonl")
	writeSFTTrajectories(t, data, 8)
	out := filepath.Join(dir, "adapter.gguf")
	stdout, stderr, code := runCLI(t, "sft", "--model", mpath, "--data", data, "--out", out,
		"--epochs", "6", "--batch", "4", "--lr", "0.01", "--threads", "1", "--llama-lib", lib,
		"--checkpoint", filepath.Join(dir, "ckpt"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	losses := regexp.MustCompile(`mean loss ([0-9.]+)`).FindAllStringSubmatch(stdout, -1)
	if len(losses) != 6 {
		t.Fatalf("got %d epoch lines, want 6:\n%s", len(losses), stdout)
	}
	first, _ := strconv.ParseFloat(losses[0][1], 64)
	last, _ := strconv.ParseFloat(losses[5][1], 64)
	if !(last < 0.5*first) {
		t.Errorf("loss: got %.4f after 6 epochs, want below half of the first epoch's %.4f", last, first)
	}
	for _, p := range []string{out, filepath.Join(dir, "ckpt", "trainer.ckpt")} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", p, err)
		}
	}

	// --min-reward keeps only the rewarded half.
	stdout, stderr, code = runCLI(t, "sft", "--model", mpath, "--data", data, "--out", out,
		"--min-reward", "1", "--threads", "1", "--llama-lib", lib)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`trained on 4 trajectories`).MatchString(stdout) {
		t.Errorf("--min-reward 1: got %q, want 4 trajectories", stdout)
	}

	// Interrupted (cancelled context): the adapter is still written.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ob, eb bytes.Buffer
	out2 := filepath.Join(dir, "interrupted.gguf")
	code = runMain(ctx, &cliEnv{stdout: &ob, stderr: &eb}, []string{"sft", "--model", mpath, "--data", data,
		"--out", out2, "--threads", "1", "--llama-lib", lib})
	if code == 0 || !strings.Contains(eb.String(), "interrupted") {
		t.Errorf("interrupted run: got code %d, stderr %q; want a failure mentioning the interruption", code, eb.String())
	}
	if _, err := os.Stat(out2); err != nil {
		t.Errorf("interrupted run wrote no adapter: %v", err)
	}

	_, stderr, code = runCLI(t, "sft", "--model", mpath)
	if code == 0 || !regexp.MustCompile(`--data`).MatchString(stderr) {
		t.Errorf("missing --data: got code %d, stderr %q", code, stderr)
	}
}

// TestSFTFromRecords: behaviour cloning from omar play's records. Only the
// strategic seats are learnt, and two epochs lower the loss.
func TestSFTFromRecords(t *testing.T) {
	lib := llamatest.LibDir()
	dir := t.TempDir()
	mpath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(mpath, model.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	recs := filepath.Join(dir, "casino.jsonl")
	if _, stderr, code := runCLI(t, "play", "--env", "casino", "--agents", "strategic,naive", "--episodes", "4", "--out", recs); code != 0 {
		t.Fatalf("play: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "bc.gguf")
	stdout, stderr, code := runCLI(t, "sft", "--model", mpath, "--records", recs, "--learn", "strategic", "--epochs", "2", "--batch", "2",
		"--max-tokens", "256", "--context", "4096", "--lr", "0.01", "--threads", "1", "--out", out, "--llama-lib", lib)
	if code != 0 {
		t.Fatalf("sft: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "trained on 4 trajectories") {
		t.Errorf("stdout %q: want the 4 strategic seats", stdout)
	}
	losses := regexp.MustCompile(`mean loss ([0-9.]+)`).FindAllStringSubmatch(stdout, -1)
	if len(losses) != 2 {
		t.Fatalf("stdout %q: want two epoch lines", stdout)
	}
	first, _ := strconv.ParseFloat(losses[0][1], 64)
	second, _ := strconv.ParseFloat(losses[1][1], 64)
	if second >= first {
		t.Errorf("loss %v → %v: cloning did not lower it", first, second)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("no adapter: %v", err)
	}
}
