// Package remote is the engine's HTTP transport: a server that runs
// episodes and lets remote agents read their seat's events with a cursor
// (long-poll) and submit actions, and a client that plays a seat with any
// engine.Agent and resumes from its cursor after a disconnect.
//
// Creating and listing episodes needs the server's secret (a bearer
// token); every seat gets a bearer token when its episode is created; a
// token reads only its own seat's view and acts only for that seat. An
// observer token reads the omniscient log. An episode's seed deals its
// hidden state (a werewolf game's roles), so only the secret's holder
// ever sees it: anyone else could replay the seed locally and read every
// hidden role. The secret's holder is the creator of every episode: it
// also reads any episode's omniscient log and seat views with the secret
// and gets the tokens back from GET /v1/episodes/{id} (the web page of
// package web lives on that). Episode ids are random (crypto/rand), so
// nobody can enumerate them, and GET /v1/episodes/{id} shows the outcome
// only to a token of the episode or the secret (docs/security.md).
package remote

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/engine"
)

// ServerOptions tune the server.
type ServerOptions struct {
	// MaxBodyBytes bounds request bodies.
	MaxBodyBytes int64
	// MaxWait bounds a long-poll.
	MaxWait time.Duration
	// ActionTimeout bounds how long a remote seat may take to answer a
	// notification; then the inert default is applied.
	ActionTimeout time.Duration
	// MaxRetries is the runtime's retry budget for invalid actions.
	MaxRetries int
	// MaxEpisodes bounds the episodes kept in memory.
	MaxEpisodes int
	// MaxPerClient bounds the running episodes one client (one remote
	// IP address) may have created, so that no client fills the server.
	MaxPerClient int
	// Secret is the bearer token that creates and lists episodes (and
	// reveals their seeds). Empty: NewServer draws a random one (see
	// Server.Secret).
	Secret string
	// Catalog lists the environments GET /v1/envs describes (the web
	// page's create form); nil lists none. Creating still resolves ids
	// with the server's find function.
	Catalog []engine.Game
	// Agents plays the seats whose agent name is neither "remote" nor a
	// scripted policy (a model, an adapter, an Ollama model); nil: none.
	Agents Agents
	// Finished, when set, receives the record of each episode that ends
	// (not of one that fails), from the goroutine that played it: omar
	// serve --save appends it to the records file.
	Finished func(*engine.Record)
}

// Me is the agent name of a remote seat that the episode's creator plays
// itself (the web page's "me"): a remote seat like any other, labelled
// "me" in the episode's info and record, so that a list of episodes tells
// the seats a person played here from those handed out by link.
const Me = "me"

// Agents resolves agent names beyond "remote" and the scripted policies.
type Agents interface {
	// Names lists the names Agent takes (for GET /v1/envs).
	Names() []string
	// Agent returns the agent of one seat of a new episode of g dealt
	// from seed, and its label in the record, or an error for a name it
	// does not know. episode keeps the sequences of different episodes
	// apart (a model backend's cache keys).
	Agent(name string, g engine.Game, seat engine.Seat, seed uint64, episode string) (engine.Agent, string, error)
}

// MinSecretLen is the shortest secret a server accepts.
const MinSecretLen = 16

// Defaults returns 64 KiB bodies, 30 s long-polls, 120 s per action, two
// retries, 1000 episodes, 32 running per client and a random secret.
func (ServerOptions) Defaults() ServerOptions {
	return ServerOptions{MaxBodyBytes: 64 << 10, MaxWait: 30 * time.Second, ActionTimeout: 120 * time.Second, MaxRetries: 2, MaxEpisodes: 1000, MaxPerClient: 32}
}

