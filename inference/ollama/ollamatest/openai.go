package ollamatest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/openai"
)

// The OpenAI-compatible endpoint is, as in the real server, middleware
// around the chat handler (middleware.ChatMiddleware of the pinned
// release): the request is translated with that module's
// openai.FromChatRequest, the chat handler runs on the translation, and
// what it writes is rewritten with openai.ToChatCompletion, openai.ToChunk
// and openai.NewError. Errors the middleware finds itself are 400
// invalid_request_error; the handler's keep their status and are typed
// api_error whatever it is, as the real writer does.

// openaiChat is POST /v1/chat/completions.
func (s *Server) openaiChat(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		// gin's ShouldBindJSON: an empty body is "EOF".
		writeJSON(w, http.StatusBadRequest, openai.NewError(http.StatusBadRequest, err.Error()))
		return
	}
	s.mu.Lock()
	s.openaiChats = append(s.openaiChats, req)
	id := fmt.Sprintf("chatcmpl-%d", len(s.openaiChats))
	s.mu.Unlock()
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, openai.NewError(http.StatusBadRequest, "[] is too short - 'messages'"))
		return
	}
	chat, err := openai.FromChatRequest(req)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, openai.NewError(http.StatusBadRequest, err.Error()))
		return
	}
	// The middleware hands the handler the translation as JSON, so the
	// options arrive as JSON numbers do (max_tokens as a float64).
	b, err := json.Marshal(chat)
	if err == nil {
		*chat = api.ChatRequest{}
		err = json.Unmarshal(b, chat)
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, openai.NewError(http.StatusInternalServerError, err.Error()))
		return
	}
	ow := &openaiWriter{w: w, h: http.Header{}, stream: req.Stream, opts: req.StreamOptions, id: id}
	s.chatTurn(ow, r, *chat, "/v1/chat/completions")
}

// openaiModel is GET /v1/models/{model}: the show handler's model as an
// OpenAI model object.
func (s *Server) openaiModel(w http.ResponseWriter, name string) {
	if _, ok := s.model(name); !ok {
		writeJSON(w, http.StatusNotFound, openai.NewError(http.StatusInternalServerError, fmt.Sprintf("model '%s' not found", name)))
		return
	}
	writeJSON(w, http.StatusOK, openai.ToModel(api.ShowResponse{ModifiedAt: s.created}, name))
}

// openaiWriter is middleware.ChatWriter: what the chat handler writes (an
// error object, one response, or NDJSON chunks, one Write each) goes out
// as an OpenAI error, a chat.completion, or SSE chat.completion.chunk
// events ending with data: [DONE]. The handler's headers stay its own.
type openaiWriter struct {
	w            http.ResponseWriter
	h            http.Header
	status       int
	sent         bool
	stream       bool
	opts         *openai.StreamOptions
	id           string
	toolCallSent bool
}

func (o *openaiWriter) Header() http.Header { return o.h }

func (o *openaiWriter) WriteHeader(status int) {
	if o.status == 0 {
		o.status = status
	}
}

func (o *openaiWriter) Flush() {
	if f, ok := o.w.(http.Flusher); ok {
		f.Flush()
	}
}

// send writes the status line once, with ctype.
func (o *openaiWriter) send(ctype string) {
	o.w.Header().Set("Content-Type", ctype)
	if !o.sent {
		o.sent = true
		o.w.WriteHeader(o.status)
	}
}

func (o *openaiWriter) Write(data []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	if o.status != http.StatusOK {
		var e api.StatusError
		if err := json.Unmarshal(data, &e); err != nil {
			return 0, err
		}
		o.send("application/json")
		return len(data), json.NewEncoder(o.w).Encode(openai.NewError(http.StatusInternalServerError, e.Error()))
	}
	// An {"error": …} line after the first chunk reads as an empty
	// chunk, and the stream ends without [DONE], as in the real writer.
	var resp api.ChatResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return 0, err
	}
	if !o.stream {
		o.send("application/json")
		return len(data), json.NewEncoder(o.w).Encode(openai.ToChatCompletion(o.id, resp))
	}
	c := openai.ToChunk(o.id, resp, o.toolCallSent)
	if len(c.Choices) > 0 && len(c.Choices[0].Delta.ToolCalls) > 0 {
		o.toolCallSent = true
	}
	o.send("text/event-stream")
	if err := o.event(c); err != nil {
		return 0, err
	}
	if resp.Done {
		if o.opts != nil && o.opts.IncludeUsage {
			u := openai.ToUsage(resp)
			c.Usage, c.Choices = &u, []openai.ChunkChoice{}
			if err := o.event(c); err != nil {
				return 0, err
			}
		}
		if _, err := io.WriteString(o.w, "data: [DONE]\n\n"); err != nil {
			return 0, err
		}
	}
	return len(data), nil
}

// event writes one server-sent event.
func (o *openaiWriter) event(c openai.ChatCompletionChunk) error {
	d, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.w, "data: %s\n\n", d)
	return err
}
