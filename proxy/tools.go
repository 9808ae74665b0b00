package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/omar-selfplay/omar/inference"
)

// Tool calls follow OpenAI's Chat Completions schema on the wire. In the
// prompt they take the Hermes form that Qwen2.5's and Qwen3's chat
// templates render: the tool definitions in the system turn, each call as
// <tool_call>{"name": …, "arguments": …}</tool_call> in the assistant's
// turn, tool results as <tool_response> blocks of a user turn. The
// inference seam carries a message's role and text only, so the proxy
// folds tools into messages of that form itself and the model's own chat
// template renders them; for Qwen3's template the text is byte for byte
// what the template renders from the structured fields.

// maxTools is OpenAI's bound on a request's tool definitions.
const maxTools = 128

// toolName is OpenAI's rule for function names.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Tool is one tool definition of a chat request.
type Tool struct {
	Type     string       `json:"type"` // "function"
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function the model may call. Parameters is a
// JSON Schema object, kept as the client wrote it.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is one call of a function: in an assistant message of a
// request, in a reply's message, or (with Index) in a streamed delta.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is a call's function and its arguments, a JSON object as
// text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool choices the proxy honours. "required" and a named function would
// need a grammar forcing the call, which the proxy does not build.
const (
	toolsAuto = "auto"
	toolsNone = "none"
)

// toolPlan validates a chat request's tools and tool_choice; it returns
// the tools' block of the system turn ("" without tools) and whether
// replies are parsed for calls.
func toolPlan(tools []Tool, choice json.RawMessage) (block string, parse bool, e *APIError) {
	mode := toolsAuto
	if !emptyJSON(choice) {
		var s string
		if err := json.Unmarshal(choice, &s); err != nil || (s != toolsAuto && s != toolsNone) {
			return "", false, badRequest("tool_choice", "tool_choice %s is not supported: want \"auto\" or \"none\" (forcing a call would need a grammar the proxy does not build)", choice)
		}
		mode = s
	}
	if len(tools) == 0 {
		return "", false, nil
	}
	if len(tools) > maxTools {
		return "", false, badRequest("tools", "tools: %d definitions, at most %d", len(tools), maxTools)
	}
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return "", false, badRequest(param+".type", "%s: type %q: only \"function\" tools are supported", param, t.Type)
		}
		if !toolName.MatchString(t.Function.Name) {
			return "", false, badRequest(param+".function.name", "%s: function name %q: want 1 to 64 letters, digits, _ or -", param, t.Function.Name)
		}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && p[0] != '{' && !bytes.Equal(p, []byte("null")) {
			return "", false, badRequest(param+".function.parameters", "%s: parameters must be a JSON Schema object", param)
		}
		raw, err := json.Marshal(t)
		if err != nil {
			return "", false, badRequest(param, "%s: %v", param, err)
		}
		b.WriteString("\n")
		b.WriteString(pythonJSON(raw))
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String(), mode == toolsAuto, nil
}

// pythonJSON re-writes compact JSON with the separators of Python's
// json.dumps (", " and ": "), which the templates' tojson uses and the
// models saw in training; key order and string contents stay as they are.
func pythonJSON(raw []byte) string {
	var b strings.Builder
	inString, escaped := false, false
	for _, c := range raw {
		b.WriteByte(c)
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// checkToolCalls validates the calls of an assistant message.
func checkToolCalls(param string, calls []ToolCall) *APIError {
	for j, c := range calls {
		p := fmt.Sprintf("%s.tool_calls[%d]", param, j)
		if c.Type != "" && c.Type != "function" {
			return badRequest(p+".type", "%s: type %q: want \"function\"", p, c.Type)
		}
		if c.Function.Name == "" {
			return badRequest(p+".function.name", "%s: missing function name", p)
		}
		if !json.Valid([]byte(c.Function.Arguments)) {
			return badRequest(p+".function.arguments", "%s: arguments are not JSON", p)
		}
	}
	return nil
}

// callsText renders an assistant turn's content and calls as Qwen3's
// template does: the calls follow the content, each on its own lines.
func callsText(content string, calls []ToolCall) string {
	var b strings.Builder
	b.WriteString(content)
	for i, c := range calls {
		if i > 0 || content != "" {
			b.WriteString("\n")
		}
		b.WriteString("<tool_call>\n{\"name\": \"")
		b.WriteString(c.Function.Name)
		b.WriteString("\", \"arguments\": ")
		b.WriteString(c.Function.Arguments)
		b.WriteString("}\n</tool_call>")
	}
	return b.String()
}

// foldTools adds the tools' block to the system turn (a first system
// message, else a new one), as Qwen3's template places it.
func foldTools(msgs []inference.Message, block string) []inference.Message {
	if block == "" {
		return msgs
	}
	if len(msgs) > 0 && msgs[0].Role == "system" {
		msgs[0].Content += "\n\n" + block
		return msgs
	}
	return append([]inference.Message{{Role: "system", Content: block}}, msgs...)
}

// appendToolResult adds a tool message's content to msgs: consecutive tool
// results share one user turn of <tool_response> blocks. open reports
// whether the last message is such a turn.
func appendToolResult(msgs []inference.Message, open bool, content string) []inference.Message {
	block := "<tool_response>\n" + content + "\n</tool_response>"
	if open {
		msgs[len(msgs)-1].Content += "\n" + block
		return msgs
	}
	return append(msgs, inference.Message{Role: "user", Content: block})
}

// Tool call markers of the Hermes form.
const (
	callOpen  = "<tool_call>"
	callClose = "</tool_call>"
)

// parseToolCalls reads the calls of a reply in the Hermes form: text, then
// one or more <tool_call>{"name": …, "arguments": {…}}</tool_call> blocks
// separated by white space only. content is the text before the first
// block without its trailing white space; each call's arguments are the
// exact JSON text the model wrote. A reply that is not of that form (no
// block, an unclosed one, a body that is not such an object, text after a
// block) has no calls: the caller returns it as content.
func parseToolCalls(text string) (content string, calls []ToolCall, ok bool) {
	first := strings.Index(text, callOpen)
	if first < 0 {
		return "", nil, false
	}
	content = strings.TrimRight(text[:first], " \t\r\n")
	rest := text[first:]
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		body, ok := strings.CutPrefix(rest, callOpen)
		if !ok {
			return "", nil, false
		}
		end := strings.Index(body, callClose)
		if end < 0 {
			return "", nil, false
		}
		c, ok := parseCall(body[:end])
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
		rest = body[end+len(callClose):]
	}
	return content, calls, true
}

// parseCall reads one call's JSON object.
func parseCall(body string) (ToolCall, bool) {
	var obj struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&obj); err != nil || strings.TrimSpace(body[dec.InputOffset():]) != "" ||
		obj.Name == nil || !toolName.MatchString(*obj.Name) {
		return ToolCall{}, false
	}
	args := bytes.TrimSpace(obj.Arguments)
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
		args = []byte("{}")
	case args[0] == '"':
		// Some models write the arguments as a JSON string holding the
		// object, as OpenAI's wire form does.
		var s string
		if json.Unmarshal(args, &s) != nil || !strings.HasPrefix(strings.TrimSpace(s), "{") || !json.Valid([]byte(s)) {
			return ToolCall{}, false
		}
		args = []byte(s)
	case args[0] != '{':
		return ToolCall{}, false
	}
	return ToolCall{ID: "call_" + newID(), Type: "function", Function: FunctionCall{Name: *obj.Name, Arguments: string(args)}}, true
}