// Validate checks o.
func (o ServerOptions) Validate() error {
	var errs []error
	if o.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("max body %d bytes ≤ 0", o.MaxBodyBytes))
	}
	if o.MaxWait <= 0 || o.ActionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("max wait %v and action timeout %v: want both > 0", o.MaxWait, o.ActionTimeout))
	}
	if o.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("max retries %d < 0", o.MaxRetries))
	}
	if o.MaxEpisodes <= 0 || o.MaxPerClient <= 0 {
		errs = append(errs, fmt.Errorf("max episodes %d and max per client %d: want both > 0", o.MaxEpisodes, o.MaxPerClient))
	}
	if o.Secret != "" && len(o.Secret) < MinSecretLen {
		errs = append(errs, fmt.Errorf("secret of %d bytes: want at least %d (or none for a random one)", len(o.Secret), MinSecretLen))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remote: server options: %w", err)
	}
	return nil
}

// CreateRequest is the body of POST /v1/episodes.
type CreateRequest struct {
	Env string `json:"env"`
	// Seed deals the episode; nil draws a random one (returned to the
	// creator in EpisodeInfo.Seed).
	Seed   *uint64       `json:"seed,omitempty"`
	Params engine.Params `json:"params,omitempty"`
	// Agents names each seat's agent: "remote" (the default), a scripted
	// policy ("scripted" for the game's default, or "scripted:NAME") or
	// one of ServerOptions.Agents' names.
	Agents []string `json:"agents,omitempty"`
}

// SeatInfo is a seat as the creator learns it: roles stay hidden.
type SeatInfo struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Agent string `json:"agent"`
	Token string `json:"token,omitempty"`
}

// EpisodeInfo describes an episode.
type EpisodeInfo struct {
	ID  string `json:"id"`
	Env string `json:"env"`
	// Seed is shown only to the secret's holder (the creator): it deals
	// every hidden role and private value.
	Seed *uint64 `json:"seed,omitempty"`
	// Params are the parameters the episode was created with (none: the
	// game's defaults); with the seed they deal the episode again.
	Params engine.Params `json:"params,omitempty"`
	Status string        `json:"status"` // "running", "done" or "failed"
	Error  string        `json:"error,omitempty"`
	Seats  []SeatInfo    `json:"seats"`
	// ObserverToken reads the omniscient log; only the creator gets it.
	ObserverToken string          `json:"observer_token,omitempty"`
	Outcome       *engine.Outcome `json:"outcome,omitempty"`
}

// EventsPage is the answer of GET /v1/episodes/{id}/events.
type EventsPage struct {
	Events []engine.Event `json:"events"`
	// Next is the cursor for the next request (the last sequence number
	// returned, or the request's cursor when nothing was).
	Next int64 `json:"next"`
	// Done reports that the episode is over and no event will follow.
	Done bool `json:"done"`
}

// ActionRequest is the body of POST /v1/episodes/{id}/actions.
type ActionRequest struct {
	NotificationID string `json:"notification_id"`
	Action         string `json:"action"`
}

// ActionResult answers an action: "ack" or "validation_error".
type ActionResult struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// ErrorBody is the JSON body of every 4xx/5xx answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// Server runs episodes for remote agents. It implements http.Handler.
type Server struct {
	find func(id string) (engine.Game, error)
	opts ServerOptions
	mux  *http.ServeMux
	ctx  context.Context

	mu       sync.Mutex
	episodes map[string]*episode
	order    []string
}

type episode struct {
	info     EpisodeInfo
	client   string // remote address of the creator, for MaxPerClient
	game     engine.Game
	tokens   map[string]int // token -> seat, -1 for the observer
	boxes    []*mailbox     // nil for scripted seats
	log      *engine.Log
	ready    chan struct{} // closed once log is set
	finished chan struct{}
	record   *engine.Record // set when the episode is done, under Server.mu
}

// NewServer returns a server whose episodes live until ctx is done. find
// resolves an environment id.
func NewServer(ctx context.Context, find func(id string) (engine.Game, error), opts ServerOptions) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Secret == "" {
		opts.Secret = newToken()
	}
	s := &Server{find: find, opts: opts, mux: http.NewServeMux(), ctx: ctx, episodes: map[string]*episode{}}
	s.mux.HandleFunc("POST /v1/episodes", s.create)
	s.mux.HandleFunc("GET /v1/episodes", s.list)
	s.mux.HandleFunc("GET /v1/envs", s.envs)
	s.mux.HandleFunc("GET /v1/envs/{id}", s.env)
	s.mux.HandleFunc("GET /v1/episodes/{id}", s.get)
	s.mux.HandleFunc("GET /v1/episodes/{id}/events", s.events)
	s.mux.HandleFunc("POST /v1/episodes/{id}/actions", s.act)
	s.mux.HandleFunc("GET /v1/episodes/{id}/record", s.record)
	return s, nil
}

