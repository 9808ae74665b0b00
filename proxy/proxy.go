package proxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// Headers a call may carry.
const (
	HeaderSession   = "X-Omar-Session"
	HeaderEpisode   = "X-Omar-Episode"
	HeaderSeat      = "X-Omar-Seat"
	HeaderSeatToken = "X-Omar-Seat-Token"
)

// Options configure a Proxy.
type Options struct {
	// Model is the name answered in responses and listed by /v1/models.
	// Requests may name any model: there is one.
	Model string
	// Vocab is the vocabulary size, against which token-id prompts are
	// checked before they reach the backend.
	Vocab int
	// MaxTokens is the longest reply a request may ask for, and the
	// length of a chat reply that asks for none.
	MaxTokens int
	// MaxBodyBytes bounds request bodies.
	MaxBodyBytes int64
	// MaxSessions bounds the untied sessions held, and separately the
	// seat-tied ones. Beyond it a new untied session evicts the least
	// recently used idle session that has ended, else one of its own
	// client's; a tied one evicts only ended tied sessions.
	MaxSessions int
	// MaxClientSessions and MaxClientBytes bound the untied sessions of
	// one client address and the bytes they record; at either bound the
	// client's own least recently used idle session is evicted.
	MaxClientSessions int
	MaxClientBytes    int64
	// MaxBytes bounds what all sessions record; beyond it ended sessions
	// are evicted, and a call that still does not fit is refused.
	MaxBytes int64
	// MaxMessages bounds a chat request's messages, MaxPromptTokens a
	// call's whole prompt (the session's stream and what it appends).
	MaxMessages     int
	MaxPromptTokens int
	// MaxCalls bounds the calls one session may record.
	MaxCalls int
	// MaxFinished bounds the trajectories held until Trajectories drains
	// them; beyond it the oldest are dropped (Stats.Dropped).
	MaxFinished int
	// APIKey, when set, is the bearer token completion calls need (the
	// "api_key" of OpenAI clients).
	APIKey string
	// Secret is the bearer token of the management API (/v1/omar/…);
	// empty disables it (the Go methods still work).
	Secret string
	// Seed derives the seed of a call that gives none, so that a run of
	// the proxy is reproducible; the seed used is recorded with the call.
	Seed uint64
	// Adapter is the inference.Request.Adapter of every call.
	Adapter string
	// Poll is how often the episode of a tied session is checked for its
	// end (0: never; EndEpisode then attaches the rewards).
	Poll time.Duration
	// Games finds an environment by id, to give trajectories the role of
	// a seat that the game fixes (nil: the seat's name is the role).
	Games func(id string) (engine.Game, error)
	// Forward, when set, is the base URL of an OpenAI-compatible endpoint
	// (http://host:11434/v1 for Ollama) that answers chat calls instead
	// of the backend; the calls are recorded re-tokenised with the
	// tokenizer (forward.go). ForwardKey is its bearer token,
	// ForwardModel the model asked for (empty: the request's), and
	// ForwardClient the HTTP client (nil: one with a 10 minute timeout).
	Forward, ForwardKey, ForwardModel string
	ForwardClient                     *http.Client
}

// Defaults returns 1024-token replies, 4 MiB bodies, 4096 sessions of at
// most 4096 calls, 64 sessions and 256 MiB per client, 2 GiB in all,
// 2048 messages and 32768 prompt tokens per call, 65536 finished
// trajectories and a poll every second.
func (Options) Defaults() Options {
	return Options{Model: "omar", MaxTokens: 1024, MaxBodyBytes: 4 << 20, MaxSessions: 4096, MaxCalls: 4096,
		MaxClientSessions: 64, MaxClientBytes: 256 << 20, MaxBytes: 2 << 30, MaxMessages: 2048, MaxPromptTokens: 32768,
		MaxFinished: 65536, Poll: time.Second}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.Model == "" {
		errs = append(errs, errors.New("no model name"))
	}
	if o.Vocab < 1 {
		errs = append(errs, fmt.Errorf("vocabulary of %d tokens", o.Vocab))
	}
	if o.MaxTokens < 1 || o.MaxBodyBytes < 1 || o.MaxSessions < 1 || o.MaxCalls < 1 || o.MaxFinished < 1 {
		errs = append(errs, fmt.Errorf("max tokens %d, body %d, sessions %d, calls %d, finished %d: want all ≥ 1",
			o.MaxTokens, o.MaxBodyBytes, o.MaxSessions, o.MaxCalls, o.MaxFinished))
	}
	if o.MaxClientSessions < 1 || o.MaxClientBytes < 1 || o.MaxBytes < o.MaxClientBytes || o.MaxMessages < 1 || o.MaxPromptTokens < 1 {
		errs = append(errs, fmt.Errorf("max client sessions %d, client bytes %d, bytes %d, messages %d, prompt tokens %d: want all ≥ 1 and bytes ≥ client bytes",
			o.MaxClientSessions, o.MaxClientBytes, o.MaxBytes, o.MaxMessages, o.MaxPromptTokens))
	}
	if o.Poll < 0 {
		errs = append(errs, fmt.Errorf("poll %v < 0", o.Poll))
	}
	if err := o.forwardError(); err != nil {
		errs = append(errs, err)
	}
	if o.Secret != "" && len(o.Secret) < remote.MinSecretLen {
		errs = append(errs, fmt.Errorf("secret of %d bytes: want at least %d", len(o.Secret), remote.MinSecretLen))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("proxy: options: %w", err)
	}
	return nil
}

