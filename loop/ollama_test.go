package loop

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
	"github.com/omar-selfplay/omar/runfiles"
)

// TestRolloutOllamaAgent: a rollout seat given to "ollama:MODEL" plays
// through the Ollama server at ollama_host (ollamatest's protocol-faithful
// fake here) at the message level; its moves reach the engine.
func TestRolloutOllamaAgent(t *testing.T) {
	srv := ollamatest.New(t, ollamatest.Options{Models: []ollamatest.Model{{Name: "fake:1b"}},
		Reply: func(ollamatest.Call) ollamatest.Reply { return ollamatest.Reply{Content: "BID 40"} }})
	o := RolloutOptions{}.Defaults()
	o.Env, o.Params, o.Episodes, o.Parallel = "sealedbid", map[string]any{"rounds": 1, "bidders": 2}, 2, 1
	o.Agents = map[string]string{"seat0": "ollama:fake:1b", "*": "scripted:shading"}
	o.OllamaHost = srv.URL
	dir := t.TempDir()
	rep, err := Rollout(context.Background(), o, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.ChatRequests()
	if rep.Episodes != 2 || len(reqs) == 0 || reqs[0].Model != "fake:1b" {
		t.Fatalf("%d episodes, %d requests", rep.Episodes, len(reqs))
	}
	recs, err := engine.LoadRecords(nil, filepath.Join(dir, runfiles.EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if got := rec.Seats[0].Agent; got != "ollama:fake:1b" {
			t.Errorf("seat 0 played by %q", got)
		}
		bid := false
		for _, e := range rec.Events {
			bid = bid || e.Kind == engine.KindAction && e.Seat == 0 && strings.Contains(e.Text, "BID 40")
		}
		if !bid {
			t.Errorf("the Ollama seat's bid never reached the engine")
		}
	}
}
