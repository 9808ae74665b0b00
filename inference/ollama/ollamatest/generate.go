package ollamatest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
)

// turn is one generation call on its way through the server: the parts of
// the chat and generate handlers that differ are the two wire shapes.
type turn struct {
	call    Call
	stream  bool
	options map[string]any
	// chunk builds a wire object: a streamed piece (done false) or the
	// final object (done true, with reason and metrics).
	chunk func(content, thinking string, calls []api.ToolCall, done bool, reason string, m api.Metrics) any
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req api.ChatRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	s.chats = append(s.chats, req)
	s.mu.Unlock()
	s.chatTurn(w, r, req, "/api/chat")
}

// chatTurn is the chat handler after decoding, shared by /api/chat and
// /v1/chat/completions (whose middleware translates the request and
// rewrites what this writes).
func (s *Server) chatTurn(w http.ResponseWriter, r *http.Request, req api.ChatRequest, path string) {
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.model(req.Model)
	if !ok {
		writeError(w, http.StatusNotFound, "model '%s' not found", req.Model)
		return
	}
	if len(req.Messages) == 0 {
		s.loadOnly(w, m.Name, req.KeepAlive, func(reason string) any {
			return api.ChatResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Message: api.Message{Role: "assistant"}, Done: true, DoneReason: reason}
		})
		return
	}
	think, ok := thinks(w, m, req.Think)
	if !ok {
		return
	}
	if len(req.Tools) > 0 && !m.Tools {
		// The scheduler's capability check, naming the model in full.
		writeError(w, http.StatusBadRequest, "%s does not support tools", model.ParseName(m.Name).String())
		return
	}
	s.run(w, r, turn{
		call:    Call{Path: path, Model: m.Name, Messages: req.Messages, Tools: req.Tools, Format: req.Format, Think: think, KeepAlive: req.KeepAlive},
		stream:  req.Stream == nil || *req.Stream,
		options: req.Options,
		chunk: func(content, thinking string, calls []api.ToolCall, done bool, reason string, mt api.Metrics) any {
			return api.ChatResponse{Model: req.Model, CreatedAt: time.Now().UTC(),
				Message: api.Message{Role: "assistant", Content: content, Thinking: thinking, ToolCalls: calls}, Done: done, DoneReason: reason, Metrics: mt}
		},
	})
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req api.GenerateRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	s.generates = append(s.generates, req)
	s.mu.Unlock()
	m, ok := s.model(req.Model)
	if !ok {
		// The generate handler answers even an empty name with a 404.
		writeError(w, http.StatusNotFound, "model '%s' not found", req.Model)
		return
	}
	if req.Prompt == "" {
		s.loadOnly(w, m.Name, req.KeepAlive, func(reason string) any {
			return api.GenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason}
		})
		return
	}
	think, ok := thinks(w, m, req.Think)
	if !ok {
		return
	}
	var msgs []api.Message
	if req.System != "" {
		msgs = append(msgs, api.Message{Role: "system", Content: req.System})
	}
	msgs = append(msgs, api.Message{Role: "user", Content: req.Prompt})
	s.run(w, r, turn{
		call:    Call{Path: "/api/generate", Model: m.Name, Messages: msgs, Format: req.Format, Think: think, KeepAlive: req.KeepAlive},
		stream:  req.Stream == nil || *req.Stream,
		options: req.Options,
		chunk: func(content, thinking string, _ []api.ToolCall, done bool, reason string, mt api.Metrics) any {
			return api.GenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Response: content, Thinking: thinking,
				Done: done, DoneReason: reason, Metrics: mt}
		},
	})
}

// loadOnly answers a call without input: it loads the model, or unloads it
// when keep_alive is 0, in one object whatever stream says.
func (s *Server) loadOnly(w http.ResponseWriter, m string, d *api.Duration, reply func(reason string) any) {
	s.keepAlive(m, d)
	reason := "load"
	if d != nil && d.Duration == 0 {
		reason = "unload"
	}
	writeJSON(w, http.StatusOK, reply(reason))
}

// thinks decides whether m thinks: by default when it can, and a request
// for thinking from a model that cannot is the handlers' 400.
func thinks(w http.ResponseWriter, m Model, t *api.ThinkValue) (bool, bool) {
	if t == nil {
		return m.Thinking, true
	}
	if t.Bool() && !m.Thinking {
		writeError(w, http.StatusBadRequest, "%q does not support thinking", m.Name)
		return false, false
	}
	return t.Bool(), true
}

// checkFormat accepts what llm/server.go's Completion accepts.
func checkFormat(f json.RawMessage) (json.RawMessage, error) {
	switch string(f) {
	case "", "null", `""`:
		return nil, nil
	case `"json"`:
		return f, nil
	}
	if f[0] != '{' {
		return nil, fmt.Errorf("invalid format: %q; expected \"json\" or a valid JSON Schema object", []byte(f))
	}
	var schema map[string]any
	if json.Unmarshal(f, &schema) != nil {
		return nil, fmt.Errorf("invalid JSON schema in format")
	}
	return f, nil
}