// Episodes is what the proxy needs of the engine's HTTP server to tie a
// session to a seat: remote.Client (holding the server's secret, which
// shows seeds) implements it. Events with the seat's token proves that
// the caller plays the seat; Episode gives its environment, seed and, at
// the end, the outcome.
type Episodes interface {
	Episode(ctx context.Context, id string) (remote.EpisodeInfo, error)
	Events(ctx context.Context, id string, seat int, token string, after int64, wait time.Duration) (remote.EventsPage, error)
}

// clientUsage is what one client's untied sessions hold.
type clientUsage struct {
	sessions int
	bytes    int64
}

// Stats count what the proxy did.
type Stats struct {
	Calls, Sessions, Segments, Evicted, Trajectories, Dropped int64
}

// Proxy is the OpenAI-compatible endpoint. It implements http.Handler.
type Proxy struct {
	backend  inference.Backend
	tok      inference.Tokenizer
	episodes Episodes
	opts     Options
	mux      *http.ServeMux
	version  func() int

	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu       sync.Mutex
	sessions map[string]*session
	tied     int                    // tied sessions in sessions
	clients  map[string]clientUsage // untied sessions' budget by client address
	bytes    int64                  // recorded by all sessions
	watching map[string]bool        // episodes with a watcher
	split    splitter
	finished []selfplay.Trajectory
	calls    uint64 // calls so far, for seeds
	ended    int    // episodes and sessions ended, for Trajectory.Episode
	stats    Stats

	// The template's end of a reply, for forwarded replies (endOfTurn).
	eotOnce sync.Once
	eot     []int32
	eotText string
	eotErr  error
}

// New returns a proxy that generates with b and tokenises with tok (the
// llama backend is both). episodes may be nil: calls cannot then be tied
// to engine seats. b may be nil when opts.Forward is set: completions
// calls are then refused.
func New(b inference.Backend, tok inference.Tokenizer, episodes Episodes, opts Options) (*Proxy, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if (b == nil && opts.Forward == "") || tok == nil {
		return nil, errors.New("proxy: no backend or tokenizer")
	}
	p := &Proxy{backend: b, tok: tok, episodes: episodes, opts: opts, mux: http.NewServeMux(),
		quit: make(chan struct{}), sessions: map[string]*session{}, clients: map[string]clientUsage{}, watching: map[string]bool{}}
	p.mux.HandleFunc("POST /v1/chat/completions", p.chat)
	p.mux.HandleFunc("POST /v1/completions", p.completions)
	p.mux.HandleFunc("GET /v1/models", p.models)
	p.mux.HandleFunc("GET /v1/omar/sessions", p.admin(p.listSessions))
	p.mux.HandleFunc("GET /v1/omar/sessions/{key}", p.admin(p.getSession))
	p.mux.HandleFunc("POST /v1/omar/sessions/{key}/reward", p.admin(p.rewardSession))
	p.mux.HandleFunc("POST /v1/omar/episodes/{id}/end", p.admin(p.endEpisodeHTTP))
	p.mux.HandleFunc("GET /v1/omar/trajectories", p.admin(p.drainTrajectories))
	return p, nil
}