// Secret returns the bearer token that creates and lists episodes.
func (s *Server) Secret() string { return s.opts.Secret }

// isCreator reports whether r carries the server's secret. The comparison
// takes the same time wherever the tokens differ.
func (s *Server) isCreator(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.opts.Secret)) == 1
}

// clientOf is the remote IP address of r (the port changes per
// connection).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// randomSeed draws a seed nobody can predict.
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux
	return binary.LittleEndian.Uint64(b[:])
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, ErrorBody{Error: fmt.Sprintf(format, args...)})
}

// decodeBody decodes a JSON body strictly (unknown fields, trailing data
// and oversize bodies are errors) and writes the 4xx itself on failure.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	if err := DecodeStrict(r.Body, v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "request body larger than %d bytes", s.opts.MaxBodyBytes)
		} else {
			fail(w, http.StatusBadRequest, "bad request body: %v", err)
		}
		return false
	}
	return true
}

// newEpisodeID draws an episode id nobody can guess: sequential ids let
// anyone enumerate episodes and name a future one's seats (docs/security.md).
// Ids are names only: no seed or game content derives from them.
func newEpisodeID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return "ep-" + hex.EncodeToString(b)
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.isCreator(r) {
		fail(w, http.StatusUnauthorized, "creating episodes needs the server's secret as the bearer token")
		return
	}
	var req CreateRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	g, err := s.find(req.Env)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	seed := randomSeed()
	if req.Seed != nil {
		seed = *req.Seed
	}
	ep, err := g.NewEpisode(seed, req.Params)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	seats := ep.Seats()
	if len(req.Agents) > 1 && len(req.Agents) != len(seats) {
		fail(w, http.StatusBadRequest, "%d agents for %d seats", len(req.Agents), len(seats))
		return
	}
	e := &episode{
		game: g, tokens: map[string]int{}, boxes: make([]*mailbox, len(seats)),
		ready: make(chan struct{}), finished: make(chan struct{}),
		client: clientOf(r),
		info:   EpisodeInfo{Env: g.ID(), Seed: &seed, Params: req.Params, Status: "running"},
	}
	id := newEpisodeID()
	agents, err := s.castSeats(e, g, seats, req.Agents, seed, id)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	e.info.ObserverToken = newToken()
	e.tokens[e.info.ObserverToken] = -1
	created, code, err := s.register(e, id)
	if err != nil {
		fail(w, code, "%v", err)
		return
	}
	go s.play(e, seed, req.Params, agents, seats)
	writeJSON(w, http.StatusCreated, created)
}

// castSeats gives each seat of e its agent, as named by the request, and
// its token, recording both in e.info.Seats.
func (s *Server) castSeats(e *episode, g engine.Game, seats []engine.Seat, names []string, seed uint64, id string) ([]engine.Agent, error) {
	agents := make([]engine.Agent, len(seats))
	for i, seat := range seats {
		name := "remote"
		if len(names) == 1 {
			name = names[0]
		} else if len(names) > 1 {
			name = names[i]
		}
		info := SeatInfo{Index: i, Name: seat.Name, Agent: name}
		a, label, err := s.seatAgent(e, g, i, seat, name, seed, id)
		if err != nil {
			return nil, fmt.Errorf("seat %d: %w", i, err)
		}
		agents[i], info.Agent = a, label
		info.Token = newToken()
		e.tokens[info.Token] = i
		e.info.Seats = append(e.info.Seats, info)
	}
	return agents, nil
}

