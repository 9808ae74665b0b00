package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The request and response types below are the subset of OpenAI's chat
// completions and legacy completions APIs that the proxy implements, in
// the shape the openai-python, openai-node and LangChain clients send and
// read. Optional numbers are pointers so that "absent" and "0" differ.

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                Stop            `json:"stop,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	Logprobs            *bool           `json:"logprobs,omitempty"`
	TopLogprobs         *int            `json:"top_logprobs,omitempty"`
	User                string          `json:"user,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	// Grammar is llama.cpp's server extension: a GBNF grammar (root rule
	// "root") the reply must match.
	Grammar string `json:"grammar,omitempty"`
	// ChatTemplateKwargs are extra chat template variables (the vLLM and
	// llama.cpp server extension); only enable_thinking (a boolean, Qwen3:
	// false renders the no-reasoning form) is taken.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs,omitempty"`
	// Tools and ToolChoice shadow neutral's: chat calls take them.
	Tools      []Tool          `json:"tools,omitempty"`
	ToolChoice json.RawMessage `json:"tool_choice,omitempty"`
	neutral
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model         string         `json:"model"`
	Prompt        Prompt         `json:"prompt"`
	MaxTokens     *int           `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	Seed          *int64         `json:"seed,omitempty"`
	Stop          Stop           `json:"stop,omitempty"`
	N             *int           `json:"n,omitempty"`
	BestOf        *int           `json:"best_of,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	// Logprobs is the number of most likely tokens to list at every
	// position (0: only the sampled token's logprob).
	Logprobs *int    `json:"logprobs,omitempty"`
	Echo     *bool   `json:"echo,omitempty"`
	Suffix   *string `json:"suffix,omitempty"`
	User     string  `json:"user,omitempty"`
	Grammar  string  `json:"grammar,omitempty"`
	neutral
}

// neutral holds fields clients send with their neutral values (LangChain
// sends penalties of 0, openai-python echoes tool fields as null). The
// proxy accepts them at those values and refuses any other: honouring a
// penalty or a tool would need sampling it does not do.
type neutral struct {
	FrequencyPenalty  *float64           `json:"frequency_penalty,omitempty"`
	PresencePenalty   *float64           `json:"presence_penalty,omitempty"`
	LogitBias         map[string]float64 `json:"logit_bias,omitempty"`
	Tools             json.RawMessage    `json:"tools,omitempty"`
	ToolChoice        json.RawMessage    `json:"tool_choice,omitempty"`
	Functions         json.RawMessage    `json:"functions,omitempty"`
	FunctionCall      json.RawMessage    `json:"function_call,omitempty"`
	ParallelToolCalls *bool              `json:"parallel_tool_calls,omitempty"`
	// Store, Metadata and ServiceTier do not change a reply.
	Store       *bool             `json:"store,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	ServiceTier *string           `json:"service_tier,omitempty"`
}

// StreamOptions are the options of a streamed reply.
type StreamOptions struct {
	// IncludeUsage adds a last chunk with the token counts and no choices.
	IncludeUsage bool `json:"include_usage"`
}

// ResponseFormat is a chat request's response_format.
type ResponseFormat struct {
	Type       string          `json:"type"` // "text", "json_object" or "json_schema"
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
}

// ChatMessage is one message of a chat request. Content is a string, a
// list of text parts, or null (an assistant message that only called
// tools).
type ChatMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
	Name    string  `json:"name,omitempty"`
	// ToolCalls are an assistant message's calls; ToolCallID is the call
	// a tool message answers.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Fields that openai-python puts on an assistant message it echoes
	// back; accepted when empty.
	Refusal      *string         `json:"refusal,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	Audio        json.RawMessage `json:"audio,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Content is a message's text: JSON "text", [{"type":"text","text":…}…]
// (the parts are joined) or null.
type Content struct {
	Text string
	Null bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = Content{Null: true}
		return nil
	case len(b) > 0 && b[0] == '"':
		*c = Content{}
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		var sb strings.Builder
		for i, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return fmt.Errorf("content part %d has type %q: only text parts are supported", i, p.Type)
			}
			sb.WriteString(*p.Text)
		}
		*c = Content{Text: sb.String()}
		return nil
	}
	return errors.New("content: want a string, a list of text parts or null")
}

// MarshalJSON implements json.Marshaler (a string, or null).
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Null {
		return []byte("null"), nil
	}
	return json.Marshal(c.Text)
}

// Stop is "text", ["a", "b"] or null.
type Stop []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *Stop) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop: want a string or a list of strings")
	}
	*s = many
	return nil
}

