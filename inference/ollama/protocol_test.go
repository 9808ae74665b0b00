package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
)

// The tests below run the backend against ollamatest, which follows the
// protocol of the Ollama release in go.mod.

func TestOllamaStreaming(t *testing.T) {
	long := strings.Repeat("I offer ten dollars. ", 20)
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "one object", true: "ndjson"}[stream], func(t *testing.T) {
			b, f := newTest(t, ollamatest.Options{Reply: func(ollamatest.Call) ollamatest.Reply { return ollamatest.Reply{Content: long} }},
				Options{Stream: stream})
			resp, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("a")}, {Messages: msgs("b"), MaxTokens: 5}})
			if err != nil {
				t.Fatal(err)
			}
			if resp[0].Text != long || resp[0].Stop != inference.StopEOG {
				t.Errorf("whole reply: got %q (%s)", resp[0].Text, resp[0].Stop)
			}
			// Five of the fake's tokens are twenty bytes.
			if want := long[:20]; resp[1].Text != want || resp[1].Stop != inference.StopLength {
				t.Errorf("cut reply: got %q (%s), want %q (length)", resp[1].Text, resp[1].Stop, want)
			}
			for _, r := range f.ChatRequests() {
				if r.Stream == nil || *r.Stream != stream {
					t.Errorf("request stream: got %v, want %v", r.Stream, stream)
				}
			}
		})
	}
}

// TestOllamaThink: the thinking of a thinking model never reaches the
// reply, whether it is on (the server's default) or off.
func TestOllamaThink(t *testing.T) {
	off := false
	for _, think := range []*bool{nil, &off} {
		b, f := newTest(t, ollamatest.Options{}, Options{Think: think})
		resp, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("walk")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp[0].Text != "WALK" {
			t.Errorf("think %v: got %q, want WALK", think, resp[0].Text)
		}
		if got := f.ChatRequests()[0].Think; (think == nil) != (got == nil) {
			t.Errorf("think %v: sent %v", think, got)
		}
	}
	on := true
	b, _ := newTest(t, ollamatest.Options{Models: []ollamatest.Model{{Name: "qwen3:4b"}}}, Options{Think: &on})
	if _, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("a")}}); err == nil || !strings.Contains(err.Error(), "does not support thinking") {
		t.Errorf("think on a model without thinking: got %v", err)
	}
}

func TestOllamaFormat(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"score":{"type":"integer","maximum":10}},"required":["score"]}`)
	b, f := newTest(t, ollamatest.Options{Reply: ollamatest.DefaultReply}, Options{Format: schema})
	resp, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("score it")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp[0].Text != `{"score":10}` || string(f.ChatRequests()[0].Format) != string(schema) {
		t.Errorf("got %q for format %s", resp[0].Text, f.ChatRequests()[0].Format)
	}
	// A format Ollama cannot read is the server's error, not a reply.
	b, _ = newTest(t, ollamatest.Options{}, Options{Format: json.RawMessage(`["json"]`)})
	if _, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("a")}}); err == nil || !strings.Contains(err.Error(), "invalid format") {
		t.Errorf("bad format: got %v", err)
	}
}

func TestOllamaNotPulled(t *testing.T) {
	b, _ := newTest(t, ollamatest.Options{}, Options{Model: "llama3.2:1b"})
	_, err := b.Generate(context.Background(), []inference.Request{{Key: "ep/0", Messages: msgs("a")}})
	if err == nil || !strings.Contains(err.Error(), `model "llama3.2:1b" is not pulled`) || !strings.Contains(err.Error(), "ollama pull llama3.2:1b") {
		t.Errorf("got %v, want an error naming the model and ollama pull", err)
	}
}

func TestOllamaServerErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		fail   ollamatest.Failure
		want   string
	}{
		{"500 before the reply", false, ollamatest.Failure{Message: "model runner has unexpectedly stopped"}, "unexpectedly stopped"},
		{"503 busy", true, ollamatest.Failure{Status: 503, Message: "server busy, please try again.  maximum pending requests exceeded"}, "server busy"},
		{"error line mid-stream", true, ollamatest.Failure{Message: "an error was encountered while running the model", AfterTokens: 3}, "while running the model"},
		{"hangup mid-stream", true, ollamatest.Failure{Hangup: true, AfterTokens: 3}, "ended before done"},
		{"hangup", false, ollamatest.Failure{Hangup: true}, "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newTest(t, ollamatest.Options{Fail: func(c ollamatest.Call) *ollamatest.Failure {
				if c.Messages[len(c.Messages)-1].Content == "fail" {
					return &tt.fail
				}
				return nil
			}}, Options{Stream: tt.stream})
			_, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("a long reply to stream")}, {Key: "bad", Messages: msgs("fail")}})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "request 1 (bad)") {
				t.Errorf("got %v, want request 1's error with %q", err, tt.want)
			}
		})
	}
}

// TestOllamaCancel: cancelling Generate ends the calls the server is
// working on, not only the wait for them.
func TestOllamaCancel(t *testing.T) {
	b, f := newTest(t, ollamatest.Options{Latency: time.Minute}, Options{Parallel: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Generate(ctx, []inference.Request{{Messages: msgs("a")}, {Messages: msgs("b")}, {Messages: msgs("c")}})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v after %v, want the deadline at once", err, time.Since(start))
	}
	for deadline := time.Now().Add(5 * time.Second); f.Canceled() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.Canceled(); got != 2 || f.MaxInFlight() != 2 {
		t.Errorf("server saw %d calls cancelled, %d in flight; want 2 and 2 (the third never sent)", got, f.MaxInFlight())
	}
}