// Close stops the episode watchers. It does not close the backend.
func (p *Proxy) Close() error {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
	return nil
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// writeError answers e in OpenAI's error shape.
func writeError(w http.ResponseWriter, e *APIError) {
	if e.Type == "" {
		e.Type = "invalid_request_error"
		if e.Status >= 500 {
			e.Type = "server_error"
		}
	}
	writeJSON(w, e.Status, ErrorBody{Error: e})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// bearer reports whether r carries want as its bearer token (in constant
// time).
func bearer(r *http.Request, want string) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(want)) == 1
}

func (p *Proxy) authorized(w http.ResponseWriter, r *http.Request) bool {
	if p.opts.APIKey != "" && !bearer(r, p.opts.APIKey) {
		writeError(w, &APIError{Status: http.StatusUnauthorized, Code: "invalid_api_key", Message: "missing or wrong API key (Authorization: Bearer …)"})
		return false
	}
	return true
}

func (p *Proxy) models(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": p.opts.Model, "object": "model", "created": 0, "owned_by": "omar"},
	}})
}

func (p *Proxy) chat(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(w, r) {
		return
	}
	var req ChatRequest
	if e := decodeRequest(http.MaxBytesReader(w, r.Body, p.opts.MaxBodyBytes), p.opts.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	pl, e := chatPlan(&req, &p.opts)
	if e != nil {
		writeError(w, e)
		return
	}
	if p.opts.Forward != "" {
		if pl.logprobs {
			writeError(w, badRequest("logprobs", "logprobs: this proxy forwards chat calls, and the upstream's logprobs are not of the policy's tokens"))
			return
		}
		pl.forward = &req
	}
	p.serve(w, r, pl)
}

func (p *Proxy) completions(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(w, r) {
		return
	}
	var req CompletionRequest
	if e := decodeRequest(http.MaxBytesReader(w, r.Body, p.opts.MaxBodyBytes), p.opts.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	pl, e := completionPlan(&req, &p.opts)
	if e != nil {
		writeError(w, e)
		return
	}
	if p.backend == nil {
		writeError(w, &APIError{Status: http.StatusBadRequest, Message: "this proxy forwards chat calls only: use /v1/chat/completions"})
		return
	}
	p.serve(w, r, pl)
}

// tieRequest is a call's claim to play an episode's seat.
type tieRequest struct {
	episode, token string
	seat           int
}

// sessionOf reads the call's session key and tie from its headers. A
// tied call's key is always its seat's (X-Omar-Session and user are not
// read): a seat has one session, and no other call can name it.
func sessionOf(r *http.Request, pl *plan) (key string, tie *tieRequest, e *APIError) {
	key = r.Header.Get(HeaderSession)
	if key == "" {
		key = pl.user
	}
	ep := r.Header.Get(HeaderEpisode)
	if ep == "" {
		if r.Header.Get(HeaderSeat) != "" || r.Header.Get(HeaderSeatToken) != "" {
			return "", nil, badRequest(HeaderEpisode, "%s and %s need %s", HeaderSeat, HeaderSeatToken, HeaderEpisode)
		}
		if key != "" {
			if e := validKey(key); e != nil {
				return "", nil, e
			}
		}
		return key, nil, nil
	}
	if len(ep) > maxKeyLen {
		return "", nil, badRequest(HeaderEpisode, "%s of %d bytes: at most %d", HeaderEpisode, len(ep), maxKeyLen)
	}
	seat, err := strconv.Atoi(r.Header.Get(HeaderSeat))
	if err != nil || seat < 0 {
		return "", nil, badRequest(HeaderSeat, "%s %q: want a seat index ≥ 0", HeaderSeat, r.Header.Get(HeaderSeat))
	}
	tok := r.Header.Get(HeaderSeatToken)
	if tok == "" {
		return "", nil, badRequest(HeaderSeatToken, "%s: a tie to a seat needs the seat's bearer token", HeaderSeatToken)
	}
	return tiedKey(ep, seat), &tieRequest{episode: ep, seat: seat, token: tok}, nil
}

// nextSeed is the seed of a call that gives none.
func (p *Proxy) nextSeed() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return seeds.Derive(p.opts.Seed, p.calls)
}

// serve runs one validated call and writes its answer.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, pl *plan) {
	key, tie, e := sessionOf(r, pl)
	if e != nil {
		writeError(w, e)
		return
	}
	if !pl.seedGiven {
		pl.sampling.Seed = p.nextSeed()
	}
	ctx := r.Context()
	var s *session
	if key != "" {
		client := clientOf(r)
		s, e = p.lockSession(ctx, func() (*session, *APIError) {
			if tie != nil {
				return p.tiedSession(ctx, key, tie)
			}
			return p.untiedSession(key, client)
		})
		if e != nil {
			writeError(w, e)
			return
		}
		if s == nil {
			return // the client went away while an earlier call of its session ran
		}
		defer p.unlockSession(s)
		if s.done {
			writeError(w, &APIError{Status: http.StatusConflict, Code: "session_done", Message: fmt.Sprintf("session %q has ended (its reward is attached); use a new key", key)})
			return
		}
		if len(s.calls) >= p.opts.MaxCalls {
			writeError(w, &APIError{Status: http.StatusTooManyRequests, Code: "session_full", Message: fmt.Sprintf("session %q has %d calls, the most one session may record", key, len(s.calls))})
			return
		}
	}
	var res *result
	if pl.forward != nil {
		res, e = p.forwardCall(ctx, s, pl)
	} else {
		res, e = p.generate(ctx, s, pl)
	}
	if e != nil {
		if ctx.Err() != nil {
			return
		}
		writeError(w, e)
		return
	}
	if pl.stream {
		p.writeStream(w, pl, res)
		return
	}
	if pl.chat {
		writeJSON(w, http.StatusOK, p.chatCompletion(pl, res))
	} else {
		writeJSON(w, http.StatusOK, p.completion(pl, res))
	}
}

