package proxy

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
	"github.com/omar-selfplay/omar/inference/scripted"
)

// The forwarding proxy against ollamatest's OpenAI-compatible endpoint,
// which is the pinned Ollama release's own translation around a fake
// chat handler: the upstream of `--policy-forward http://host:11434/v1`.

// teacherReply is the fake Ollama's model: it reports a tool result,
// calls get_weather for a weather question when it has tools, and
// otherwise says what it heard.
func teacherReply(c ollamatest.Call) ollamatest.Reply {
	last := c.Messages[len(c.Messages)-1]
	switch {
	case last.Role == "tool":
		return ollamatest.Reply{Content: "It is " + last.Content + " in Paris."}
	case len(c.Tools) > 0 && strings.Contains(last.Content, "Weather"):
		args := api.NewToolCallFunctionArguments()
		args.Set("city", "Paris")
		return ollamatest.Reply{ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "get_weather", Arguments: args}}}}
	}
	return ollamatest.Reply{Content: "You said: " + last.Content}
}

// ollamaTeacher is a fake Ollama with the teacher (tools capable) and a
// plain model, and the replies its Reply function wrote, in order.
type ollamaTeacher struct {
	*ollamatest.Server
	mu      sync.Mutex
	replies []ollamatest.Reply
}

func newOllamaTeacher(t *testing.T) *ollamaTeacher {
	o := &ollamaTeacher{}
	o.Server = ollamatest.New(t, ollamatest.Options{
		Models: []ollamatest.Model{{Name: "teacher", Tools: true}, {Name: "plain"}},
		Reply: func(c ollamatest.Call) ollamatest.Reply {
			r := teacherReply(c)
			o.mu.Lock()
			o.replies = append(o.replies, r)
			o.mu.Unlock()
			return r
		},
		Fail: func(c ollamatest.Call) *ollamatest.Failure {
			if c.Messages[len(c.Messages)-1].Content == "crash" {
				return &ollamatest.Failure{Message: "model runner has unexpectedly stopped"}
			}
			return nil
		},
	})
	return o
}

