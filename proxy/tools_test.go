package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ardanlabs/jinja"

	"github.com/omar-selfplay/omar/chattemplate"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

const weatherTool = `{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`

func TestParseToolCalls(t *testing.T) {
	tests := []struct {
		name, text, content string
		calls               []FunctionCall
	}{
		{"one call", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>", "", []FunctionCall{{"f", `{"x": 1}`}}},
		{"text first", "Let me look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "Let me look.", []FunctionCall{{"f", `{}`}}},
		{"two calls", "<tool_call>{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}</tool_call>\n<tool_call>{\"name\": \"b\"}</tool_call>\n", "", []FunctionCall{{"a", `{"q": "x"}`}, {"b", `{}`}}},
		{"arguments as a string", `<tool_call>{"name": "f", "arguments": "{\"x\": 2}"}</tool_call>`, "", []FunctionCall{{"f", `{"x": 2}`}}},
		{"no call", "just text", "", nil},
		{"unclosed", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", "", nil},
		{"not JSON", "<tool_call>{\"name\": oops}</tool_call>", "", nil},
		{"no name", "<tool_call>{\"arguments\": {}}</tool_call>", "", nil},
		{"arguments not an object", "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", "", nil},
		{"text after the call", "<tool_call>{\"name\": \"f\"}</tool_call> and more", "", nil},
		{"two objects", "<tool_call>{\"name\": \"f\"} {\"name\": \"g\"}</tool_call>", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls, ok := parseToolCalls(tt.text)
			if ok != (tt.calls != nil) {
				t.Fatalf("got ok %v (calls %+v), want %v", ok, calls, tt.calls != nil)
			}
			if !ok {
				return
			}
			if content != tt.content {
				t.Errorf("got content %q, want %q", content, tt.content)
			}
			var got []FunctionCall
			for _, c := range calls {
				got = append(got, c.Function)
				if c.Type != "function" || !strings.HasPrefix(c.ID, "call_") {
					t.Errorf("got call %+v, want a function call with an id", c)
				}
			}
			if !slices.Equal(got, tt.calls) {
				t.Errorf("got calls %+v, want %+v", got, tt.calls)
			}
		})
	}
}

// FuzzParseToolCalls: no text panics the parser; what it accepts has
// named calls with JSON-object arguments, and rendering them back as the
// template does reads back to the same calls.
func FuzzParseToolCalls(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>",
		"hi\n<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": \"{}\"}</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"}}</tool_call>",
		"<tool_call><tool_call></tool_call>", "</tool_call><tool_call>", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		content, calls, ok := parseToolCalls(text)
		if !ok {
			if calls != nil || content != "" {
				t.Fatalf("refused %q but returned %q, %+v", text, content, calls)
			}
			return
		}
		if len(calls) == 0 {
			t.Fatalf("accepted %q with no calls", text)
		}
		for _, c := range calls {
			var args map[string]any
			if !toolName.MatchString(c.Function.Name) || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil {
				t.Fatalf("accepted call %+v from %q", c, text)
			}
		}
		again, calls2, ok := parseToolCalls(callsText(content, calls))
		if !ok || again != content || len(calls2) != len(calls) {
			t.Fatalf("%q: rendered back it reads %q, %+v, %v", text, again, calls2, ok)
		}
		for i := range calls {
			if calls[i].Function != calls2[i].Function {
				t.Fatalf("%q: call %d reads back %+v, want %+v", text, i, calls2[i].Function, calls[i].Function)
			}
		}
	})
}