// result is one generated reply with what the response needs.
type result struct {
	id      string
	created int64
	resp    inference.Response
	content string // the reply as the client sees it (specials removed, cut before a stop string)
	pieces  []string
	prompt  int // prompt tokens
	info    *CallInfo
	// calls are the tool calls read from content (nil: none), callText
	// the content besides them.
	calls    []ToolCall
	callText string
}

// generate renders and tokenises the call's prompt (extending its
// session's stream), generates, and records the call in s (nil: no
// session).
func (p *Proxy) generate(ctx context.Context, s *session, pl *plan) (*result, *APIError) {
	text, ids, isTokens := pl.prompt.Text, pl.prompt.Tokens, pl.prompt.IsTokens
	if pl.chat {
		var err error
		if text, err = inference.RenderChat(p.tok, pl.messages, inference.ChatOptions{AddAssistant: true, Thinking: pl.thinking}); err != nil {
			return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("chat template: %v", err)}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, &APIError{Status: http.StatusRequestTimeout, Message: "the client went away"}
	}
	tokenize := func(t string, addSpecial bool) ([]int32, error) { return p.tokenize(ctx, t, addSpecial) }
	var prompt []int32
	seg, fresh := 0, 0
	var err error
	if s != nil {
		prompt, seg, fresh, err = s.extend(text, ids, isTokens, tokenize)
	} else if isTokens {
		prompt, fresh = ids, len(ids)
	} else {
		prompt, err = tokenize(text, true)
		fresh = len(prompt)
	}
	if err != nil && ctx.Err() != nil {
		return nil, &APIError{Status: http.StatusRequestTimeout, Message: "the client went away"}
	}
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("tokenize: %v", err)}
	}
	if len(prompt) == 0 {
		return nil, badRequest("prompt", "the prompt has no tokens")
	}
	if len(prompt) > p.opts.MaxPromptTokens {
		param := "prompt"
		if pl.chat {
			param = "messages"
		}
		return nil, &APIError{Status: http.StatusBadRequest, Code: "prompt_too_long", Param: param,
			Message: fmt.Sprintf("the prompt has %d tokens (with its session's stream), over the %d a call may have", len(prompt), p.opts.MaxPromptTokens)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &APIError{Status: http.StatusRequestTimeout, Message: "the client went away"}
	}
	req := inference.Request{
		Prompt: prompt, MaxTokens: pl.maxTokens, Sampling: pl.sampling, Grammar: pl.grammar,
		Stop: pl.stop, Adapter: p.opts.Adapter, TopLogprobs: pl.top,
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = p.opts.MaxTokens
	}
	if s != nil {
		if e := p.admit(s, callBytes(len(prompt), fresh, req.MaxTokens)); e != nil {
			return nil, e
		}
		// One KV sequence per segment: its next call decodes only what
		// it appends.
		req.Key = "proxy/" + s.key + "#" + strconv.Itoa(seg)
	}
	started := time.Now()
	out, err := p.backend.Generate(ctx, []inference.Request{req})
	if err != nil {
		return nil, generateError(err, pl)
	}
	if len(out) != 1 {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("backend returned %d replies for 1 request", len(out))}
	}
	resp := out[0]
	if len(resp.Logprobs) != len(resp.Tokens) || len(resp.RawLogprobs) != len(resp.Tokens) {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: "backend returned no logprobs: it cannot serve a rollout proxy"}
	}
	pieces := make([]string, len(resp.Tokens))
	for i, t := range resp.Tokens {
		if pieces[i], err = p.tok.Detokenize([]int32{t}); err != nil {
			return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("detokenize: %v", err)}
		}
	}
	res := &result{
		id: newID(), created: started.Unix(), resp: resp, pieces: pieces, prompt: len(prompt),
		content: visible(resp, pl.stop),
		info:    &CallInfo{PolicyVersion: resp.PolicyVersion, Seed: pl.sampling.Seed},
	}
	if pl.parseTools && resp.Stop != inference.StopLength && resp.Stop != inference.StopFull {
		if text, calls, ok := parseToolCalls(res.content); ok {
			res.calls, res.callText = calls, text
		}
	}
	p.mu.Lock()
	p.stats.Calls++
	p.mu.Unlock()
	if s == nil {
		return res, nil
	}
	c := Call{
		Endpoint: "completions", Prompt: prompt, NewPrompt: fresh,
		Tokens: resp.Tokens, Logprobs: resp.Logprobs, RawLogprobs: resp.RawLogprobs,
		PolicyVersion: resp.PolicyVersion, Sampling: pl.sampling, MaxTokens: req.MaxTokens,
		Stop: resp.Stop, CachedTokens: resp.ReusedTokens, Started: started, Finished: time.Now(),
		ToolCalls: res.calls,
	}
	if pl.chat {
		c.Endpoint = "chat"
	}
	p.record(s, c, seg, text, isTokens, res)
	return res, nil
}

