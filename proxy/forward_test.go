package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

// fakeUpstream is an OpenAI-compatible endpoint (a teacher) that calls
// get_weather for a question and answers once the result came, and
// keeps the requests it got.
type fakeUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []map[string]any
	auth []string
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req map[string]any
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &req); err != nil {
			http.Error(w, `{"error": {"message": "bad json"}}`, http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, req)
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		msgs := req["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case last["role"] == "tool":
			io.WriteString(w, `{"id": "x", "object": "chat.completion", "model": "teacher", "choices": [{"index": 0, "message": {"role": "assistant", "content": "It is 18C in Paris."}, "finish_reason": "stop"}]}`)
		case strings.Contains(last["content"].(string), "refuse"):
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": {"message": "the teacher refuses", "type": "invalid_request_error"}}`)
		default:
			io.WriteString(w, `{"id": "y", "object": "chat.completion", "model": "teacher", "choices": [{"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": [{"id": "call_t1", "index": 0, "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}`)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// forwardProxy is a proxy forwarding to upstream's /v1, asking for model
// (empty: the request's), with the tiny models' tokenizer as the
// student's and no backend.
func forwardProxy(t *testing.T, upstream, model string) (*Proxy, *httptest.Server, *scripted.Backend) {
	t.Helper()
	tok, err := scripted.New(scripted.Options{Rule: func(inference.Request) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{}.Defaults()
	o.Vocab, o.Poll = 512, 0
	o.Forward, o.ForwardKey, o.ForwardModel = upstream+"/v1", "teacher-key", model
	p, err := New(nil, tok, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return p, srv, tok
}

// TestForwardedSessionTrains: a session answered by the upstream becomes
// one trajectory in the student's tokens, whose masked tokens are the
// teacher's replies closed by the template's end of turn, flagged as not
// sampled by the policy.
func TestForwardedSessionTrains(t *testing.T) {
	up := newFakeUpstream(t)
	p, srv, tok := forwardProxy(t, up.URL, "teacher")
	first := `{"model": "student", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [` + weatherTool + `]}`
	resp, body := postChat(t, srv.URL, "f1", first)
	var cc ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %d %s: %v", resp.StatusCode, body, err)
	}
	m := cc.Choices[0].Message
	if *cc.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || m.ToolCalls[0].Index != nil {
		t.Fatalf("got %s", body)
	}
	if up.reqs[0]["model"] != "teacher" || up.auth[0] != "Bearer teacher-key" || up.reqs[0]["tools"] == nil || up.reqs[0]["stream"] != nil {
		t.Fatalf("the upstream got %v (auth %q)", up.reqs[0], up.auth[0])
	}
	echoed, _ := json.Marshal(m.ToolCalls)
	second := `{"model": "student", "stream": true, "messages": [{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": ` + string(echoed) + `},
		{"role": "tool", "tool_call_id": "call_t1", "content": "18C"}], "tools": [` + weatherTool + `]}`
	resp, body = postChat(t, srv.URL, "f1", second)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"finish_reason":"stop"`) || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	trajs, err := p.Reward(t.Context(), "f1", 1)
	if err != nil || len(trajs) != 1 {
		t.Fatalf("got %d trajectories, %v: want the session's one segment", len(trajs), err)
	}
	tr := trajs[0]
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if tr.Agent != "forward:f1" || len(tr.TurnEnds) != 2 || !slices.Equal(tr.PolicyVersions, []int{-1, -1}) {
		t.Fatalf("got agent %q, turns %v, versions %v", tr.Agent, tr.TurnEnds, tr.PolicyVersions)
	}
	for k := range tr.TurnEnds {
		if !tr.Flagged(k) || tr.TurnFlags[k][0] != forwardedFlag {
			t.Errorf("turn %d flags %v, want %q", k, tr.TurnFlags, forwardedFlag)
		}
	}
	// The stream is the student's rendering: the prompt, then each reply
	// as the template lays it out, tokenised without specials, and the
	// template's end of turn, on the mask.
	eot, _, err := p.endOfTurn()
	if err != nil {
		t.Fatal(err)
	}
	call := `<tool_call>` + "\n" + `{"name": "get_weather", "arguments": {"city": "Paris"}}` + "\n" + `</tool_call>`
	for k, reply := range []string{call, "It is 18C in Paris."} {
		ids, _ := tok.Tokenize(reply, false, false)
		ids = append(ids, eot...)
		end := tr.TurnEnds[k] + 1
		if !slices.Equal(tr.Tokens[end-len(ids):end], ids) {
			t.Errorf("turn %d: got %v, want %v", k, tr.Tokens[end-len(ids):end], ids)
		}
		for i := end - len(ids); i < end; i++ {
			if !tr.Mask[i] {
				t.Errorf("turn %d: token %d is off the mask", k, i)
			}
		}
		if tr.Mask[end-len(ids)-1] {
			t.Errorf("turn %d: the prompt token before the reply is on the mask", k)
		}
	}
	text, _ := tok.Detokenize(tr.Tokens)
	want := scripted.RenderChatML([]inference.Message{
		{Role: "system", Content: "# Tools"}, {Role: "user", Content: "Weather in Paris?"}}, false)
	if !strings.Contains(text, want[strings.Index(want, "<|im_start|>user"):]) || !strings.Contains(text, "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is 18C in Paris.<|im_end|>") {
		t.Errorf("the stream reads\n%s", text)
	}
}

// TestForwardErrors: the upstream's refusal is the caller's 4xx, an
// unreachable upstream a 502, and what the forward cannot honour a 400.
func TestForwardErrors(t *testing.T) {
	up := newFakeUpstream(t)
	_, srv, _ := forwardProxy(t, up.URL, "teacher")
	resp, body := postChat(t, srv.URL, "", `{"messages": [{"role": "user", "content": "please refuse"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "the teacher refuses") {
		t.Errorf("got %d %s, want the upstream's 400", resp.StatusCode, body)
	}
	resp, body = postChat(t, srv.URL, "", `{"messages": [{"role": "user", "content": "hi"}], "logprobs": true}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"param":"logprobs"`) {
		t.Errorf("got %d %s, want a 400 on logprobs", resp.StatusCode, body)
	}
	r, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 400 {
		t.Errorf("completions: got %d, want 400", r.StatusCode)
	}
	up.Close()
	resp, body = postChat(t, srv.URL, "", `{"messages": [{"role": "user", "content": "hi"}]}`)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("got %d %s, want 502 with the upstream down", resp.StatusCode, body)
	}
}

func TestForwardOptions(t *testing.T) {
	for _, tt := range []struct {
		forward, key string
		ok           bool
	}{
		{"", "", true}, {"http://localhost:11434/v1", "", true}, {"https://h/v1", "k", true},
		{"localhost:11434", "", false}, {"ftp://h/v1", "", false}, {"", "k", false},
	} {
		o := fuzzOptions()
		o.Forward, o.ForwardKey = tt.forward, tt.key
		if err := o.Validate(); (err == nil) != tt.ok {
			t.Errorf("forward %q key %q: got %v, want ok %v", tt.forward, tt.key, err, tt.ok)
		}
	}
}