// streamedAnswer reads the proxy's SSE answer: its content, calls and
// finish reason.
func streamedAnswer(t *testing.T, body []byte) (string, []ToolCall, string) {
	t.Helper()
	var content strings.Builder
	var calls []ToolCall
	finish := ""
	for _, ev := range sseEvents(t, body) {
		var c ChatChunk
		if err := json.Unmarshal(ev, &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta != nil {
				if ch.Delta.Content != nil {
					content.WriteString(*ch.Delta.Content)
				}
				calls = append(calls, ch.Delta.ToolCalls...)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return content.String(), calls, finish
}

// TestForwardToOllama: a three-turn session (plain, streamed, a tool
// call and its result) forwarded to Ollama's /v1: the fake gets each
// request unstreamed with the teacher's model, the client gets what the
// fake answered, and the session becomes one trajectory whose masked
// turns are those answers in the student's tokens.
func TestForwardToOllama(t *testing.T) {
	up := newOllamaTeacher(t)
	p, srv, tok := forwardProxy(t, up.URL, "teacher")
	tools := `"tools": [` + weatherTool + `]`
	turn1 := `{"role": "user", "content": "Hello"}`
	resp, body := postChat(t, srv.URL, "o1", `{"model": "student", `+tools+`, "messages": [`+turn1+`]}`)
	var cc ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("turn 1: got %d %s: %v", resp.StatusCode, body, err)
	}
	if got := cc.Choices[0].Message.Content; got == nil || *got != "You said: Hello" || *cc.Choices[0].FinishReason != "stop" {
		t.Fatalf("turn 1: got %s", body)
	}
	turn2 := turn1 + `, {"role": "assistant", "content": "You said: Hello"}, {"role": "user", "content": "Weather in Paris?"}`
	resp, body = postChat(t, srv.URL, "o1", `{"model": "student", "stream": true, `+tools+`, "messages": [`+turn2+`]}`)
	content, calls, finish := streamedAnswer(t, body)
	if resp.StatusCode != 200 || content != "" || finish != "tool_calls" || len(calls) != 1 || !strings.HasPrefix(calls[0].ID, "call_") ||
		calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("turn 2: got %d, content %q, calls %+v, finish %q", resp.StatusCode, content, calls, finish)
	}
	for i := range calls {
		calls[i].Index = nil
	}
	echoed, _ := json.Marshal(calls)
	turn3 := turn2 + `, {"role": "assistant", "content": null, "tool_calls": ` + string(echoed) + `}, {"role": "tool", "tool_call_id": "` + calls[0].ID + `", "content": "18C"}`
	resp, body = postChat(t, srv.URL, "o1", `{"model": "student", `+tools+`, "messages": [`+turn3+`]}`)
	cc = ChatCompletion{}
	if err := json.Unmarshal(body, &cc); err != nil || resp.StatusCode != 200 || *cc.Choices[0].Message.Content != "It is 18C in Paris." {
		t.Fatalf("turn 3: got %d %s: %v", resp.StatusCode, body, err)
	}
	checkOllamaRequests(t, up, calls[0].ID)
	replies := []string{"You said: Hello", `<tool_call>` + "\n" + `{"name": "get_weather", "arguments": {"city":"Paris"}}` + "\n" + `</tool_call>`, "It is 18C in Paris."}
	checkForwardedSession(t, p, tok, "o1", replies, calls)
}

// checkOllamaRequests: the fake got three chat requests, unstreamed, for
// the teacher, with the tools and the conversation so far (the tool
// message answering the call the fake made), and wrote the three replies.
func checkOllamaRequests(t *testing.T, up *ollamaTeacher, callID string) {
	t.Helper()
	reqs := up.OpenAIChatRequests()
	if len(reqs) != 3 || len(up.replies) != 3 {
		t.Fatalf("the fake got %d requests and wrote %d replies, want 3", len(reqs), len(up.replies))
	}
	for i, r := range reqs {
		if r.Model != "teacher" || r.Stream || len(r.Tools) != 1 || r.Tools[0].Function.Name != "get_weather" || len(r.Messages) != 2*i+1 {
			t.Errorf("request %d: got model %q, stream %v, %d tools, %d messages", i, r.Model, r.Stream, len(r.Tools), len(r.Messages))
		}
	}
	m := reqs[2].Messages
	if m[1].Content != "You said: Hello" || m[3].ToolCalls[0].ID != callID || m[3].ToolCalls[0].Function.Arguments != `{"city":"Paris"}` ||
		m[4].Role != "tool" || m[4].ToolCallID != callID || m[4].Content != "18C" {
		t.Errorf("request 3: got messages %+v", m)
	}
	if up.replies[0].Content != "You said: Hello" || len(up.replies[1].ToolCalls) != 1 || up.replies[2].Content != "It is 18C in Paris." {
		t.Errorf("the fake wrote %+v", up.replies)
	}
}

// checkForwardedSession: the session recorded the fake's answers (calls
// included) re-tokenised with the student's tokenizer and closed by its
// end of turn, and its one segment becomes a valid trajectory whose
// masked spans are exactly those tokens, every turn flagged forwarded.
func checkForwardedSession(t *testing.T, p *Proxy, tok *scripted.Backend, key string, replies []string, calls []ToolCall) {
	t.Helper()
	eot, _, err := p.endOfTurn()
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]int32, len(replies))
	for k, r := range replies {
		ids, err := tok.Tokenize(r, false, false)
		if err != nil {
			t.Fatal(err)
		}
		want[k] = append(ids, eot...)
	}
	rec, err := p.Session(t.Context(), key)
	if err != nil || len(rec.Calls) != len(replies) {
		t.Fatalf("session: got %d calls, %v", len(rec.Calls), err)
	}
	for k, c := range rec.Calls {
		if !c.Forwarded || c.Stop != inference.StopEOG || !slices.Equal(c.Tokens, want[k]) {
			t.Errorf("call %d: forwarded %v, stop %v, tokens %v; want %v", k, c.Forwarded, c.Stop, c.Tokens, want[k])
		}
	}
	if got := rec.Calls[1].ToolCalls; len(got) != 1 || got[0].ID != calls[0].ID || got[0].Function != calls[0].Function {
		t.Errorf("recorded calls %+v, want %+v", got, calls)
	}
	trajs, err := p.Reward(t.Context(), key, 1)
	if err != nil || len(trajs) != 1 {
		t.Fatalf("got %d trajectories, %v: want the session's one segment", len(trajs), err)
	}
	tr := trajs[0]
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(tr.TurnEnds) != len(replies) || tr.Agent != "forward:"+key {
		t.Fatalf("got agent %q, turns %v", tr.Agent, tr.TurnEnds)
	}
	masked := 0
	for k, end := range tr.TurnEnds {
		start := end + 1 - len(want[k])
		if !tr.Flagged(k) || tr.TurnFlags[k][0] != forwardedFlag || !slices.Equal(tr.Tokens[start:end+1], want[k]) || tr.Mask[start-1] {
			t.Errorf("turn %d: flags %v, tokens %v, want %v after an unmasked prompt", k, tr.TurnFlags[k], tr.Tokens[start:end+1], want[k])
		}
		masked += len(want[k])
	}
	if n := count(tr.Mask); n != masked {
		t.Errorf("%d tokens on the mask, want the %d of the replies", n, masked)
	}
	text, _ := tok.Detokenize(tr.Tokens)
	for _, r := range replies {
		if !strings.Contains(text, "<|im_start|>assistant\n"+r+"<|im_end|>") {
			t.Errorf("the stream lacks the reply %q:\n%s", r, text)
		}
	}
}