// seatAgent is the agent named name for seat i, with its label: a remote
// player's mailbox ("remote" or ""), one of ServerOptions.Agents, or a
// scripted policy.
func (s *Server) seatAgent(e *episode, g engine.Game, i int, seat engine.Seat, name string, seed uint64, id string) (engine.Agent, string, error) {
	if name == "remote" || name == "" || name == Me {
		e.boxes[i] = newMailbox()
		return e.boxes[i], cmp.Or(name, "remote"), nil
	}
	if s.opts.Agents != nil && slices.Contains(s.opts.Agents.Names(), name) {
		return s.opts.Agents.Agent(name, g, seat, seed, id)
	}
	cast, err := engine.ScriptedCast(g, []string{name}, seed)
	if err != nil {
		return nil, "", err
	}
	return cast(seat)
}

// register adds e to the server under id, unless its client or the server
// is at its limit (then it returns the status to answer and why). It
// returns e.info as it is now: an episode of scripted seats can finish
// (and write e.info under s.mu) before the answer is written.
func (s *Server) register(e *episode, id string) (EpisodeInfo, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.runningOf(e.client); n >= s.opts.MaxPerClient {
		return EpisodeInfo{}, http.StatusTooManyRequests, fmt.Errorf("client %s already has %d running episodes (the most per client)", e.client, n)
	}
	if len(s.order) >= s.opts.MaxEpisodes && !s.evictFinished() {
		return EpisodeInfo{}, http.StatusServiceUnavailable, fmt.Errorf("too many running episodes (%d)", s.opts.MaxEpisodes)
	}
	e.info.ID = id
	s.episodes[e.info.ID] = e
	s.order = append(s.order, e.info.ID)
	return e.info, 0, nil
}

// play runs episode e to its end with agents in its seats and records
// how it ended. e.ready is closed once its log exists, even on failure.
func (s *Server) play(e *episode, seed uint64, params engine.Params, agents []engine.Agent, seats []engine.Seat) {
	defer close(e.finished)
	cast := func(seat engine.Seat) (engine.Agent, string, error) {
		return agents[seat.Index], e.info.Seats[seat.Index].Agent, nil
	}
	opts := engine.Options{MaxRetries: s.opts.MaxRetries, Timeout: s.opts.ActionTimeout}
	rec, err := engine.Play(s.ctx, e.game, seed, params, cast, opts, func(rt *engine.Runtime) {
		e.log = rt.Log()
		close(e.ready)
	})
	if err == nil && s.opts.Finished != nil {
		// Before the episode reads as done, so that whoever sees it done
		// finds its record saved; outside s.mu, as the hook writes a file.
		s.opts.Finished(rec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		e.info.Status, e.info.Error = "failed", err.Error()
		select {
		case <-e.ready:
		default:
			e.log = engine.NewLog(seats)
			e.log.Close()
			close(e.ready)
		}
		return
	}
	e.info.Status = "done"
	e.info.Outcome = &rec.Outcome
	e.record = rec
}

// runningOf counts the running episodes client created; s.mu is held.
func (s *Server) runningOf(client string) int {
	n := 0
	for _, id := range s.order {
		if e := s.episodes[id]; e.client == client && e.info.Status == "running" {
			n++
		}
	}
	return n
}

// evictFinished drops the oldest finished episode; s.mu is held.
func (s *Server) evictFinished() bool {
	for i, id := range s.order {
		if s.episodes[id].info.Status != "running" {
			delete(s.episodes, id)
			s.order = append(s.order[:i], s.order[i+1:]...)
			return true
		}
	}
	return false
}

// public strips tokens from an episode's info, and its seed unless the
// reader holds the secret.
func (e *episode) public(creator bool) EpisodeInfo {
	info := e.info
	if !creator {
		info.Seed = nil
	}
	info.ObserverToken = ""
	info.Seats = make([]SeatInfo, len(e.info.Seats))
	for i, si := range e.info.Seats {
		si.Token = ""
		info.Seats[i] = si
	}
	return info
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	if !s.isCreator(r) {
		fail(w, http.StatusUnauthorized, "listing episodes needs the server's secret as the bearer token")
		return
	}
	s.mu.Lock()
	out := make([]EpisodeInfo, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.episodes[id].public(true))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"episodes": out})
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *episode {
	s.mu.Lock()
	e := s.episodes[r.PathValue("id")]
	s.mu.Unlock()
	if e == nil {
		fail(w, http.StatusNotFound, "no episode %q", r.PathValue("id"))
	}
	return e
}

