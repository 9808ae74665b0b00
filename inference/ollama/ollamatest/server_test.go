package ollamatest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

func post(t *testing.T, s *Server, path, body string) (int, string, []map[string]any) {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %q is not JSON: %v", path, sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), lines
}

// TestWire checks the wire shapes of the handlers in Ollama's
// server/routes.go, byte-level (no client in between).
func TestWire(t *testing.T) {
	s := New(t, Options{Models: []Model{{Name: "qwen3:4b", Thinking: true}, {Name: "gemma3"}},
		Reply: func(c Call) Reply { return Reply{Content: "Hello there", Thinking: "hmm"} }})
	tests := []struct {
		name, path, body string
		status           int
		lines            int    // objects in the body
		ctype            string // prefix of Content-Type
		want             string // in the last object, as JSON ("|" between parts)
	}{
		{"stream by default", "/api/chat", `{"model":"gemma3","messages":[{"role":"user","content":"hi"}]}`, 200, 4, "application/x-ndjson", `"done_reason":"stop"`},
		{"no stream", "/api/chat", `{"model":"gemma3:latest","messages":[{"role":"user","content":"hi"}],"stream":false}`, 200, 1, "application/json", `"content":"Hello there"`},
		{"thinking model thinks", "/api/chat", `{"model":"qwen3:4b","messages":[{"role":"user","content":"hi"}],"stream":false}`, 200, 1, "application/json", `"thinking":"hmm"`},
		{"cut by num_predict", "/api/chat", `{"model":"qwen3:4b","think":false,"messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":2}}`, 200, 1, "application/json", `"done_reason":"length"|"content":"Hello th"`},
		{"stop string", "/api/generate", `{"model":"gemma3","prompt":"hi","stream":false,"options":{"stop":[" "]}}`, 200, 1, "application/json", `"done_reason":"stop"|"response":"Hello"`},
		{"generate streams", "/api/generate", `{"model":"gemma3","prompt":"hi"}`, 200, 4, "application/x-ndjson", `"eval_count":3`},
		{"load", "/api/chat", `{"model":"gemma3","messages":[]}`, 200, 1, "application/json", `"done_reason":"load"`},
		{"unload", "/api/generate", `{"model":"gemma3","keep_alive":0}`, 200, 1, "application/json", `"done_reason":"unload"`},
		{"not pulled", "/api/chat", `{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`, 404, 1, "application/json", `{"error":"model 'llama3' not found"}`},
		{"no model", "/api/chat", `{"messages":[]}`, 400, 1, "application/json", `{"error":"model is required"}`},
		{"bad json", "/api/chat", `{"model":`, 400, 1, "application/json", `"error":"unexpected EOF"`},
		{"no body", "/api/chat", ``, 400, 1, "application/json", `{"error":"missing request body"}`},
		{"cannot think", "/api/chat", `{"model":"gemma3","think":true,"messages":[{"role":"user","content":"hi"}]}`, 400, 1, "application/json", `does not support thinking`},
		{"bad format", "/api/chat", `{"model":"gemma3","format":"yaml","messages":[{"role":"user","content":"hi"}]}`, 500, 1, "application/json", `invalid format`},
		{"bad option", "/api/chat", `{"model":"gemma3","options":{"seed":"x"},"messages":[{"role":"user","content":"hi"}]}`, 500, 1, "application/json", `option \"seed\" must be of type integer`},
		{"reply breaks schema", "/api/chat", `{"model":"gemma3","format":{"type":"object"},"messages":[{"role":"user","content":"hi"}]}`, 500, 1, "application/json", `breaks the request's format`},
		{"show", "/api/show", `{"model":"qwen3:4b"}`, 200, 1, "application/json", `"capabilities":["completion","thinking"]`},
		{"show unknown", "/api/show", `{"model":"x"}`, 404, 1, "application/json", `{"error":"model 'x' not found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ctype, lines := post(t, s, tt.path, tt.body)
			if status != tt.status || len(lines) != tt.lines || !strings.HasPrefix(ctype, tt.ctype) {
				t.Fatalf("got %d, %d objects, %s; want %d, %d, %s", status, len(lines), ctype, tt.status, tt.lines, tt.ctype)
			}
			last, _ := json.Marshal(lines[len(lines)-1])
			for _, part := range strings.Split(tt.want, "|") {
				if !strings.Contains(string(last), part) {
					t.Errorf("got %s, want it to contain %s", last, part)
				}
			}
			if tt.lines > 1 {
				for _, l := range lines[:len(lines)-1] {
					if l["done"] != false {
						t.Errorf("chunk %v before the last is done", l)
					}
				}
				for _, k := range []string{"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_duration"} {
					if _, ok := lines[len(lines)-1][k]; !ok {
						t.Errorf("final chunk lacks %s", k)
					}
				}
			}
		})
	}
}

// TestClient reads the fake through Ollama's own client.
func TestClient(t *testing.T) {
	s := New(t, Options{Models: []Model{{Name: "qwen3:4b"}},
		Fail: func(c Call) *Failure {
			if c.Messages[len(c.Messages)-1].Content == "fail" {
				return &Failure{Message: "boom", AfterTokens: 1}
			}
			return nil
		}})
	u, _ := url.Parse(s.URL)
	c := api.NewClient(u, http.DefaultClient)
	ctx := context.Background()
	v, err := c.Version(ctx)
	if err != nil || v != Version {
		t.Errorf("version: got %q, %v", v, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 1 || list.Models[0].Name != "qwen3:4b" {
		t.Errorf("tags: got %+v, %v", list, err)
	}
	var text string
	req := &api.ChatRequest{Model: "qwen3:4b", Messages: []api.Message{{Role: "user", Content: "echo me"}}, KeepAlive: &api.Duration{Duration: time.Hour}}
	err = c.Chat(ctx, req, func(r api.ChatResponse) error { text += r.Message.Content; return nil })
	if err != nil || text != "echo me" {
		t.Errorf("chat: got %q, %v", text, err)
	}
	ps, err := c.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 || time.Until(ps.Models[0].ExpiresAt) < 50*time.Minute {
		t.Errorf("ps after keep_alive 1h: got %+v, %v", ps, err)
	}
	req.Messages[0].Content = "fail"
	err = c.Chat(ctx, req, func(api.ChatResponse) error { return nil })
	if err == nil || err.Error() != "boom" {
		t.Errorf("mid-stream error: got %v, want boom", err)
	}
}

func TestCheck(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"score":{"type":"integer","minimum":0,"maximum":10},
		"why":{"type":"string","maxLength":5},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},"required":["score","why"],"additionalProperties":false}`)
	inst, err := Instance(schema)
	if err != nil || Check(schema, inst) != nil {
		t.Fatalf("instance %s: %v / %v", inst, err, Check(schema, inst))
	}
	for _, bad := range []string{`{"score":3}`, `{"score":11,"why":""}`, `{"score":1.5,"why":""}`, `{"score":1,"why":"too long"}`,
		`{"score":1,"why":"","tags":["c"]}`, `{"score":1,"why":"","x":1}`, `[]`, `not json`} {
		if Check(schema, bad) == nil {
			t.Errorf("%s: got no error", bad)
		}
	}
	if err := Check(json.RawMessage(`"json"`), "  {}\n"); err != nil {
		t.Errorf("json mode: %v", err)
	}
}