func count(mask []bool) int {
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	return n
}

// TestForwardToOllamaCut: a reply Ollama cuts at max_tokens comes back
// with finish_reason length and is recorded without an end of turn.
func TestForwardToOllamaCut(t *testing.T) {
	up := newOllamaTeacher(t)
	p, srv, tok := forwardProxy(t, up.URL, "teacher")
	resp, body := postChat(t, srv.URL, "c1", `{"model": "student", "max_tokens": 3, "messages": [{"role": "user", "content": "Hello"}]}`)
	var cc ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil || resp.StatusCode != 200 || *cc.Choices[0].Message.Content != "You said: He" || *cc.Choices[0].FinishReason != "length" {
		t.Fatalf("got %d %s: %v", resp.StatusCode, body, err)
	}
	if r := up.OpenAIChatRequests(); len(r) != 1 || r[0].MaxTokens == nil || *r[0].MaxTokens != 3 {
		t.Fatalf("the fake got %+v", r)
	}
	rec, err := p.Session(t.Context(), "c1")
	want, _ := tok.Tokenize("You said: He", false, false)
	if err != nil || len(rec.Calls) != 1 || rec.Calls[0].Stop != inference.StopLength || !slices.Equal(rec.Calls[0].Tokens, want) {
		t.Fatalf("got %+v, %v; want the cut reply's tokens %v", rec.Calls, err, want)
	}
}

// TestForwardToOllamaErrors: Ollama's refusals keep their status (a model
// that is not pulled is a 404 with Ollama's message, tools for a model
// without the capability a 400), its runner failure is a 502, streamed
// or not, and no refused call is recorded.
func TestForwardToOllamaErrors(t *testing.T) {
	up := newOllamaTeacher(t)
	p, srv, _ := forwardProxy(t, up.URL, "")
	user := func(s string) string { return `"messages": [{"role": "user", "content": "` + s + `"}]` }
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"not pulled", `{"model": "llama3", ` + user("hi") + `}`, 404, `forward: the upstream answered 404: model 'llama3' not found`},
		{"not pulled, streamed", `{"model": "llama3", "stream": true, ` + user("hi") + `}`, 404, `model 'llama3' not found`},
		{"no tools capability", `{"model": "plain", "tools": [` + weatherTool + `], ` + user("Weather?") + `}`, 400,
			`forward: the upstream answered 400: registry.ollama.ai/library/plain:latest does not support tools`},
		{"runner failure", `{"model": "teacher", ` + user("crash") + `}`, 502, `forward: the upstream answered 500: model runner has unexpectedly stopped`},
		{"runner failure, streamed", `{"model": "teacher", "stream": true, ` + user("crash") + `}`, 502, `unexpectedly stopped`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := postChat(t, srv.URL, "e1", tt.body)
			var eb struct{ Error APIError }
			if err := json.Unmarshal(body, &eb); err != nil || resp.StatusCode != tt.status || eb.Error.Code != "upstream" || !strings.Contains(eb.Error.Message, tt.want) {
				t.Errorf("got %d %s, want %d with %q", resp.StatusCode, body, tt.status, tt.want)
			}
		})
	}
	if rec, err := p.Session(t.Context(), "e1"); err == nil && len(rec.Calls) != 0 {
		t.Errorf("refused calls recorded: %+v", rec.Calls)
	}
	// The same proxy forwards the request's model when it is pulled.
	resp, body := postChat(t, srv.URL, "", `{"model": "teacher", `+user("hi")+`}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "You said: hi") {
		t.Errorf("got %d %s", resp.StatusCode, body)
	}
}
