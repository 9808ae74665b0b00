// Package ollamatest is a fake Ollama server for tests: it speaks the HTTP
// protocol of the Ollama release pinned in go.mod (v0.17.4), so that code
// built on inference/ollama is tested against the server's behaviour rather
// than against whatever a hand-written stub happens to accept.
//
// What it follows, with the wire types of github.com/ollama/ollama/api and
// the handlers of that module's server/routes.go and llm/server.go:
//
//   - POST /api/chat (api.ChatRequest → api.ChatResponse) and POST
//     /api/generate (api.GenerateRequest → api.GenerateResponse). Streaming
//     is the default: NDJSON chunks (Content-Type application/x-ndjson), one
//     per token, then a chunk with done true, done_reason and the counts and
//     durations of api.Metrics. With "stream": false one JSON object carries
//     the whole reply. No messages (chat) or no prompt (generate) loads the
//     model (done_reason "load"), or unloads it with keep_alive 0 ("unload").
//   - format: "json" or a JSON schema object; anything else fails as the
//     runner does (500, `invalid format: …`). The server's grammar makes a
//     complete constrained reply valid, so a scripted reply that breaks the
//     format fails the call with a 500 naming the fault: a test can never
//     pass on a reply the real server could not produce. A reply cut by
//     num_predict is not checked (real replies are cut mid-JSON too).
//   - think: a model with the thinking capability thinks unless think is
//     false, and its thinking comes back in message.thinking (response
//     thinking for generate); think true on a model without it is a 400
//     (`"m" does not support thinking`).
//   - options: decoded over api.DefaultOptions with api.Options.FromMap, so
//     a wrongly typed option is the server's 500; num_predict cuts the reply
//     (done_reason "length", thinking tokens count too), stop strings end
//     it and are removed; temperature and seed reach the Reply function.
//   - keep_alive: api.Duration; GET /api/ps lists loaded models with their
//     expiry.
//   - Errors as the handlers write them: 400 for a missing body, bad JSON or
//     no model (chat: "model is required"), 404 `model 'x' not found` for a
//     model that is not pulled (generate and show too), a 500 object before
//     the first chunk, and after it an {"error": …} line in the 200 stream.
//   - tools (chat): a model needs the tools capability (Model.Tools; else
//     400 `registry.ollama.ai/library/m:latest does not support tools`);
//     a Reply's ToolCalls, which must name the request's tools, come back
//     in message.tool_calls with ids call_… (streamed: one chunk after
//     the content).
//   - GET /api/tags (api.ListResponse), GET /api/version, POST /api/show
//     (api.ShowResponse with capabilities), GET / ("Ollama is running").
//   - The OpenAI-compatible endpoint (docs/api/openai-compatibility.mdx):
//     POST /v1/chat/completions is the chat handler behind the release's
//     own translation (its openai package): chat.completion objects (id
//     chatcmpl-N, system_fingerprint fp_ollama, finish_reason stop, length
//     or tool_calls, usage), with stream true SSE chat.completion.chunk
//     events ending with data: [DONE] (a usage chunk first when
//     stream_options.include_usage), thinking in message.reasoning, and
//     errors as {"error": {"message", "type", "param", "code"}} with the
//     handler's status (404 `model 'x' not found`) or the middleware's 400
//     (malformed JSON, no messages). GET /v1/models and /v1/models/{model}.
//
// Model names follow Ollama's model:tag convention (a name without a tag
// means :latest). A token is the fake's own unit, at most four bytes of
// text: Ollama counts the model's tokens, which no fake can know.
//
// Not followed: images, logprobs, raw templates, context, embeddings,
// pulls and pushes, and the scheduler's queueing (every request runs at
// once; MaxInFlight reports how many did).
package ollamatest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/openai"
	"github.com/ollama/ollama/types/model"
)

// Version is what GET /api/version reports: the release whose protocol
// the fake follows.
const Version = "0.17.4"

// Model is a pulled model.
type Model struct {
	// Name is model:tag; without a tag it is :latest.
	Name string
	// Thinking gives the model the thinking capability: it thinks unless a
	// request says think false.
	Thinking bool
	// Tools gives the model the tools capability: without it a request
	// with tools is a 400.
	Tools bool
}

