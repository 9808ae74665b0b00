package players

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
)

// TestOpenOllama: an ollama: player is a client of the server at
// Backend.OllamaHost for its model, bounded by Requests (else Slots); a
// spec in both lists is one player. The server is ollamatest's, which
// follows Ollama's protocol.
func TestOpenOllama(t *testing.T) {
	server := func(t *testing.T) *ollamatest.Server {
		return ollamatest.New(t, ollamatest.Options{Models: []ollamatest.Model{{Name: "qwen3:4b", Thinking: true}}, Latency: 20 * time.Millisecond})
	}
	spec := Spec{Kind: KindOllama, Arg: "qwen3:4b"}
	for _, tt := range []struct {
		name           string
		slots, request int
		want           int
	}{
		{"slots", 3, 0, 3},
		{"requests", 8, 2, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := server(t)
			l, err := Open(context.Background(), []Spec{spec}, []Spec{spec, {Kind: KindScripted, Arg: "naive"}},
				OpenOptions{Backend: Backend{OllamaHost: srv.URL}, Slots: tt.slots, Requests: tt.request})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			p := l.Players[0]
			if p.Model == nil || p.Version != "qwen3:4b" || l.Opponents[0].Model != p.Model {
				t.Fatalf("got player %+v, opponent %+v; want one Ollama player in both lists", p, l.Opponents[0])
			}
			var reqs []inference.Request
			for i := range 8 {
				reqs = append(reqs, inference.Request{Messages: []inference.Message{{Role: "system", Content: "You bid."}, {Role: "user", Content: fmt.Sprint("round ", i)}}})
			}
			resp, err := p.Model.Backend.Generate(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			if resp[7].Text != "round 7" {
				t.Errorf("reply 7: got %q, want the echo", resp[7].Text)
			}
			if got := srv.MaxInFlight(); got != tt.want {
				t.Errorf("requests in flight: got %d, want %d", got, tt.want)
			}
		})
	}
	l, err := Open(context.Background(), []Spec{{Kind: KindOllama, Arg: "llama3"}}, nil, OpenOptions{Backend: Backend{OllamaHost: server(t).URL}, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Players[0].Model.Backend.Generate(context.Background(), []inference.Request{{Messages: []inference.Message{{Role: "user", Content: "hi"}}}})
	if err == nil || !strings.Contains(err.Error(), "ollama pull llama3") {
		t.Errorf("model not pulled: got %v, want an error saying ollama pull llama3", err)
	}
}
