// Package ollama is an inference.Backend that talks to an Ollama server
// through its official Go client (github.com/ollama/ollama/api, /api/chat).
//
// It is meant for evaluation and data generation with models served by
// Ollama. It cannot be used for training: the chat API takes and returns
// text, not token ids, so Response.Tokens, Logprobs and RawLogprobs are
// always empty and requests must carry Messages (a token-only Prompt is an
// error). Other differences from the llama backend:
//   - Grammar (GBNF) cannot be sent; set Options.Format (a JSON schema or
//     "json") for structured replies, and let the engine validate replies as
//     for any model.
//   - StopTokens are ignored (no ids); Stop strings are passed on, and Ollama
//     removes a matched stop string from the reply.
//   - The seed is passed modulo 2^31 (Ollama's seed is a signed int).
package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/omar-selfplay/omar/inference"
)

// DefaultHost is Ollama's default address.
const DefaultHost = "http://127.0.0.1:11434"

// Options configure a Backend.
type Options struct {
	// Host is the server's base URL (default DefaultHost). cmd/ reads
	// OLLAMA_HOST and passes it here.
	Host string
	// Model is the Ollama model name, e.g. "qwen3:4b" (required).
	Model string
	// Format constrains every reply: a JSON schema, or the JSON string
	// "json". Empty means free text.
	Format json.RawMessage
	// FormatFor, when set, picks the format per request (overriding
	// Format when it returns non-empty).
	FormatFor func(req inference.Request) json.RawMessage
	// Think enables or disables the thinking phase of reasoning models;
	// nil leaves the model's default. Thinking text is not returned.
	Think *bool
	// KeepAlive is how long Ollama keeps the model loaded (0: its default).
	KeepAlive time.Duration
	// Parallel bounds the requests in flight per Generate call (default 4).
	Parallel int
	// Stream asks for the reply as NDJSON chunks instead of one object. The
	// text is the same; a proxy that cuts idle connections lets a streamed
	// long reply through.
	Stream bool
	// HTTPClient is used for requests (default http.DefaultClient).
	HTTPClient *http.Client
}

// Defaults fills unset fields.
func (o Options) Defaults() Options {
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Parallel == 0 {
		o.Parallel = 4
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	return o
}

// Validate checks the options (after Defaults).
func (o Options) Validate() error {
	if o.Model == "" {
		return errors.New("ollama: Options.Model is required")
	}
	u, err := url.Parse(o.Host)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("ollama: host %q is not a URL like %s", o.Host, DefaultHost)
	}
	if o.Parallel < 1 {
		return fmt.Errorf("ollama: parallel %d < 1", o.Parallel)
	}
	if len(o.Format) > 0 && !json.Valid(o.Format) {
		return fmt.Errorf("ollama: format is not valid JSON: %s", o.Format)
	}
	return nil
}

// Backend sends each request to Ollama's chat endpoint.
type Backend struct {
	opts   Options
	client *api.Client
	mu     sync.Mutex
	closed bool
}

var _ inference.Backend = (*Backend)(nil)

// New returns a backend; it does not contact the server.
func New(opts Options) (*Backend, error) {
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(opts.Host)
	return &Backend{opts: opts, client: api.NewClient(u, opts.HTTPClient)}, nil
}

// ErrClosed is returned by Generate after Close.
var ErrClosed = errors.New("ollama: backend closed")

// Generate sends the requests concurrently (at most Options.Parallel at a
// time) and returns the responses in request order. Any failed request
// (server unreachable, unknown model, …) fails the call.
func (b *Backend) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	for i, r := range reqs {
		if len(r.Messages) == 0 {
			return nil, fmt.Errorf("ollama: request %d (%s) has no Messages; Ollama cannot take token ids", i, r.Key)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]inference.Response, len(reqs))
	errs := make([]error, len(reqs))
	sem := make(chan struct{}, b.opts.Parallel)
	var wg sync.WaitGroup
	// cause is the first failure, recorded before it cancels the other
	// calls: a call cut by that cancellation may fail with an error of its
	// own (a stream that ended before done), not a context error.
	var cause error
	var causeOnce sync.Once
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			out[i], errs[i] = b.chat(ctx, reqs[i])
			if errs[i] != nil {
				errs[i] = fmt.Errorf("ollama: request %d (%s): %w", i, reqs[i].Key, errs[i])
				causeOnce.Do(func() { cause = errs[i] })
				cancel()
			}
		}()
	}
	wg.Wait()
	if cause != nil {
		return nil, cause
	}
	// Report the first real failure rather than the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}

// ChatRequest builds the Ollama request for r (exported for inspection
// and tests).
func (b *Backend) ChatRequest(r inference.Request) *api.ChatRequest {
	stream := b.opts.Stream
	req := &api.ChatRequest{Model: b.opts.Model, Stream: &stream, Options: SamplingOptions(r)}
	for _, m := range r.Messages {
		req.Messages = append(req.Messages, api.Message{Role: m.Role, Content: m.Content})
	}
	req.Format = b.opts.Format
	if b.opts.FormatFor != nil {
		if f := b.opts.FormatFor(r); len(f) > 0 {
			req.Format = f
		}
	}
	if b.opts.Think != nil {
		req.Think = &api.ThinkValue{Value: *b.opts.Think}
	}
	if b.opts.KeepAlive > 0 {
		req.KeepAlive = &api.Duration{Duration: b.opts.KeepAlive}
	}
	return req
}

// SamplingOptions maps a request's sampler settings and limits to
// Ollama's options. The temperature is always sent, because the zero value
// of inference.Sampling means greedy decoding.
func SamplingOptions(r inference.Request) map[string]any {
	s := r.Sampling
	o := map[string]any{
		"temperature": s.Temperature,
		"seed":        int(s.Seed % (1 << 31)),
	}
	if s.TopK > 0 {
		o["top_k"] = s.TopK
	}
	if s.TopP > 0 && s.TopP < 1 {
		o["top_p"] = s.TopP
	}
	if s.MinP > 0 {
		o["min_p"] = s.MinP
	}
	if r.MaxTokens > 0 {
		o["num_predict"] = r.MaxTokens
	}
	if len(r.Stop) > 0 {
		o["stop"] = r.Stop
	}
	return o
}

func (b *Backend) chat(ctx context.Context, r inference.Request) (inference.Response, error) {
	var resp inference.Response
	var done bool
	err := b.client.Chat(ctx, b.ChatRequest(r), func(cr api.ChatResponse) error {
		// Streamed chunks carry pieces of the reply; the final one none.
		resp.Text += cr.Message.Content
		if cr.Done {
			done = true
			switch cr.DoneReason {
			case "length":
				resp.Stop = inference.StopLength
			default: // "stop" (end of turn or a stop string), "unload", …
				resp.Stop = inference.StopEOG
			}
		}
		return nil
	})
	var status api.StatusError
	if errors.As(err, &status) && status.StatusCode == http.StatusNotFound && strings.Contains(status.ErrorMessage, "model") {
		return resp, fmt.Errorf("model %q is not pulled on %s (run: ollama pull %s): %w", b.opts.Model, b.opts.Host, b.opts.Model, err)
	}
	if err != nil {
		return resp, err
	}
	if !done {
		// The client ends quietly when the connection drops mid-stream.
		return resp, errors.New("response ended before done")
	}
	return resp, nil
}

// Close makes later Generate calls fail; there is nothing to release.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}