// get answers an episode's info by what the caller holds: the secret gets
// everything (seed and tokens), a seat's or the observer's token gets the
// public info with the outcome, and a caller with no token only the
// status and seats — no outcome, no error text — so that nobody without a
// token of the episode learns how it ended. A token that is neither is
// refused.
// record answers the record of a finished episode (engine.Record: every
// event, the scenario with its private values) to the secret or the
// episode's observer token: a seat's token may not read it, as it holds
// the other seats' secrets.
func (s *Server) record(w http.ResponseWriter, r *http.Request) {
	e := s.lookup(w, r)
	if e == nil {
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if seat, ok := e.tokens[strings.TrimSpace(tok)]; !s.isCreator(r) && (!ok || seat != -1) {
		fail(w, http.StatusForbidden, "the record holds every seat's private information: it needs the server's secret or the episode's observer token")
		return
	}
	s.mu.Lock()
	rec, status := e.record, e.info.Status
	s.mu.Unlock()
	if rec == nil {
		fail(w, http.StatusConflict, "episode %s is %s: it has a record once it is done", e.info.ID, status)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	e := s.lookup(w, r)
	if e == nil {
		return
	}
	creator := s.isCreator(r)
	member := false
	if !creator {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if _, member = e.tokens[strings.TrimSpace(tok)]; !member {
				fail(w, http.StatusUnauthorized, "unknown bearer token for episode %s", e.info.ID)
				return
			}
		} else if r.Header.Get("Authorization") != "" {
			fail(w, http.StatusUnauthorized, "the Authorization header must be a bearer token")
			return
		}
	}
	// A closed log means the game has ended and its seats have been
	// told so; wait the moment until the outcome is recorded, so that
	// a client which saw "done" never reads the episode as running.
	select {
	case <-e.ready:
		if e.log.Closed() {
			select {
			case <-e.finished:
			case <-r.Context().Done():
			}
		}
	default:
	}
	s.mu.Lock()
	info := e.public(creator)
	if creator {
		// The secret's holder created the episode and had its tokens
		// already; a page reloaded by the creator takes them back.
		info.Seats, info.ObserverToken = slices.Clone(e.info.Seats), e.info.ObserverToken
	}
	s.mu.Unlock()
	if !creator && !member {
		info.Outcome, info.Error = nil, ""
	}
	writeJSON(w, http.StatusOK, info)
}

// authorize returns the seat of the request's bearer token (-1 for the
// observer) or writes 401.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, e *episode) (int, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	seat, known := e.tokens[strings.TrimSpace(tok)]
	if !ok || !known {
		fail(w, http.StatusUnauthorized, "missing or unknown bearer token for episode %s", e.info.ID)
		return 0, false
	}
	return seat, true
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	e := s.lookup(w, r)
	if e == nil {
		return
	}
	tokSeat := -1
	if !s.isCreator(r) {
		var ok bool
		if tokSeat, ok = s.authorize(w, r, e); !ok {
			return
		}
	}
	q, err := ParseEventsQuery(r.URL.Query(), len(e.info.Seats), s.opts.MaxWait)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if q.Seat != tokSeat && tokSeat != -1 {
		fail(w, http.StatusForbidden, "this token belongs to seat %d, not seat %d", tokSeat, q.Seat)
		return
	}
	select {
	case <-e.ready:
	case <-r.Context().Done():
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), q.Wait)
	defer cancel()
	evs, done, err := e.log.Wait(ctx, q.Seat, q.After)
	if err != nil && r.Context().Err() != nil {
		return // the client went away
	}
	page := EventsPage{Events: evs, Next: q.After, Done: done}
	if page.Events == nil {
		page.Events = []engine.Event{}
	}
	if n := len(evs); n > 0 {
		page.Next = evs[n-1].Seq
	}
	writeJSON(w, http.StatusOK, page)
}

