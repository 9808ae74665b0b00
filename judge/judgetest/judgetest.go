// Package judgetest fakes an Ollama server for tests of the SOTOPIA judge
// over Ollama, so that no test needs a real Ollama or model.
package judgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"
)

// Ollama answers /api/chat like an Ollama server whose model follows the
// request's format: every reply is an instance of the format's JSON
// schema, with every integer at its maximum, every string "ok" (cut to
// maxLength), every boolean true and every array at its minItems.
type Ollama struct {
	// URL is the server's base URL.
	URL string
	// Model is the only model the server knows ("judge:test"); asking for
	// another gets Ollama's not-found error.
	Model string
	// GarbageFirst makes the first reply to every distinct conversation
	// garbage (not JSON), as a model ignoring its format would write, so
	// that every judgement needs one retry.
	GarbageFirst bool

	mu   sync.Mutex
	reqs []api.ChatRequest
	seen map[string]bool
}

// NewOllama starts a fake server, closed when t ends.
func NewOllama(t testing.TB, garbageFirst bool) *Ollama {
	f := &Ollama{Model: "judge:test", GarbageFirst: garbageFirst, seen: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Requests returns the chat requests received so far.
func (f *Ollama) Requests() []api.ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.ChatRequest(nil), f.reqs...)
}

func (f *Ollama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/chat" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req api.ChatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	if req.Model != f.Model {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":"model %q not found, try pulling it first"}`, req.Model)
		return
	}
	var conv strings.Builder
	for _, m := range req.Messages {
		conv.WriteString(m.Role + "\x00" + m.Content + "\x00")
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	garbage := f.GarbageFirst && !f.seen[conv.String()]
	f.seen[conv.String()] = true
	f.mu.Unlock()

	reply := "Sure! Here are my scores: great job everyone."
	if !garbage {
		var schema map[string]any
		if err := json.Unmarshal(req.Format, &schema); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"format is not a JSON schema: %v"}`, err)
			return
		}
		b, err := json.Marshal(instance(schema))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		reply = string(b)
	}
	json.NewEncoder(w).Encode(api.ChatResponse{Model: req.Model,
		Message: api.Message{Role: "assistant", Content: reply}, Done: true, DoneReason: "stop"})
}

// instance builds a value of schema s.
func instance(s map[string]any) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[len(enum)-1]
	}
	switch s["type"] {
	case "object":
		o := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			ps, _ := p.(map[string]any)
			o[k] = instance(ps)
		}
		return o
	case "array":
		n, _ := s["minItems"].(float64)
		items, _ := s["items"].(map[string]any)
		a := make([]any, int(n))
		for i := range a {
			a[i] = instance(items)
		}
		return a
	case "string":
		str := "ok"
		if m, ok := s["maxLength"].(float64); ok && int(m) < len(str) {
			str = str[:int(m)]
		}
		return str
	case "integer", "number":
		if m, ok := s["maximum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return true
	}
	return nil
}