// Call is a generation request as a Reply function sees it.
type Call struct {
	// Path is "/api/chat", "/api/generate" or "/v1/chat/completions".
	Path string
	// Model is the model's full name (model:tag).
	Model string
	// Messages are the chat; for /api/generate the system prompt (if any)
	// and the prompt as a user message.
	Messages []api.Message
	// Tools are the request's tools: the only functions a reply may call.
	Tools []api.Tool
	// Format is the request's format (nil: free text).
	Format json.RawMessage
	// Think says whether the model thinks for this request.
	Think bool
	// Options are the request's options over api.DefaultOptions.
	Options api.Options
	// KeepAlive is the request's keep_alive (nil: the default).
	KeepAlive *api.Duration
	// Seq numbers the generation calls in order of arrival, from 1.
	Seq int
}

// Reply is what the scripted model writes before the server cuts it.
type Reply struct {
	Content string
	// Thinking is sent only when the call thinks.
	Thinking string
	// ToolCalls are calls of the request's tools, after the content (an
	// empty ID is filled in as the server does).
	ToolCalls []api.ToolCall
}

// Failure is an injected server error.
type Failure struct {
	// Status is the HTTP status when the error comes before any chunk
	// (0: 500, as the handlers use for runner errors).
	Status int
	// Message is the error text.
	Message string
	// AfterTokens streams this many tokens first, so that the error comes
	// as an {"error": …} line in a 200 stream (streaming calls only).
	AfterTokens int
	// Hangup drops the connection instead of writing the error.
	Hangup bool
}

// Options configure a Server.
type Options struct {
	// Models are the pulled models.
	Models []Model
	// Reply writes the model's reply (default: DefaultReply).
	Reply func(Call) Reply
	// Latency is spent before the first token (loading and prompt
	// evaluation); TokenLatency between tokens. Both end when the client
	// goes away.
	Latency, TokenLatency time.Duration
	// Fail injects a failure into a call (nil: none).
	Fail func(Call) *Failure
	// NumCtx is the context length; num_predict is capped at ten times it,
	// as the runner does (default 4096).
	NumCtx int
}

// DefaultReply is a model that follows its format: an instance of the
// schema (Instance), {} in JSON mode, and otherwise the last message.
func DefaultReply(c Call) Reply {
	switch {
	case string(c.Format) == `"json"`:
		return Reply{Content: "{}"}
	case len(c.Format) > 0:
		s, err := Instance(c.Format)
		if err != nil {
			return Reply{Content: err.Error()}
		}
		return Reply{Content: s}
	case len(c.Messages) > 0:
		return Reply{Content: c.Messages[len(c.Messages)-1].Content}
	}
	return Reply{}
}

// Server is a running fake Ollama.
type Server struct {
	// URL is the base URL, for ollama.Options.Host.
	URL  string
	opts Options

	mu          sync.Mutex
	chats       []api.ChatRequest
	generates   []api.GenerateRequest
	openaiChats []openai.ChatCompletionRequest
	seq         int
	inFlight    int
	maxInFlight int
	canceled    int
	loaded      map[string]time.Time
	// created is the models' modification time.
	created time.Time
}

// New starts a server, closed when tb ends.
func New(tb testing.TB, o Options) *Server {
	s := NewServer(o)
	srv := httptest.NewServer(s)
	tb.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// NewServer returns the handler without starting it (URL stays empty).
func NewServer(o Options) *Server {
	if o.Reply == nil {
		o.Reply = DefaultReply
	}
	if o.NumCtx <= 0 {
		o.NumCtx = 4096
	}
	o.Models = slices.Clone(o.Models)
	for i, m := range o.Models {
		o.Models[i].Name = FullName(m.Name)
	}
	return &Server{opts: o, loaded: map[string]time.Time{}, created: time.Now().UTC().Truncate(time.Second)}
}

// FullName adds Ollama's default tag to a name without one.
func FullName(name string) string {
	if name == "" {
		return ""
	}
	if i := strings.LastIndex(name, "/"); !strings.Contains(name[i+1:], ":") {
		return name + ":latest"
	}
	return name
}

// ChatRequests returns the /api/chat requests received, in order.
func (s *Server) ChatRequests() []api.ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.chats)
}

