package loop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/runfiles"
)

// TestRolloutOllamaAgent: a rollout seat given to "ollama:MODEL" plays
// through the Ollama server at ollama_host (a fake one here) at the
// message level; its moves reach the engine.
func TestRolloutOllamaAgent(t *testing.T) {
	var models []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		models = append(models, req.Model)
		json.NewEncoder(w).Encode(api.ChatResponse{Model: req.Model, Message: api.Message{Role: "assistant", Content: "BID 40"}, Done: true, DoneReason: "stop"})
	}))
	defer srv.Close()
	o := RolloutOptions{}.Defaults()
	o.Env, o.Params, o.Episodes, o.Parallel = "sealedbid", map[string]any{"rounds": 1, "bidders": 2}, 2, 1
	o.Agents = map[string]string{"seat0": "ollama:fake:1b", "*": "scripted:shading"}
	o.OllamaHost = srv.URL
	dir := t.TempDir()
	rep, err := Rollout(context.Background(), o, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Episodes != 2 || len(models) == 0 || models[0] != "fake:1b" {
		t.Fatalf("%d episodes, models asked %v", rep.Episodes, models)
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
