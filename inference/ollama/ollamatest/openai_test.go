package ollamatest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
)

// do sends a request and returns the status, the Content-Type and the
// body's objects: one per server-sent event ("[DONE]" included) for an
// event stream, else the body.
func do(t *testing.T, s *Server, method, path, body string) (int, string, []string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ctype := resp.Header.Get("Content-Type")
	if ctype != "text/event-stream" {
		return resp.StatusCode, ctype, []string{strings.TrimSpace(string(b))}
	}
	var events []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q is not a data line", ev)
		}
		events = append(events, data)
	}
	return resp.StatusCode, ctype, events
}

// weather is a tool definition as OpenAI clients send it.
const weather = `{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`

// scripted answers "Hello there" (thinking "hmm"), echoes a message that
// starts with "echo:", follows a format, and calls get_weather when
// given tools.
func scripted(c Call) Reply {
	last := c.Messages[len(c.Messages)-1].Content
	switch {
	case c.Format != nil:
		return DefaultReply(c)
	case len(c.Tools) > 0:
		args := api.NewToolCallFunctionArguments()
		args.Set("city", "Paris")
		return Reply{ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "get_weather", Arguments: args}}}}
	case strings.HasPrefix(last, "echo:"):
		return Reply{Content: last}
	}
	return Reply{Content: "Hello there", Thinking: "hmm"}
}

