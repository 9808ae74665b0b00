package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
)

// TestRun plays a Casino episode against a scripted opponent with a fake
// chat endpoint and checks that every call named the episode, the seat
// and the seat's token, and sent its history append-only.
func TestRun(t *testing.T) {
	o := remote.ServerOptions{}.Defaults()
	o.Secret = "example-test-secret-01"
	srv, err := remote.NewServer(t.Context(), envs.Find, o)
	if err != nil {
		t.Fatal(err)
	}
	es := httptest.NewServer(srv)
	defer es.Close()

	var mu sync.Mutex
	var calls []map[string]any
	var headers []http.Header
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls, headers = append(calls, body), append(headers, r.Header.Clone())
		mu.Unlock()
		// Always walking away ends the episode at the first turn that
		// allows it; invalid moves are retried and then defaulted.
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": "walk away"}, "finish_reason": "stop"}}})
	}))
	defer fake.Close()

	var out strings.Builder
	err = run(t.Context(), options{server: es.URL, proxy: fake.URL, secret: o.Secret, env: "casino_v1", model: "omar", seed: 3,
		agents: "remote,scripted", maxTokens: 16, temperature: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "outcome: ") {
		t.Errorf("output %q has no outcome", out.String())
	}
	if len(calls) == 0 {
		t.Fatal("the agent made no model call")
	}
	for i, h := range headers {
		if h.Get("X-Omar-Episode") == "" || h.Get("X-Omar-Seat") != "0" || h.Get("X-Omar-Seat-Token") == "" {
			t.Errorf("call %d: headers %v: want the episode, seat 0 and its token", i, h)
		}
	}
	// Each call's messages start with the previous call's: the history
	// only grows, which is what lets the proxy keep one token stream.
	for i := 1; i < len(calls); i++ {
		prev, cur := calls[i-1]["messages"].([]any), calls[i]["messages"].([]any)
		if len(cur) != len(prev)+2 {
			t.Fatalf("call %d has %d messages after %d", i, len(cur), len(prev))
		}
		for k := range prev {
			a, _ := json.Marshal(prev[k])
			b, _ := json.Marshal(cur[k])
			if string(a) != string(b) {
				t.Errorf("call %d rewrote message %d: %s, was %s", i, k, b, a)
			}
		}
	}
}