// record adds a generated call to s.
func (p *Proxy) record(s *session, c Call, seg int, text string, isTokens bool, res *result) {
	newSeg := seg == len(s.segments)
	// The reply's tokens beyond what the client sees: an end-of-turn
	// token or a stop string, rendered as text.
	tail := ""
	if all := strings.Join(res.pieces, ""); strings.HasPrefix(all, res.content) {
		tail = all[len(res.content):]
	}
	// The client renders a reply with calls from its fields, as the
	// template lays them out: the stream extends when that is the text.
	echo := res.content
	if res.calls != nil {
		echo = callsText(res.callText, res.calls)
	}
	s.record(c, seg, text, isTokens, echo, tail)
	p.grow(s, callBytes(len(c.Prompt), c.NewPrompt, len(c.Tokens)))
	if newSeg {
		p.mu.Lock()
		p.stats.Segments++
		p.mu.Unlock()
	}
	res.info.Session, res.info.Segment, res.info.Call = s.key, seg, len(s.calls)-1
}

// generateError maps a backend error to an answer: a prompt longer than
// the context is the caller's (400, OpenAI's context_length_exceeded), so
// is a grammar the backend could not use; anything else is the server's.
func generateError(err error, pl *plan) *APIError {
	switch {
	case errors.Is(err, inference.ErrContextFull):
		param := "prompt"
		if pl.chat {
			param = "messages"
		}
		return &APIError{Status: http.StatusBadRequest, Code: "context_length_exceeded", Param: param, Message: err.Error()}
	case pl.grammar != "":
		return &APIError{Status: http.StatusBadRequest, Param: "grammar", Message: fmt.Sprintf("the backend refused the request (check the grammar): %v", err)}
	}
	return &APIError{Status: http.StatusInternalServerError, Message: err.Error()}
}

// visible is the reply as a client sees it: the backend's text (special
// tokens render empty) cut before the first stop string, as OpenAI cuts.
func visible(resp inference.Response, stops []string) string {
	text := resp.Text
	if resp.Stop != inference.StopString {
		return text
	}
	cut := len(text)
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && i < cut {
			cut = i
		}
	}
	return text[:cut]
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}
