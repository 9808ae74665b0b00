package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpAndUsageErrors: every command's -h exits 0 with its usage, and
// usage errors exit 2 without the marker in their text.
func TestHelpAndUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"model", "-h"}, 0, "omar model init"},
		{[]string{"model", "--help"}, 0, "omar model info"},
		{[]string{"model", "init", "-h"}, 0, "-preset"},
		{[]string{"bench", "-h"}, 0, "omar bench decode"},
		{[]string{"bench", "decode", "-h"}, 0, "-parallel"},
		{[]string{"play", "-h"}, 0, "-episodes"},
		{[]string{"serve", "-h"}, 0, "-secret"},
		{[]string{"model"}, 2, "want 'omar model init|default|info [flags]'"},
		{[]string{"model", "fry"}, 2, `unknown subcommand "fry"`},
		{[]string{"model", "default", "--rebuild", "--preset", "huge", "--out", "x.gguf"}, 2, `--preset "huge": want one of [tiny base deep small]`},
		{[]string{"model", "default", "--seed", "2", "--steps", "9", "--out", "x.gguf"}, 2, "--seed, --steps only with --rebuild"},
		{[]string{"model", "default", "--cpu-variant", "haswell", "--out", "x.gguf"}, 2, "--cpu-variant only with --rebuild"},
		{[]string{"model", "default", "--rebuild", "--episodes", "4", "--corpus-scale", "2", "--out", "x.gguf"}, 2, "--episodes and --corpus-scale: give one"},
		{[]string{"model", "default", "--rebuild", "--corpus-scale", "-1", "--out", "x.gguf"}, 2, "--corpus-scale -1: want a factor in (0, 1000]"},
		{[]string{"model", "default", "--rebuild", "--corpus-scale", "NaN", "--out", "x.gguf"}, 2, "--corpus-scale NaN"},
		{[]string{"model", "default", "--rebuild", "--corpus-scale", "0", "--out", "x.gguf"}, 2, "--corpus-scale 0: want a factor in (0, 1000]"},
		{[]string{"model", "default", "--rebuild", "--steps", "0", "--out", "x.gguf"}, 2, "--steps 0: want 1 or more"},
		{[]string{"model", "default", "--rebuild", "--dagger-steps", "-3", "--out", "x.gguf"}, 2, "--dagger-steps -3: want 1 or more"},
		{[]string{"bench", "encode"}, 2, "want 'omar bench decode|train|learning [flags]'"},
		{[]string{"bench", "train", "-h"}, 0, "-compare"},
		{[]string{"bench", "train", "--device", "tpu"}, 2, `--device "tpu": want cpu or cuda`},
		{[]string{"bench", "train", "--min-len", "9", "--max-len", "3"}, 2, "want 2 ≤ min ≤ max"},
		{[]string{"bench", "decode", "--parallel", "0"}, 2, "want positive integers"},
		{[]string{"bench", "learning", "-h"}, 0, "-estimator"},
		{[]string{"bench", "learning", "--env", "casino"}, 2, `env "casino": want one of`},
		{[]string{"bench", "learning", "--estimator", "ppo"}, 2, `estimator "ppo"`},
		{[]string{"bench", "learning", "--seeds", "x"}, 2, "--seeds"},
		{[]string{"play"}, 2, "no environment"},
		{[]string{"play", "--env", "casino", "--episodes", "0"}, 2, "episodes 0 < 1"},
		{[]string{"worker", "-h"}, 0, "-nats"},
		{[]string{"worker"}, 2, "a server URL"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--gpu-layers", "-3"}, 2, "want -1 (all)"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--name", "a.b"}, 1, "--name"},
		{[]string{"selfplay", "--iteratons", "3"}, 2, "flag provided but not defined: -iteratons (did you mean --iterations?)\nRun 'omar selfplay -h' for its flags."},
		{[]string{"eval", "--episodes"}, 2, "flag needs an argument: -episodes"},
		{[]string{"play", "--env", "casin", "--episodes", "1"}, 1, "did you mean casino?"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runMain(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, tc.args)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.inStderr) {
				t.Errorf("stderr %q, want it to contain %q", errb.String(), tc.inStderr)
			}
			if strings.Contains(errb.String(), ": usage") {
				t.Errorf("stderr %q ends an error in the usage marker", errb.String())
			}
			// A mistake gets its error, not every flag's help.
			if tc.code != 0 && strings.Count(errb.String(), "\n  -") > 0 {
				t.Errorf("stderr lists flags after an error:\n%s", errb.String())
			}
		})
	}
}