// TestFoldIsQwen3Template: the proxy's fold of tools, calls and results,
// rendered by Qwen3's template as plain messages, is what the template
// renders from the structured fields and the tools variable.
func TestFoldIsQwen3Template(t *testing.T) {
	src, err := os.ReadFile("../chattemplate/testdata/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"messages": [
		{"role": "system", "content": "Be brief."},
		{"role": "user", "content": "Weather in Paris and Rome?"},
		{"role": "assistant", "content": null, "tool_calls": [
			{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
			{"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "18C"},
		{"role": "tool", "tool_call_id": "c2", "content": "24C"},
		{"role": "assistant", "content": "Let me check again.", "tool_calls": [
			{"id": "c3", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "c3", "content": "ok"}],
		"tools": [` + weatherTool + `]}`
	var r ChatRequest
	if e := decodeRequest(strings.NewReader(body), 1<<20, &r); e != nil {
		t.Fatal(e)
	}
	o := fuzzOptions()
	pl, e := chatPlan(&r, &o)
	if e != nil {
		t.Fatal(e)
	}
	tmpl, err := chattemplate.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	var plain []chattemplate.Message
	for _, m := range pl.messages {
		plain = append(plain, chattemplate.Message{Role: m.Role, Content: m.Content})
	}
	got, err := tmpl.Render(plain, chattemplate.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	// The structured form, as Hugging Face's apply_chat_template passes
	// it: the messages as sent, arguments as strings, the tools variable.
	var raw struct {
		Messages []map[string]any `json:"messages"`
		Tools    []any            `json:"tools"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, m := range raw.Messages {
		if m["content"] == nil {
			m["content"] = ""
		}
	}
	jt, err := jinja.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	want, err := jt.RenderValues(map[string]jinja.Value{
		"messages": jinja.FromGoValue(raw.Messages), "tools": jinja.FromGoValue(raw.Tools),
		"add_generation_prompt": jinja.FromGoValue(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	// tojson's key order and spacing are the engine's; the tool line is
	// compared as JSON, the rest byte for byte.
	gotTool, wantTool := toolLine(t, got), toolLine(t, want)
	if !jsonEqual(gotTool, wantTool) {
		t.Errorf("tool definition: got %s, want %s", gotTool, wantTool)
	}
	if g, w := strings.Replace(got, gotTool, "TOOL", 1), strings.Replace(want, wantTool, "TOOL", 1); g != w {
		t.Errorf("fold renders\n%s\nwant\n%s", g, w)
	}
}

func toolLine(t *testing.T, text string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, "<tools>\n")
	line, _, ok2 := strings.Cut(after, "\n</tools>")
	if !ok || !ok2 {
		t.Fatalf("no tools block in %q", text)
	}
	return line
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// toolServer is a proxy on the scripted backend whose replies are given
// by reply, with the prompts it saw.
type toolServer struct {
	*httptest.Server
	proxy   *Proxy
	backend *scripted.Backend
	mu      sync.Mutex
	prompts []string
}

func newToolServer(t *testing.T, reply func(msgs []inference.Message) string) *toolServer {
	t.Helper()
	ts := &toolServer{}
	b, err := scripted.New(scripted.Options{Rule: func(req inference.Request) string {
		text, _ := ts.backend.Detokenize(req.Prompt)
		ts.mu.Lock()
		ts.prompts = append(ts.prompts, text)
		ts.mu.Unlock()
		return reply(req.Messages)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts.backend = b
	o := Options{}.Defaults()
	o.Vocab, o.MaxTokens, o.Poll = 512, 256, 0
	p, err := New(b, b, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	ts.proxy = p
	ts.Server = httptest.NewServer(p)
	t.Cleanup(func() { ts.Close(); p.Close() })
	return ts
}

// weatherReply calls get_weather until a tool result came, then answers.
func weatherReply(msgs []inference.Message) string {
	last := msgs[len(msgs)-1].Content
	if strings.HasPrefix(last, "<tool_response>") {
		return "It is 18C in Paris."
	}
	if strings.Contains(last, "garbled") {
		return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>"
	}
	if strings.Contains(last, "Paris") {
		return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	}
	return "Hello."
}

func postChat(t *testing.T, url, session, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set(HeaderSession, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp, buf.Bytes()
}

// TestToolCallsRoundTrip: a call with tools gets the model's call as
// message.tool_calls; the follow-up with the call and its result extends
// the same segment, whose reply tokens are exactly the sampled ones.
func TestToolCallsRoundTrip(t *testing.T) {
	ts := newToolServer(t, weatherReply)
	first := `{"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [` + weatherTool + `]}`
	resp, body := postChat(t, ts.URL, "s1", first)
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	var cc struct {
		Choices []struct {
			Message      map[string]json.RawMessage `json:"message"`
			FinishReason string                     `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &cc); err != nil {
		t.Fatal(err)
	}
	ch := cc.Choices[0]
	if ch.FinishReason != "tool_calls" || string(ch.Message["content"]) != "null" {
		t.Fatalf("got finish %q, content %s, want tool_calls and null", ch.FinishReason, ch.Message["content"])
	}
	var calls []ToolCall
	if err := json.Unmarshal(ch.Message["tool_calls"], &calls); err != nil || len(calls) != 1 {
		t.Fatalf("tool_calls %s: %v", ch.Message["tool_calls"], err)
	}
	if c := calls[0].Function; c.Name != "get_weather" || c.Arguments != `{"city": "Paris"}` {
		t.Fatalf("got call %+v", c)
	}
	if !strings.Contains(ts.prompts[0], "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"") {
		t.Errorf("the prompt lacks the tool definitions:\n%s", ts.prompts[0])
	}
	echoed, _ := json.Marshal(calls)
	second := `{"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": ` + string(echoed) + `},
		{"role": "tool", "tool_call_id": "` + calls[0].ID + `", "content": "18C"}], "tools": [` + weatherTool + `]}`
	resp, body = postChat(t, ts.URL, "s1", second)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"finish_reason":"stop"`) || !strings.Contains(string(body), "18C in Paris") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	rec, err := ts.proxy.Session(t.Context(), "s1")
	if err != nil || len(rec.Calls) != 2 || len(rec.Segments) != 1 {
		t.Fatalf("got session %+v, want 2 calls in one segment", rec)
	}
	c0 := rec.Calls[0]
	if len(c0.ToolCalls) != 1 || c0.ToolCalls[0].Function != calls[0].Function {
		t.Errorf("recorded calls %+v, want %+v", c0.ToolCalls, calls)
	}
	sampled, _ := ts.backend.Generate(t.Context(), []inference.Request{{Prompt: c0.Prompt}})
	if !slices.Equal(c0.Tokens, sampled[0].Tokens) {
		t.Errorf("recorded reply %v, want the sampled %v", c0.Tokens, sampled[0].Tokens)
	}
	seg := rec.Segments[0]
	at := len(c0.Prompt)
	if !slices.Equal(seg.Tokens[at:at+len(c0.Tokens)], c0.Tokens) || !seg.Mask[at] || seg.Mask[at+len(c0.Tokens)] {
		t.Errorf("the segment does not hold the sampled reply at %d with its mask", at)
	}
	if !strings.Contains(ts.prompts[1], "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>") {
		t.Errorf("the follow-up prompt lacks the tool result:\n%s", ts.prompts[1])
	}
}

// TestToolCallsUnparsable: a reply that is not a well-formed call is
// content; tool_choice none reads no calls.
func TestToolCallsUnparsable(t *testing.T) {
	ts := newToolServer(t, weatherReply)
	for _, tt := range []struct{ content, choice string }{
		{"garbled Paris", `"auto"`},
		{"Weather in Paris?", `"none"`},
	} {
		body := `{"messages": [{"role": "user", "content": "` + tt.content + `"}], "tools": [` + weatherTool + `], "tool_choice": ` + tt.choice + `}`
		resp, out := postChat(t, ts.URL, "", body)
		var cc ChatCompletion
		if err := json.Unmarshal(out, &cc); err != nil || resp.StatusCode != 200 {
			t.Fatalf("got %d %s: %v", resp.StatusCode, out, err)
		}
		m := cc.Choices[0].Message
		if *cc.Choices[0].FinishReason != "stop" || m.ToolCalls != nil || m.Content == nil || !strings.Contains(*m.Content, "<tool_call>") {
			t.Errorf("%s: got %s, want the text as content", tt.content, out)
		}
	}
}

// TestToolCallsStream: a streamed reply with a call carries it whole in
// one delta with its index, then finish_reason tool_calls.
func TestToolCallsStream(t *testing.T) {
	ts := newToolServer(t, weatherReply)
	body := `{"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [` + weatherTool + `], "stream": true, "logprobs": true}`
	resp, out := postChat(t, ts.URL, "", body)
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, out)
	}
	var calls []ToolCall
	finish, logprobs := "", 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c ChatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			calls = append(calls, ch.Delta.ToolCalls...)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
			if ch.Logprobs != nil {
				logprobs += len(ch.Logprobs.Content)
			}
		}
	}
	if finish != "tool_calls" || len(calls) != 1 || calls[0].Index == nil || *calls[0].Index != 0 || calls[0].Function.Name != "get_weather" {
		t.Fatalf("got finish %q, calls %+v", finish, calls)
	}
	if logprobs == 0 {
		t.Error("no logprobs streamed")
	}
}