// TestOpenAIWire checks /v1/chat/completions and /v1/models byte-level
// against the pinned release's middleware/openai.go and openai/openai.go.
func TestOpenAIWire(t *testing.T) {
	s := New(t, Options{Models: []Model{{Name: "gemma3", Tools: true}, {Name: "qwen3:4b", Thinking: true}, {Name: "notools"}},
		Reply: scripted,
		Fail: func(c Call) *Failure {
			if c.Messages[len(c.Messages)-1].Content == "fail" {
				return &Failure{Message: "boom", AfterTokens: 1}
			}
			return nil
		}})
	user := func(s string) string { return `"messages":[{"role":"user","content":"` + s + `"}]` }
	tests := []struct {
		name, path, body string
		status           int
		events           int    // objects in the body (events of a stream, [DONE] included)
		ctype            string // prefix of Content-Type
		want             string // in the body ("|" between parts)
	}{
		{"completion", "", `{"model":"gemma3",` + user("hi") + `}`, 200, 1, "application/json",
			`"id":"chatcmpl-|"object":"chat.completion"|"system_fingerprint":"fp_ollama"|"message":{"role":"assistant","content":"Hello there"}|"finish_reason":"stop"|"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}`},
		{"stream", "", `{"model":"gemma3","stream":true,` + user("hi") + `}`, 200, 5, "text/event-stream",
			`"object":"chat.completion.chunk"|"delta":{"role":"assistant","content":"Hell"},"finish_reason":null|"content":""},"finish_reason":"stop"|[DONE]`},
		{"stream with usage", "", `{"model":"gemma3","stream":true,"stream_options":{"include_usage":true},` + user("hi") + `}`, 200, 6, "text/event-stream",
			`"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}`},
		{"thinking as reasoning", "", `{"model":"qwen3:4b",` + user("hi") + `}`, 200, 1, "application/json", `"content":"Hello there","reasoning":"hmm"`},
		{"reasoning none", "", `{"model":"qwen3:4b","reasoning_effort":"none",` + user("hi") + `}`, 200, 1, "application/json", `"message":{"role":"assistant","content":"Hello there"}`},
		{"max_tokens", "", `{"model":"gemma3","max_tokens":2,` + user("hi") + `}`, 200, 1, "application/json", `"content":"Hello th"|"finish_reason":"length"`},
		{"stop", "", `{"model":"gemma3","stop":" ",` + user("hi") + `}`, 200, 1, "application/json", `"content":"Hello"}`},
		{"text parts", "", `{"model":"gemma3","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"echo: b"}]}]}`, 200, 1, "application/json", `"content":"echo: b"`},
		{"json_object", "", `{"model":"gemma3","response_format":{"type":"json_object"},` + user("hi") + `}`, 200, 1, "application/json", `"content":"{}"`},
		{"json_schema", "", `{"model":"gemma3","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"n":{"type":"integer","maximum":3}}}}},` + user("hi") + `}`, 200, 1, "application/json", `"content":"{\"n\":3}"`},
		{"tool call", "", `{"model":"gemma3","tools":[` + weather + `],` + user("weather?") + `}`, 200, 1, "application/json",
			`"content":"","tool_calls":[{"id":"call_|","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]|"finish_reason":"tool_calls"`},
		{"tool call streamed", "", `{"model":"gemma3","stream":true,"tools":[` + weather + `],` + user("weather?") + `}`, 200, 3, "text/event-stream",
			`"tool_calls":[{"id":"call_|"finish_reason":"tool_calls"|[DONE]`},
		{"model without tools", "", `{"model":"notools","tools":[` + weather + `],` + user("weather?") + `}`, 400, 1, "application/json",
			`{"error":{"message":"registry.ollama.ai/library/notools:latest does not support tools","type":"api_error","param":null,"code":null}}`},
		{"not pulled", "", `{"model":"llama3",` + user("hi") + `}`, 404, 1, "application/json",
			`{"error":{"message":"model 'llama3' not found","type":"api_error","param":null,"code":null}}`},
		{"no model", "", `{` + user("hi") + `}`, 400, 1, "application/json", `"message":"model is required","type":"api_error"`},
		{"cannot think", "", `{"model":"gemma3","reasoning_effort":"high",` + user("hi") + `}`, 400, 1, "application/json", `does not support thinking`},
		{"malformed json", "", `{"model":`, 400, 1, "application/json", `{"error":{"message":"unexpected EOF","type":"invalid_request_error","param":null,"code":null}}`},
		{"no body", "", ``, 400, 1, "application/json", `"message":"EOF","type":"invalid_request_error"`},
		{"no messages", "", `{"model":"gemma3","messages":[]}`, 400, 1, "application/json", `"message":"[] is too short - 'messages'","type":"invalid_request_error"`},
		{"bad content", "", `{"model":"gemma3","messages":[{"role":"user","content":3}]}`, 400, 1, "application/json", `invalid message content type: float64`},
		{"bad effort", "", `{"model":"qwen3:4b","reasoning_effort":"max",` + user("hi") + `}`, 400, 1, "application/json", `invalid reasoning value: 'max'`},
		{"failure mid-stream", "", `{"model":"gemma3","stream":true,` + user("fail") + `}`, 200, 2, "text/event-stream", `"content":"Hell"|"model":"","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`},
		{"failure", "", `{"model":"gemma3",` + user("fail") + `}`, 500, 1, "application/json", `{"error":{"message":"boom","type":"api_error"`},
		{"models", "/v1/models", "", 200, 1, "application/json", `"object":"list"|{"id":"gemma3:latest","object":"model","created":|"owned_by":"library"}`},
		{"model", "/v1/models/qwen3:4b", "", 200, 1, "application/json", `{"id":"qwen3:4b","object":"model","created":|"owned_by":"library"}`},
		{"model not pulled", "/v1/models/x", "", 404, 1, "application/json", `{"error":{"message":"model 'x' not found","type":"api_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path := http.MethodPost, "/v1/chat/completions"
			if tt.path != "" {
				method, path = http.MethodGet, tt.path
			}
			status, ctype, events := do(t, s, method, path, tt.body)
			body := strings.Join(events, "\n")
			if status != tt.status || len(events) != tt.events || !strings.HasPrefix(ctype, tt.ctype) {
				t.Fatalf("got %d, %d objects, %s; want %d, %d, %s\n%s", status, len(events), ctype, tt.status, tt.events, tt.ctype, body)
			}
			for _, part := range strings.Split(tt.want, "|") {
				if !strings.Contains(body, part) {
					t.Errorf("got %s, want it to contain %s", body, part)
				}
			}
			for i, ev := range events {
				if ev == "[DONE]" && i == len(events)-1 {
					continue
				}
				var v map[string]any
				if err := json.Unmarshal([]byte(ev), &v); err != nil {
					t.Errorf("object %d %q is not JSON: %v", i, ev, err)
				}
			}
		})
	}
}

// TestOpenAIRequests: the middleware's translation reaches the Reply
// function (options over the defaults, the format, the tools, a tool
// message named after its call), and the requests are recorded as sent.
func TestOpenAIRequests(t *testing.T) {
	var calls []Call
	s := New(t, Options{Models: []Model{{Name: "gemma3", Tools: true}}, Reply: func(c Call) Reply {
		calls = append(calls, c)
		return Reply{Content: "ok"}
	}})
	body := `{"model":"gemma3","temperature":0.5,"top_p":0.9,"seed":7,"max_tokens":5,"stop":["x","y"],"tools":[` + weather + `],
		"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"18C"}]}`
	if status, _, events := do(t, s, http.MethodPost, "/v1/chat/completions", body); status != 200 {
		t.Fatalf("got %d %v", status, events)
	}
	if status, _, _ := do(t, s, http.MethodPost, "/v1/chat/completions", `{"model":"gemma3","messages":[{"role":"user","content":"hi"}]}`); status != 200 {
		t.Fatalf("got %d", status)
	}
	if len(calls) != 2 {
		t.Fatalf("got %d calls, want 2", len(calls))
	}
	c := calls[0]
	o := c.Options
	if c.Path != "/v1/chat/completions" || c.Model != "gemma3:latest" || o.Temperature != 0.5 || o.TopP != 0.9 || o.Seed != 7 || o.NumPredict != 5 ||
		strings.Join(o.Stop, ",") != "x,y" || len(c.Tools) != 1 || c.Tools[0].Function.Name != "get_weather" {
		t.Errorf("got call %+v", c)
	}
	if len(c.Messages) != 4 || c.Messages[2].ToolCalls[0].Function.Name != "get_weather" || c.Messages[3].ToolName != "get_weather" || c.Messages[3].Content != "18C" {
		t.Errorf("got messages %+v", c.Messages)
	}
	// OpenAI's defaults, which the middleware sets: temperature and
	// top_p 1.
	if o := calls[1].Options; o.Temperature != 1 || o.TopP != 1 {
		t.Errorf("defaults: got temperature %v, top_p %v", o.Temperature, o.TopP)
	}
	reqs := s.OpenAIChatRequests()
	if len(reqs) != 2 || *reqs[0].Seed != 7 || reqs[0].Messages[2].ToolCalls[0].ID != "call_1" || reqs[1].Stream || len(s.ChatRequests()) != 0 {
		t.Errorf("recorded %+v (and %d /api/chat requests)", reqs, len(s.ChatRequests()))
	}
}

// TestToolCalls: the native chat answers a reply's calls in
// message.tool_calls, and a script calling a tool the request did not
// define fails loudly, as the real parser would not find that call.
func TestToolCalls(t *testing.T) {
	s := New(t, Options{Models: []Model{{Name: "gemma3", Tools: true}}, Reply: scripted})
	tools := `"tools":[` + weather + `]`
	status, _, lines := post(t, s, "/api/chat", `{"model":"gemma3","stream":false,`+tools+`,"messages":[{"role":"user","content":"weather?"}]}`)
	msg, _ := json.Marshal(lines[0]["message"])
	if status != 200 || !strings.Contains(string(msg), `"tool_calls":[{"function":{"arguments":{"city":"Paris"},"index":0,"name":"get_weather"},"id":"call_`) {
		t.Errorf("got %d %s", status, msg)
	}
	status, _, lines = post(t, s, "/api/chat", `{"model":"gemma3",`+tools+`,"messages":[{"role":"user","content":"weather?"}]}`)
	if status != 200 || len(lines) != 2 || lines[0]["message"].(map[string]any)["tool_calls"] == nil || lines[1]["done"] != true {
		t.Errorf("streamed: got %d %v", status, lines)
	}
	s = New(t, Options{Models: []Model{{Name: "gemma3", Tools: true}}, Reply: func(Call) Reply {
		return Reply{ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "launch"}}}}
	}})
	status, _, lines = post(t, s, "/api/chat", `{"model":"gemma3",`+tools+`,"messages":[{"role":"user","content":"go"}]}`)
	if status != 500 || !strings.Contains(lines[0]["error"].(string), `calls "launch"`) {
		t.Errorf("undefined tool: got %d %v", status, lines)
	}
}