// GenerateRequests returns the /api/generate requests received, in order.
func (s *Server) GenerateRequests() []api.GenerateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.generates)
}

// OpenAIChatRequests returns the /v1/chat/completions requests received
// (those that decoded), in order.
func (s *Server) OpenAIChatRequests() []openai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.openaiChats)
}

// MaxInFlight is the most generation calls the server ran at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// Canceled counts the calls whose client went away before the reply ended.
func (s *Server) Canceled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canceled
}

func (s *Server) model(name string) (Model, bool) {
	full := FullName(name)
	for _, m := range s.opts.Models {
		if m.Name == full {
			return m, true
		}
	}
	return Model{}, false
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "Ollama is running")
	case r.URL.Path == "/api/version" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"version": Version})
	case r.URL.Path == "/api/tags" && r.Method == http.MethodGet:
		s.tags(w)
	case r.URL.Path == "/api/ps" && r.Method == http.MethodGet:
		s.ps(w)
	case r.URL.Path == "/api/show" && r.Method == http.MethodPost:
		s.show(w, r)
	case r.URL.Path == "/api/chat" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/api/generate" && r.Method == http.MethodPost:
		s.generate(w, r)
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.openaiChat(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, openai.ToListCompletion(s.list()))
	case strings.HasPrefix(r.URL.Path, "/v1/models/") && r.Method == http.MethodGet:
		s.openaiModel(w, strings.TrimPrefix(r.URL.Path, "/v1/models/"))
	default:
		// gin's answer to an unknown route.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "404 page not found")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

func details() api.ModelDetails {
	return api.ModelDetails{Format: "gguf", Family: "fake", Families: []string{"fake"}, ParameterSize: "1B", QuantizationLevel: "Q4_K_M"}
}

func (s *Server) list() api.ListResponse {
	list := api.ListResponse{Models: []api.ListModelResponse{}}
	for _, m := range s.opts.Models {
		list.Models = append(list.Models, api.ListModelResponse{Name: m.Name, Model: m.Name, ModifiedAt: s.created, Size: 1 << 30,
			Digest: fmt.Sprintf("%064x", len(m.Name)), Details: details()})
	}
	return list
}

func (s *Server) tags(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, s.list())
}

func (s *Server) ps(w http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := api.ProcessResponse{Models: []api.ProcessModelResponse{}}
	for _, m := range s.opts.Models {
		if exp, ok := s.loaded[m.Name]; ok && time.Now().Before(exp) {
			list.Models = append(list.Models, api.ProcessModelResponse{Name: m.Name, Model: m.Name, Size: 1 << 30,
				Details: details(), ExpiresAt: exp, ContextLength: s.opts.NumCtx})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	var req api.ShowRequest
	if !decode(w, r, &req) {
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.model(name)
	if !ok {
		writeError(w, http.StatusNotFound, "model '%s' not found", name)
		return
	}
	caps := []model.Capability{model.CapabilityCompletion}
	if m.Tools {
		caps = append(caps, model.CapabilityTools)
	}
	if m.Thinking {
		caps = append(caps, model.CapabilityThinking)
	}
	writeJSON(w, http.StatusOK, api.ShowResponse{Details: details(), Capabilities: caps, ModifiedAt: s.created,
		ModelInfo: map[string]any{"general.architecture": "fake", "fake.context_length": s.opts.NumCtx}})
}

// decode reads a request body as gin's ShouldBindJSON does, answering the
// handlers' 400s.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(r.Body).Decode(v)
	switch {
	case err != nil && err.Error() == "EOF":
		writeError(w, http.StatusBadRequest, "missing request body")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "%s", err.Error())
		return false
	}
	return true
}

// keepAlive records that a call loaded m for d (default five minutes; a
// negative duration keeps it loaded; 0 unloads it).
func (s *Server) keepAlive(m string, d *api.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case d == nil:
		s.loaded[m] = time.Now().Add(5 * time.Minute)
	case d.Duration == 0:
		delete(s.loaded, m)
	case d.Duration < 0 || d.Duration > 100*365*24*time.Hour:
		s.loaded[m] = time.Now().Add(100 * 365 * 24 * time.Hour)
	default:
		s.loaded[m] = time.Now().Add(d.Duration)
	}
}