// Prompt is a completions prompt: "text", ["text"], [ids…] or [[ids…]].
// Lists of several prompts ask for several completions, which the proxy
// refuses (as it refuses n > 1).
type Prompt struct {
	Text   string
	Tokens []int32
	// IsTokens reports that the prompt was token ids.
	IsTokens bool
	// Count is the number of prompts the list held (1 for a string).
	Count int
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*p = Prompt{}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		p.Count = 1
		return json.Unmarshal(b, &p.Text)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New("prompt: want a string, a list of strings, a list of token ids or a list of lists of ids")
	}
	p.Count = len(raw)
	if len(raw) == 0 {
		return nil
	}
	first := bytes.TrimSpace(raw[0])
	switch {
	case len(first) > 0 && first[0] == '"':
		var texts []string
		if err := json.Unmarshal(b, &texts); err != nil {
			return errors.New("prompt: a list mixes strings and other values")
		}
		p.Text = texts[0]
	case len(first) > 0 && first[0] == '[':
		var lists [][]int32
		if err := json.Unmarshal(b, &lists); err != nil {
			return errors.New("prompt: want lists of token ids (integers)")
		}
		p.Tokens, p.IsTokens = lists[0], true
	default:
		var ids []int32
		if err := json.Unmarshal(b, &ids); err != nil {
			return errors.New("prompt: want a list of token ids (32-bit integers)")
		}
		p.Tokens, p.IsTokens, p.Count = ids, true, 1
	}
	return nil
}

// ChatCompletion is the answer of a chat call that does not stream.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // "chat.completion"
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
	Omar              *CallInfo    `json:"omar,omitempty"`
}

// ChatChoice is the one choice of a chat completion.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      *ReplyMessage `json:"message,omitempty"`
	Delta        *ReplyMessage `json:"delta,omitempty"` // chunks only
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ReplyMessage is the assistant's message (or a chunk's delta).
type ReplyMessage struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// nullContent writes "content": null: a message that only calls
	// tools has no content, and OpenAI says so rather than leaving the
	// field out (a delta leaves it out).
	nullContent bool
}

// MarshalJSON implements json.Marshaler.
func (m ReplyMessage) MarshalJSON() ([]byte, error) {
	type plain ReplyMessage
	if m.Content != nil || !m.nullContent {
		return json.Marshal(plain(m))
	}
	return json.Marshal(struct {
		plain
		Content *string `json:"content"`
	}{plain: plain(m)})
}

// ChatLogprobs are a chat choice's per-token log-probabilities.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
	Refusal []TokenLogprob `json:"refusal"`
}

// TokenLogprob is one generated token: its text, bytes, log-probability
// under the model's raw softmax, and the most likely alternatives when
// top_logprobs was asked for.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is an alternative token at a position.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatChunk is one server-sent event of a streamed chat call.
type ChatChunk struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // "chat.completion.chunk"
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage"`
	Omar              *CallInfo    `json:"omar,omitempty"`
}

// Completion is the answer (or one streamed chunk) of a completions call.
type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"` // "text_completion"
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage,omitempty"`
	Omar              *CallInfo          `json:"omar,omitempty"`
}

// CompletionChoice is the one choice of a completion.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionLogprobs are the legacy API's parallel arrays.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// Usage counts a call's tokens.
type Usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *PromptDetail `json:"prompt_tokens_details,omitempty"`
}

// PromptDetail says how many prompt tokens came from the KV cache.
type PromptDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

// CallInfo is omar's extension of a response: where the call was
// recorded. OpenAI clients keep unknown fields, so agents can read it.
type CallInfo struct {
	Session       string `json:"session,omitempty"`
	Segment       int    `json:"segment"`
	Call          int    `json:"call"`
	PolicyVersion int    `json:"policy_version"`
	Seed          uint64 `json:"seed"`
}

// APIError is an error answer in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type APIError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
}

func (e *APIError) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("proxy: HTTP %d: %s (param %s)", e.Status, e.Message, e.Param)
	}
	return fmt.Sprintf("proxy: HTTP %d: %s", e.Status, e.Message)
}

// ErrorBody is the JSON body of an error answer.
type ErrorBody struct {
	Error *APIError `json:"error"`
}

// badRequest is a 400 invalid_request_error about param.
func badRequest(param, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// decodeRequest decodes one JSON request strictly: unknown fields,
// trailing data, wrong types and bodies over limit bytes are 4xx errors
// naming the field where there is one.
func decodeRequest(r io.Reader, limit int64, v any) *APIError {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	data, err := io.ReadAll(lr)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &APIError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("request body larger than %d bytes", limit)}
		}
		return badRequest("", "reading the request body: %v", err)
	}
	if int64(len(data)) > limit {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("request body larger than %d bytes", limit)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("", "empty request body: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("", "trailing data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a 400 naming the field.
func jsonError(err error) *APIError {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return badRequest("", "the request body must be a JSON object, not %s", typeErr.Value)
		}
		return badRequest(field, "%s: want %s, got %s", field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return badRequest("", "the request body is not valid JSON: %v (at byte %d)", err, syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the request body is not valid JSON: it ends early")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return badRequest(f, "unrecognized request argument supplied: %s", f)
	}
	return badRequest("", "%s", strings.TrimPrefix(msg, "json: "))
}
