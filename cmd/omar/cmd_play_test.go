package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

func TestPlayWritesRecordsDeterministically(t *testing.T) {
	dir := t.TempDir()
	var files [][]byte
	for _, parallel := range []string{"1", "4"} {
		p := filepath.Join(dir, "ep"+parallel+".jsonl")
		stdout, stderr, code := runCLI(t, "play", "--env", "sealedbid", "--episodes", "6", "--seed", "9", "--parallel", parallel, "--out", p)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "sealedbid_v1: 6 episodes") || !strings.Contains(stdout, "mean reward") {
			t.Errorf("summary missing from output:\n%s", stdout)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatalf("records differ between --parallel 1 and 4")
	}
	lines := strings.Split(strings.TrimSpace(string(files[0])), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d records, want 6", len(lines))
	}
	var rec engine.Record
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Env != "sealedbid_v1" || rec.EnvName != "sealedbid" || rec.EnvVersion != 1 || len(rec.Seats) != 3 || rec.Seats[0].Agent != "scripted:shading" || len(rec.Events) == 0 || rec.Scenario == nil {
		t.Errorf("record incomplete: %+v", rec)
	}
}

func TestPlayAgentsBySeat(t *testing.T) {
	stdout, stderr, code := runCLI(t, "play", "--env", "sealedbid_v1", "--agents", "shading,random,random", "--episodes", "3")
	if code != 0 || !strings.Contains(stdout, "bidder (scripted:random)") || !strings.Contains(stdout, "bidder (scripted:shading)") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestPlayConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("env: sealedbid\nepisodes: 2\nparams:\n  rounds: 1\n  bidders: 2\n"), 0o644)
	stdout, stderr, code := runCLI(t, "play", "--config", good, "--episodes", "3")
	if code != 0 || !strings.Contains(stdout, "sealedbid_v1: 3 episodes") {
		t.Fatalf("flags should override the config: exit %d\n%s\n%s", code, stdout, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("env: sealedbid\nepisodes: 2\nepisdoes: 3\n"), 0o644)
	_, stderr, code = runCLI(t, "play", "--config", bad)
	if code == 0 || !strings.Contains(stderr, "line 3") || !strings.Contains(stderr, "episdoes") {
		t.Fatalf("unknown key: exit %d, stderr %q; want an error naming line 3 and the key", code, stderr)
	}
}

func TestPlayErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no env", []string{"play"}, "no environment"},
		{"unknown env", []string{"play", "--env", "chess"}, "unknown environment"},
		{"unknown policy", []string{"play", "--env", "sealedbid", "--agents", "genius"}, "no scripted policy"},
		{"agent count", []string{"play", "--env", "sealedbid", "--agents", "random,random"}, "2 agents for the 3 seats"},
		{"bad params", []string{"play", "--env", "sealedbid", "--params", "{"}, "--params"},
		{"invalid params", []string{"play", "--env", "sealedbid", "--params", `{"bidders":1}`}, "bidders"},
		{"unknown command", []string{"plya"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want failure mentioning %q", code, stderr, tc.want)
			}
		})
	}
}

func TestEnvs(t *testing.T) {
	stdout, _, code := runCLI(t, "envs", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var infos []envInfo
	if err := json.Unmarshal([]byte(stdout), &infos); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, i := range infos {
		ids[i.ID] = true
		if len(i.Seats) == 0 || len(i.Policies) == 0 || i.Description == "" {
			t.Errorf("%s: incomplete %+v", i.ID, i)
		}
	}
	if !ids["sealedbid_v1"] {
		t.Errorf("sealedbid_v1 missing from %v", ids)
	}
}
