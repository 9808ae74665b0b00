package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/gbnf"
)

// Limits of the request fields, as OpenAI's.
const (
	maxStops       = 4
	maxTopLogprobs = 20
)

// plan is a validated request, independent of the endpoint it came from.
type plan struct {
	chat     bool
	model    string
	messages []inference.Message // chat
	prompt   Prompt              // completions
	// maxTokens bounds the reply; 0 means the server's bound.
	maxTokens int
	sampling  inference.Sampling
	seedGiven bool
	stop      []string
	stream    bool
	usage     bool // stream_options.include_usage
	logprobs  bool
	top       int // top logprobs per position
	user      string
	grammar   string
	thinking  *bool // chat_template_kwargs.enable_thinking
	// parseTools is set when the reply is read for tool calls (tools
	// given, tool_choice auto).
	parseTools bool
	// forward is the request as the upstream gets it (Options.Forward).
	forward *ChatRequest
}

// chatPlan validates a chat request.
func chatPlan(r *ChatRequest, o *Options) (*plan, *APIError) {
	p := &plan{chat: true, model: r.Model, stream: r.Stream, user: r.User, grammar: r.Grammar}
	if err := common(p, o, commonFields{
		maxTokens: r.MaxTokens, maxCompletion: r.MaxCompletionTokens, temperature: r.Temperature, topP: r.TopP,
		seed: r.Seed, stop: r.Stop, n: r.N, streamOptions: r.StreamOptions, neutral: &r.neutral,
	}); err != nil {
		return nil, err
	}
	if e := chatMessages(p, r, o); e != nil {
		return nil, e
	}
	for k, v := range r.ChatTemplateKwargs {
		param := "chat_template_kwargs." + k
		var on bool
		if k != "enable_thinking" {
			return nil, badRequest(param, "%s: not supported (only enable_thinking)", param)
		}
		if err := json.Unmarshal(v, &on); err != nil {
			return nil, badRequest(param, "%s: want true or false", param)
		}
		p.thinking = &on
	}
	if r.Logprobs != nil {
		p.logprobs = *r.Logprobs
	}
	if r.TopLogprobs != nil {
		n := *r.TopLogprobs
		switch {
		case n < 0 || n > maxTopLogprobs:
			return nil, badRequest("top_logprobs", "top_logprobs %d: want 0 to %d", n, maxTopLogprobs)
		case n > 0 && !p.logprobs:
			return nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		p.top = n
	}
	if f := r.ResponseFormat; f != nil {
		switch f.Type {
		case "", "text":
		case "json_object":
			if p.grammar != "" {
				return nil, badRequest("response_format", "response_format json_object and grammar: give one of them")
			}
			p.grammar = gbnf.JSONObject
		case "json_schema":
			return nil, badRequest("response_format", "response_format json_schema is not supported: use json_object, or a GBNF grammar in the grammar field")
		default:
			return nil, badRequest("response_format", "response_format type %q: want text, json_object or json_schema", f.Type)
		}
	}
	return p, nil
}

// chatMessages validates a chat request's messages and tools and folds
// them into plain messages for the chat template (tools.go).
func chatMessages(p *plan, r *ChatRequest, o *Options) *APIError {
	if len(r.Messages) == 0 {
		return badRequest("messages", "messages: want at least one message")
	}
	if len(r.Messages) > o.MaxMessages {
		return badRequest("messages", "messages: %d, at most %d in one request", len(r.Messages), o.MaxMessages)
	}
	block, parse, e := toolPlan(r.Tools, r.ToolChoice)
	if e != nil {
		return e
	}
	p.parseTools = parse
	results := false // the last message holds tool results
	for i, m := range r.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system
			role = "system"
		case "function":
			return badRequest(param+".role", "%s: role \"function\" is the deprecated form of tools: send role \"tool\" with tool_call_id", param)
		case "":
			return badRequest(param+".role", "%s: missing role", param)
		default:
			return badRequest(param+".role", "%s: unknown role %q (want system, developer, user, assistant or tool)", param, m.Role)
		}
		if len(m.ToolCalls) > 0 && role != "assistant" {
			return badRequest(param+".tool_calls", "%s: only assistant messages carry tool_calls", param)
		}
		if e := checkToolCalls(param, m.ToolCalls); e != nil {
			return e
		}
		if (m.ToolCallID != "") != (role == "tool") {
			return badRequest(param+".tool_call_id", "%s: a tool message needs tool_call_id, and only a tool message has one", param)
		}
		if !emptyJSON(m.FunctionCall) {
			return badRequest(param+".function_call", "%s: function_call is the deprecated form of tool_calls", param)
		}
		if !emptyJSON(m.Audio) {
			return badRequest(param+".audio", "%s: audio is not supported", param)
		}
		if m.Content.Null && role != "assistant" {
			return badRequest(param+".content", "%s: content is null", param)
		}
		if role == "tool" {
			p.messages = appendToolResult(p.messages, results, m.Content.Text)
			results = true
			continue
		}
		results = false
		p.messages = append(p.messages, inference.Message{Role: role, Content: callsText(m.Content.Text, m.ToolCalls)})
	}
	p.messages = foldTools(p.messages, block)
	return nil
}

