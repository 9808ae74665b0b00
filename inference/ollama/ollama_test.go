package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
)

// shout answers with the last message in upper case, wrapped as the
// format asks.
func shout(c ollamatest.Call) ollamatest.Reply {
	last := strings.ToUpper(c.Messages[len(c.Messages)-1].Content)
	if len(c.Format) > 0 {
		return ollamatest.Reply{Content: fmt.Sprintf(`{"vote":%q}`, last)}
	}
	return ollamatest.Reply{Content: last, Thinking: "let me think"}
}

func newTest(t *testing.T, o ollamatest.Options, opts Options) (*Backend, *ollamatest.Server) {
	t.Helper()
	if o.Models == nil {
		o.Models = []ollamatest.Model{{Name: "qwen3:4b", Thinking: true}}
	}
	if o.Reply == nil {
		o.Reply = shout
	}
	srv := ollamatest.New(t, o)
	opts.Host = srv.URL
	if opts.Model == "" {
		opts.Model = "qwen3:4b"
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, srv
}

func msgs(s string) []inference.Message {
	return []inference.Message{{Role: "system", Content: "You negotiate."}, {Role: "user", Content: s}}
}

func TestChat(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"vote":{"type":"string"}},"required":["vote"]}`)
	think := false
	b, f := newTest(t, ollamatest.Options{}, Options{Format: schema, Think: &think, KeepAlive: time.Minute})
	req := inference.Request{Key: "ep1/seat0", Messages: msgs("offer 10"), MaxTokens: 64, Stop: []string{"\n\n"},
		Sampling: inference.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, Seed: 1<<31 + 5}}
	resp, err := b.Generate(context.Background(), []inference.Request{req, {Messages: msgs("x"), MaxTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"vote":"OFFER 10"}`; resp[0].Text != want || resp[0].Stop != inference.StopEOG {
		t.Errorf("reply: got %q (%s), want %q (eog)", resp[0].Text, resp[0].Stop, want)
	}
	if resp[1].Stop != inference.StopLength {
		t.Errorf("length stop: got %s", resp[1].Stop)
	}
	if len(resp[0].Tokens) != 0 || len(resp[0].Logprobs) != 0 {
		t.Errorf("Ollama returns no token ids: got %v / %v", resp[0].Tokens, resp[0].Logprobs)
	}
	var got api.ChatRequest
	for _, r := range f.ChatRequests() {
		if r.Messages[len(r.Messages)-1].Content == "offer 10" {
			got = r
		}
	}
	wantOpts := map[string]any{"temperature": 0.7, "top_k": 40.0, "top_p": 0.9, "min_p": 0.05, "seed": 5.0,
		"num_predict": 64.0, "stop": []any{"\n\n"}}
	for k, want := range wantOpts {
		v := got.Options[k]
		if fv, ok := v.(float64); ok {
			if wf, ok := want.(float64); ok && abs(fv-wf) < 1e-6 {
				continue
			}
		}
		if !reflect.DeepEqual(v, want) {
			t.Errorf("option %s: got %#v, want %#v", k, v, want)
		}
	}
	if string(got.Format) != string(schema) {
		t.Errorf("format: got %s, want %s", got.Format, schema)
	}
	if got.Stream == nil || *got.Stream || got.Think == nil || got.Think.Value != false || got.KeepAlive == nil {
		t.Errorf("stream %v, think %v, keep_alive %v: want false, false, set", got.Stream, got.Think, got.KeepAlive)
	}
	if len(got.Messages) != 2 || got.Messages[0].Role != "system" {
		t.Errorf("messages: got %+v", got.Messages)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestFormatFor(t *testing.T) {
	b, f := newTest(t, ollamatest.Options{Reply: ollamatest.DefaultReply}, Options{Format: json.RawMessage(`"json"`), FormatFor: func(r inference.Request) json.RawMessage {
		if strings.HasPrefix(r.Key, "vote") {
			return json.RawMessage(`{"type":"string","enum":["A","B"]}`)
		}
		return nil
	}})
	if _, err := b.Generate(context.Background(), []inference.Request{{Key: "vote/1", Messages: msgs("a")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Generate(context.Background(), []inference.Request{{Key: "talk/1", Messages: msgs("b")}}); err != nil {
		t.Fatal(err)
	}
	reqs := f.ChatRequests()
	if got := string(reqs[0].Format); !strings.Contains(got, "enum") {
		t.Errorf("vote format: got %s", got)
	}
	if got := string(reqs[1].Format); got != `"json"` {
		t.Errorf("default format: got %s", got)
	}
}

func TestParallelOrder(t *testing.T) {
	b, f := newTest(t, ollamatest.Options{Latency: 20 * time.Millisecond}, Options{Parallel: 3})
	var reqs []inference.Request
	for i := range 9 {
		reqs = append(reqs, inference.Request{Key: fmt.Sprint(i), Messages: msgs(fmt.Sprintf("m%d", i))})
	}
	resp, err := b.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp {
		if want := fmt.Sprintf("M%d", i); r.Text != want {
			t.Errorf("response %d: got %q, want %q", i, r.Text, want)
		}
	}
	if m := f.MaxInFlight(); m > 3 || m < 2 {
		t.Errorf("max requests in flight: got %d, want 2..3", m)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		reqs []inference.Request
		ctx  func() context.Context
		want string
	}{
		{"unknown model", Options{Model: "nope"}, []inference.Request{{Messages: msgs("a")}}, nil, "not found"},
		{"token prompt", Options{}, []inference.Request{{Key: "k", Prompt: []int32{1, 2}}}, nil, "cannot take token ids"},
		{"cancelled", Options{}, []inference.Request{{Messages: msgs("a")}}, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newTest(t, ollamatest.Options{}, tt.opts)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			_, err := b.Generate(ctx, tt.reqs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
	b, _ := newTest(t, ollamatest.Options{}, Options{})
	b.Close()
	if _, err := b.Generate(context.Background(), []inference.Request{{Messages: msgs("a")}}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
	// Unreachable server.
	dead, _ := New(Options{Model: "m", Host: "http://127.0.0.1:1"})
	if _, err := dead.Generate(context.Background(), []inference.Request{{Messages: msgs("a")}}); err == nil {
		t.Error("unreachable server: got nil error")
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []Options{
		{},
		{Model: "m", Host: "localhost"},
		{Model: "m", Parallel: -1},
		{Model: "m", Format: json.RawMessage(`{bad`)},
	}
	for _, o := range tests {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): got nil error", o)
		}
	}
}
