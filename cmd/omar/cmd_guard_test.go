package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// TestGuardConfig: the guard is on by default, a guard section merges into
// the defaults, enabled: false turns it off, and the section is strict.
func TestGuardConfig(t *testing.T) {
	def := selfplay.GuardOptions{}.Defaults()
	tests := []struct {
		name    string
		yaml    string
		want    *selfplay.GuardOptions // nil: decoding or options fail
		guarded bool
	}{
		{name: "no section", yaml: "env: sealedbid\n", want: &def, guarded: true},
		{
			name: "one threshold", yaml: "env: sealedbid\nguard: {copy_min_tokens: 16}\n", guarded: true,
			want: func() *selfplay.GuardOptions { g := def; g.CopyMinTokens = 16; return &g }(),
		},
		{
			name: "off", yaml: "env: sealedbid\nguard: {enabled: false}\n",
			want: func() *selfplay.GuardOptions { g := def; g.Enabled = false; return &g }(),
		},
		{name: "unknown key", yaml: "env: sealedbid\nguard: {copy_min: 16}\n"},
		{name: "bad threshold", yaml: "env: sealedbid\nguard: {repeat_coverage: 1.5}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			// As runRollout decodes a config.
			cfg := loop.RolloutOptions{}.Defaults()
			err := decodeYAMLFile(path, &cfg)
			var o selfplay.Options
			if err == nil {
				if err = cfg.Validate(); err == nil {
					o, err = cfg.RunnerOptions(nil)
				}
			}
			if tt.want == nil {
				if err == nil {
					t.Fatalf("got no error, want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Guard, tt.want) {
				t.Errorf("got %+v, want %+v", *cfg.Guard, *tt.want)
			}
			if got := o.Guard != nil; got != tt.guarded {
				t.Errorf("runner guard set %v, want %v", got, tt.guarded)
			}
		})
	}
	if g := (loop.Options{}.Defaults()).Rollout.Guard; g == nil || !g.Enabled {
		t.Errorf("the default selfplay run has guard %+v, want the defaults (enabled)", g)
	}
}

// TestRolloutGuard rolls out the tiny model without a grammar and with
// 8-token replies, which run into the limit: the trajectories carry turn
// flags and
// stats.json counts them; with the guard off no flags are written.
func TestRolloutGuard(t *testing.T) {
	withGame(t, sealedbid.New())
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		out := filepath.Join(dir, "traj", map[bool]string{true: "on", false: "off"}[on])
		cfg := filepath.Join(dir, "c.yaml")
		y := "env: sealedbid\nparams: {rounds: 1}\nmax_tokens: 8\ncontext: 1024\nkv_cache: f32\ngrammar: false\n"
		if !on {
			y += "guard: {enabled: false}\n"
		}
		os.WriteFile(cfg, []byte(y), 0o644)
		stdout, stderr, code := runCLI(t, "rollout", "--config", cfg, "--model", modelPath, "--episodes", "2", "--parallel", "2", "--out", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		tf, err := os.Open(filepath.Join(out, "trajectories.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		trajs, err := selfplay.ReadTrajectories(tf)
		tf.Close()
		if err != nil {
			t.Fatal(err)
		}
		var want loop.GuardCounts
		want.Add(trajs)
		b, err := os.ReadFile(filepath.Join(out, "stats.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			DegenerateRate float64           `json:"degenerate_rate"`
			Degenerate     *loop.GuardCounts `json:"degenerate"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if !on {
			for _, tr := range trajs {
				if tr.TurnFlags != nil {
					t.Errorf("guard off: turn flags %q", tr.TurnFlags)
				}
			}
			if st.Degenerate != nil || strings.Contains(stdout, "degenerate") {
				t.Errorf("guard off: stats %s, stdout %q mention the guard", b, stdout)
			}
			continue
		}
		for _, tr := range trajs {
			if len(tr.TurnFlags) != len(tr.TurnEnds) {
				t.Errorf("seat %d: %d turn flags for %d turns", tr.Seat, len(tr.TurnFlags), len(tr.TurnEnds))
			}
		}
		if want.Flagged == 0 || want.Reasons[selfplay.FlagTruncated] == 0 {
			t.Errorf("no truncated turn flagged with 8-token replies (counts %+v)", want)
		}
		if st.Degenerate == nil || !reflect.DeepEqual(*st.Degenerate, want) || st.DegenerateRate != want.Rate() {
			t.Errorf("stats.json %s; the trajectories count %+v", b, want)
		}
		if !strings.Contains(stdout, "degenerate turns") {
			t.Errorf("stdout %q does not report the degenerate turns", stdout)
		}
	}
}

// TestSelfplayGuardMetrics: an iteration's metrics count the turns the
// guard flagged in the trajectories it trained on.
func TestSelfplayGuardMetrics(t *testing.T) {
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 1)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "  max_tokens: 8\n", "  max_tokens: 8\n  grammar: false\n", 1) + "save_trajectories: true\n"
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", run); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tf, err := os.Open(filepath.Join(run, "trajectories.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	trajs, err := selfplay.ReadTrajectories(tf)
	tf.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want loop.GuardCounts
	want.Add(trajs)
	if want.Flagged == 0 {
		t.Fatalf("no turn flagged (the test needs some): %+v", want)
	}
	mb, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var m runfiles.Metrics
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if m.DegenerateTurns != want.Flagged || m.DegenerateRate != want.Rate() || !reflect.DeepEqual(m.Degenerate, want.Reasons) {
		t.Errorf("metrics: degenerate_turns %d, rate %v, %v; the trajectories count %+v", m.DegenerateTurns, m.DegenerateRate, m.Degenerate, want)
	}
}

// TestSelfplayResumeWithoutGuardSection: a run directory written before
// the guard existed (no guard section in config.yaml) resumes unguarded.
func TestSelfplayResumeWithoutGuardSection(t *testing.T) {
	dir := t.TempDir()
	cfg := testSelfplayConfig(t, dir, 1)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "  max_tokens: 8\n", "  max_tokens: 8\n  grammar: false\n", 1)
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if _, stderr, code := runCLI(t, "selfplay", "--config", cfg, "--out", run); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Drop the guard section as an older omar would have written it.
	cb, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	inGuard := false
	for _, line := range strings.Split(string(cb), "\n") {
		if strings.TrimSpace(line) == "guard:" {
			inGuard = true
			continue
		}
		if inGuard && strings.HasPrefix(line, "        ") {
			continue
		}
		inGuard = false
		kept = append(kept, line)
	}
	if len(kept) == len(strings.Split(string(cb), "\n")) {
		t.Fatalf("config.yaml has no guard section:\n%s", cb)
	}
	if err := os.WriteFile(filepath.Join(run, "config.yaml"), []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "selfplay", "--resume", run, "--iterations", "2"); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	mb, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(mb)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d metrics lines, want 2", len(lines))
	}
	var m1, m2 runfiles.Metrics
	if err := json.Unmarshal([]byte(lines[0]), &m1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &m2); err != nil {
		t.Fatal(err)
	}
	if m1.DegenerateTurns == 0 || m2.DegenerateTurns != 0 {
		t.Errorf("degenerate turns %d (guarded) then %d (resumed without a guard section), want > 0 then 0", m1.DegenerateTurns, m2.DegenerateTurns)
	}
}