// completionPlan validates a completions request.
func completionPlan(r *CompletionRequest, o *Options) (*plan, *APIError) {
	p := &plan{model: r.Model, prompt: r.Prompt, stream: r.Stream, user: r.User, grammar: r.Grammar}
	// The legacy API's default reply length is 16 tokens.
	max := r.MaxTokens
	if max == nil {
		def := 16
		max = &def
	}
	if err := common(p, o, commonFields{
		maxTokens: max, temperature: r.Temperature, topP: r.TopP,
		seed: r.Seed, stop: r.Stop, n: r.N, streamOptions: r.StreamOptions, neutral: &r.neutral,
	}); err != nil {
		return nil, err
	}
	switch {
	case r.Prompt.Count == 0:
		return nil, badRequest("prompt", "prompt: missing or empty")
	case r.Prompt.Count > 1:
		return nil, badRequest("prompt", "prompt: %d prompts in one request; send one (as n, only 1 is supported)", r.Prompt.Count)
	case r.Prompt.IsTokens && len(r.Prompt.Tokens) == 0:
		return nil, badRequest("prompt", "prompt: an empty list of token ids")
	case !r.Prompt.IsTokens && r.Prompt.Text == "":
		return nil, badRequest("prompt", "prompt: empty text")
	}
	if r.Prompt.IsTokens {
		for i, t := range r.Prompt.Tokens {
			if t < 0 || int(t) >= o.Vocab {
				return nil, badRequest("prompt", "prompt: token id %d at %d outside the vocabulary of %d", t, i, o.Vocab)
			}
		}
	}
	if r.BestOf != nil && *r.BestOf != 1 {
		return nil, badRequest("best_of", "best_of %d: only 1 is supported", *r.BestOf)
	}
	if r.Echo != nil && *r.Echo {
		return nil, badRequest("echo", "echo: true is not supported")
	}
	if r.Suffix != nil && *r.Suffix != "" {
		return nil, badRequest("suffix", "suffix is not supported")
	}
	if r.Logprobs != nil {
		n := *r.Logprobs
		if n < 0 || n > maxTopLogprobs {
			return nil, badRequest("logprobs", "logprobs %d: want 0 to %d", n, maxTopLogprobs)
		}
		p.logprobs, p.top = true, n
	}
	return p, nil
}

// commonFields are the fields both endpoints share.
type commonFields struct {
	maxTokens, maxCompletion *int
	temperature, topP        *float64
	seed                     *int64
	stop                     Stop
	n                        *int
	streamOptions            *StreamOptions
	neutral                  *neutral
}

func common(p *plan, o *Options, f commonFields) *APIError {
	if f.n != nil && *f.n != 1 {
		return badRequest("n", "n %d: only n = 1 is supported (send several requests; they are batched)", *f.n)
	}
	max, param := f.maxTokens, "max_tokens"
	if f.maxCompletion != nil {
		if max != nil && *max != *f.maxCompletion {
			return badRequest("max_completion_tokens", "max_tokens %d and max_completion_tokens %d differ: give one", *max, *f.maxCompletion)
		}
		max, param = f.maxCompletion, "max_completion_tokens"
	}
	if max != nil {
		if *max < 1 || *max > o.MaxTokens {
			return badRequest(param, "%s %d: want 1 to %d", param, *max, o.MaxTokens)
		}
		p.maxTokens = *max
	}
	// OpenAI's defaults: temperature 1, top_p 1.
	p.sampling = inference.Sampling{Temperature: 1}
	if t := f.temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || *t > 2 {
			return badRequest("temperature", "temperature %v: want 0 to 2", *t)
		}
		p.sampling.Temperature = float32(*t)
		if *t > 0 && *t < inference.MinTemperature {
			p.sampling.Temperature = 0 // indistinguishable from greedy
		}
	}
	if tp := f.topP; tp != nil {
		if math.IsNaN(*tp) || *tp <= 0 || *tp > 1 {
			return badRequest("top_p", "top_p %v: want a number in (0, 1]", *tp)
		}
		p.sampling.TopP = float32(*tp)
	}
	if err := p.sampling.Validate(); err != nil {
		return badRequest("temperature", "%v", err)
	}
	if f.seed != nil {
		// OpenAI's seed is any 64-bit integer; the bits are the seed.
		p.sampling.Seed, p.seedGiven = uint64(*f.seed), true
	}
	if len(f.stop) > maxStops {
		return badRequest("stop", "stop: %d sequences, at most %d", len(f.stop), maxStops)
	}
	for i, s := range f.stop {
		if s == "" {
			return badRequest("stop", "stop[%d] is empty", i)
		}
	}
	p.stop = f.stop
	if f.streamOptions != nil {
		if !p.stream {
			return badRequest("stream_options", "stream_options is only allowed with stream: true")
		}
		p.usage = f.streamOptions.IncludeUsage
	}
	return f.neutral.check()
}

// check refuses the neutral fields at values that would change sampling.
func (n *neutral) check() *APIError {
	if v := n.FrequencyPenalty; v != nil && *v != 0 {
		return badRequest("frequency_penalty", "frequency_penalty %v is not supported (only 0)", *v)
	}
	if v := n.PresencePenalty; v != nil && *v != 0 {
		return badRequest("presence_penalty", "presence_penalty %v is not supported (only 0)", *v)
	}
	if len(n.LogitBias) > 0 {
		return badRequest("logit_bias", "logit_bias is not supported")
	}
	if !emptyJSON(n.Tools) {
		return badRequest("tools", "tools are a chat completions field")
	}
	if !emptyJSON(n.Functions) {
		return badRequest("functions", "functions are the deprecated form of tools: send tools")
	}
	for _, c := range []json.RawMessage{n.ToolChoice, n.FunctionCall} {
		if !emptyJSON(c) && !bytes.Equal(bytes.TrimSpace(c), []byte(`"none"`)) && !bytes.Equal(bytes.TrimSpace(c), []byte(`"auto"`)) {
			return badRequest("tool_choice", "tool_choice %s is not supported here (no tools)", c)
		}
	}
	return nil
}

// emptyJSON reports whether raw is absent, null or an empty list.
func emptyJSON(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || bytes.Equal(s, []byte("null")) || bytes.Equal(s, []byte("[]"))
}