// env describes one environment of the catalog for the parameters of the
// query's params (a JSON object; none: the defaults): its seats for them,
// or 400 with the game's reason when it does not take them. The page's
// form asks it as a person changes a parameter.
func (s *Server) env(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	i := slices.IndexFunc(s.opts.Catalog, func(g engine.Game) bool {
		name, _ := engine.SplitID(g.ID())
		return g.ID() == id || name == id
	})
	if i < 0 {
		fail(w, http.StatusNotFound, "no environment %q in the catalog", id)
		return
	}
	var p engine.Params
	if q := r.URL.Query().Get("params"); q != "" {
		if err := json.Unmarshal([]byte(q), &p); err != nil {
			fail(w, http.StatusBadRequest, "params: not a JSON object: %v", err)
			return
		}
	}
	info, err := envInfo(s.opts.Catalog[i], p)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// envInfo describes g with its seats for p.
func envInfo(g engine.Game, p engine.Params) (EnvInfo, error) {
	seats, err := g.Seats(p)
	if err != nil {
		return EnvInfo{}, err
	}
	info := EnvInfo{ID: g.ID(), Description: g.Description(), Seats: seats}
	for _, pol := range g.Policies() {
		info.Policies = append(info.Policies, pol.Name)
	}
	if d, ok := g.(engine.ParamDefaulter); ok {
		info.Params = d.DefaultParams()
	}
	return info, nil
}

func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	e := s.lookup(w, r)
	if e == nil {
		return
	}
	seat, ok := s.authorize(w, r, e)
	if !ok {
		return
	}
	if seat < 0 || e.boxes[seat] == nil {
		fail(w, http.StatusForbidden, "this token cannot act: the seat is not played remotely")
		return
	}
	var req ActionRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.NotificationID == "" {
		fail(w, http.StatusBadRequest, "notification_id is required")
		return
	}
	announced := func() bool { return openInLog(e.log.View(seat)) == req.NotificationID }
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	<-e.ready
	res, err := e.boxes[seat].submitWait(ctx, engine.Action{NotificationID: req.NotificationID, Text: req.Action}, announced)
	if err != nil {
		fail(w, http.StatusConflict, "%v", err)
		return
	}
	if res.Status != "ack" {
		writeJSON(w, http.StatusUnprocessableEntity, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// openInLog returns the id of the seat's notification that no ack,
// validation error or default has closed yet, or "".
func openInLog(view []engine.Event) string {
	if n := openNotification(view); n != nil {
		return n.NotificationID
	}
	return ""
}

// EnvInfo describes an environment for clients that create episodes.
type EnvInfo struct {
	ID          string            `json:"id"`
	Description string            `json:"description"`
	Seats       []engine.SeatSpec `json:"seats"`
	// Policies are the scripted policies, the default first.
	Policies []string `json:"policies"`
	// Params are the game's parameters with their defaults, for a game
	// that lists them (engine.ParamDefaulter); a create request may give
	// any of them.
	Params engine.Params `json:"params,omitempty"`
}

// EnvsPage is the answer of GET /v1/envs.
type EnvsPage struct {
	Envs []EnvInfo `json:"envs"`
	// Agents are the agent names a create request may give a seat:
	// "remote", "scripted" and the server's other agents (scripted:NAME
	// are in each environment's Policies).
	Agents []string `json:"agents"`
}

// envs describes the catalog. Environments are public knowledge (the
// same binary lists them with omar envs), so no token is needed.
func (s *Server) envs(w http.ResponseWriter, r *http.Request) {
	page := EnvsPage{Envs: []EnvInfo{}, Agents: []string{"remote", Me, "scripted"}}
	if s.opts.Agents != nil {
		page.Agents = append(page.Agents, s.opts.Agents.Names()...)
	}
	for _, g := range s.opts.Catalog {
		info, err := envInfo(g, nil)
		if err != nil {
			fail(w, http.StatusInternalServerError, "%s: %v", g.ID(), err)
			return
		}
		page.Envs = append(page.Envs, info)
	}
	writeJSON(w, http.StatusOK, page)
}