func (s *Server) run(w http.ResponseWriter, r *http.Request, t turn) {
	opts := api.DefaultOptions()
	opts.NumCtx = s.opts.NumCtx
	if err := opts.FromMap(t.options); err != nil {
		writeError(w, http.StatusInternalServerError, "%s", err.Error())
		return
	}
	t.call.Options = opts
	format, err := checkFormat(t.call.Format)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%s", err.Error())
		return
	}
	t.call.Format = format
	start := time.Now()
	s.mu.Lock()
	s.seq++
	t.call.Seq = s.seq
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	s.keepAlive(t.call.Model, t.call.KeepAlive)
	if !s.wait(r.Context(), s.opts.Latency) {
		return
	}
	var fail *Failure
	if s.opts.Fail != nil {
		fail = s.opts.Fail(t.call)
	}
	if fail != nil && (!t.stream || fail.AfterTokens <= 0) {
		failNow(w, fail)
		return
	}
	reply := s.opts.Reply(t.call)
	if !t.call.Think {
		reply.Thinking = ""
	}
	think, content, reason := cut(reply, opts)
	if reason == "stop" && format != nil {
		if err := Check(format, strings.Join(content, "")); err != nil {
			writeError(w, http.StatusInternalServerError,
				"ollamatest: the scripted reply breaks the request's format, which the real server's grammar forbids: %v", err)
			return
		}
	}
	calls, err := toolCalls(t.call, reply.ToolCalls, reason)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	firstToken := time.Now()
	metrics := func() api.Metrics {
		return api.Metrics{TotalDuration: nonzero(time.Since(start)), LoadDuration: time.Microsecond,
			PromptEvalCount: promptTokens(t.call.Messages), PromptEvalDuration: nonzero(firstToken.Sub(start)),
			EvalCount: len(think) + len(content), EvalDuration: nonzero(time.Since(firstToken))}
	}
	if !t.stream {
		writeJSON(w, http.StatusOK, t.chunk(strings.Join(content, ""), strings.Join(think, ""), calls, true, reason, metrics()))
		return
	}
	s.stream(w, r, t, think, content, calls, fail, func() any { return t.chunk("", "", nil, true, reason, metrics()) })
}

// toolCalls checks a reply's calls against the request's tools, since the
// real server's tool parser finds calls of the given tools only, and
// numbers them as it does (an id call_… where the script gave none, the
// index in order). A reply cut by num_predict never finished its calls.
func toolCalls(c Call, calls []api.ToolCall, reason string) ([]api.ToolCall, error) {
	if reason != "stop" || len(calls) == 0 {
		return nil, nil
	}
	calls = slices.Clone(calls)
	for i := range calls {
		name := calls[i].Function.Name
		if !slices.ContainsFunc(c.Tools, func(t api.Tool) bool { return t.Function.Name == name }) {
			return nil, fmt.Errorf("ollamatest: the scripted reply calls %q, which the request's tools do not define (the real server would answer it as text)", name)
		}
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%04d%04d", c.Seq%10000, i)
		}
		calls[i].Function.Index = i
	}
	return calls, nil
}

// stream writes one NDJSON chunk per token, thinking first, then one with
// the tool calls (if any), then the final chunk; an injected failure
// interrupts it after fail.AfterTokens tokens.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, t turn, think, content []string, calls []api.ToolCall, fail *Failure, final func() any) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	for i := range len(think) + len(content) {
		if fail != nil && i == fail.AfterTokens {
			failNow(w, fail)
			return
		}
		if i > 0 && !s.wait(r.Context(), s.opts.TokenLatency) {
			return
		}
		if i < len(think) {
			enc.Encode(t.chunk("", think[i], nil, false, "", api.Metrics{}))
		} else {
			enc.Encode(t.chunk(content[i-len(think)], "", nil, false, "", api.Metrics{}))
		}
		flush()
	}
	if len(calls) > 0 && fail == nil {
		enc.Encode(t.chunk("", "", calls, false, "", api.Metrics{}))
		flush()
	}
	if fail != nil {
		failNow(w, fail)
		return
	}
	enc.Encode(final())
	flush()
}

// failNow writes an injected failure: before any chunk as a status and
// error object, after one as an error line (the status is already sent).
func failNow(w http.ResponseWriter, f *Failure) {
	if f.Hangup {
		panic(http.ErrAbortHandler)
	}
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if w.Header().Get("Content-Type") == "application/x-ndjson" {
		json.NewEncoder(w).Encode(map[string]string{"error": f.Message})
		return
	}
	writeError(w, status, "%s", f.Message)
}

// wait sleeps for d unless the client goes away first, which it counts.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if ctx.Err() == nil && d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		s.mu.Lock()
		s.canceled++
		s.mu.Unlock()
		return false
	}
	return true
}

// cut applies the stop strings (the reply ends before the first, which is
// removed) and num_predict (thinking tokens count, as they are generated
// too; the runner caps it at ten contexts) to a reply, as tokens.
func cut(r Reply, o api.Options) (think, content []string, reason string) {
	text := r.Content
	for _, stop := range o.Stop {
		if i := strings.Index(text, stop); stop != "" && i >= 0 {
			text = text[:i]
		}
	}
	think, content, reason = Tokens(r.Thinking), Tokens(text), "stop"
	n := o.NumPredict
	if n <= 0 || n > 10*o.NumCtx {
		n = 10 * o.NumCtx
	}
	if len(think)+len(content) > n {
		reason = "length"
		if len(think) >= n {
			return think[:n], nil, reason
		}
		content = content[:n-len(think)]
	}
	return think, content, reason
}

// Tokens splits text into the fake's tokens: pieces of at most four bytes
// that never split a UTF-8 sequence.
func Tokens(text string) []string {
	var out []string
	for len(text) > 0 {
		n := 0
		for n < len(text) {
			_, size := utf8.DecodeRuneInString(text[n:])
			if n > 0 && n+size > 4 {
				break
			}
			n += size
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

func promptTokens(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(Tokens(m.Content))
	}
	return n
}

// nonzero keeps a duration in the wire object (the fields are omitempty).
func nonzero(d time.Duration) time.Duration { return max(d, time.Nanosecond) }
