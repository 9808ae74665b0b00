package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/export"
	"github.com/omar-selfplay/omar/selfplay"
)

// ErrRunning is returned by EndEpisode for an episode that has not ended.
var ErrRunning = errors.New("proxy: the episode is still running")

// verifyTie asks the engine server whether t's token is the seat's, and
// returns the tie of a session that plays it. Nothing is created here: a
// call the engine refuses leaves no trace in the proxy.
func (p *Proxy) verifyTie(ctx context.Context, t *tieRequest) (*Tie, *APIError) {
	if p.episodes == nil {
		return nil, badRequest(HeaderEpisode, "this proxy serves no engine episodes: %s cannot be used", HeaderEpisode)
	}
	// The seat's view from past its end: answers at once, and only to the
	// seat's own token.
	if _, err := p.episodes.Events(ctx, t.episode, t.seat, t.token, 1<<62, 0); err != nil {
		var se *remote.StatusError
		if errors.As(err, &se) && se.Code/100 == 4 {
			return nil, &APIError{Status: http.StatusForbidden, Code: "seat_token", Param: HeaderSeatToken,
				Message: fmt.Sprintf("episode %s seat %d: the engine server refused the seat token: %s", t.episode, t.seat, se.Message)}
		}
		return nil, &APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf("engine server: %v", err)}
	}
	info, err := p.episodes.Episode(ctx, t.episode)
	if err != nil {
		return nil, &APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf("engine server: %v", err)}
	}
	if info.Status != "running" {
		return nil, &APIError{Status: http.StatusConflict, Code: "session_tied", Param: HeaderEpisode,
			Message: fmt.Sprintf("episode %s has ended (%s): no call can join it", t.episode, info.Status)}
	}
	if t.seat >= len(info.Seats) {
		return nil, badRequest(HeaderSeat, "episode %s has %d seats, not seat %d", t.episode, len(info.Seats), t.seat)
	}
	tie := &Tie{Episode: t.episode, Seat: t.seat, SeatName: info.Seats[t.seat].Name, Env: info.Env, token: t.token}
	if info.Seed != nil {
		tie.Seed = *info.Seed
	}
	if p.opts.Games != nil {
		if g, err := p.opts.Games(info.Env); err == nil {
			if specs, err := g.Seats(nil); err == nil && t.seat < len(specs) {
				tie.Role = specs[t.seat].Role
			}
		}
	}
	return tie, nil
}

// watchEpisode starts the watcher of an episode once; p.mu is held.
func (p *Proxy) watchEpisode(id string) {
	if p.opts.Poll <= 0 || p.watching[id] {
		return
	}
	p.watching[id] = true
	p.wg.Add(1)
	go p.watch(id)
}

// watch polls an episode until it ends, then buffers its sessions'
// trajectories.
func (p *Proxy) watch(id string) {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(p.opts.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		info, err := p.episodes.Episode(ctx, id)
		var se *remote.StatusError
		if errors.As(err, &se) && se.Code == http.StatusNotFound {
			// The server forgot the episode: its reward is lost.
			info = remote.EpisodeInfo{ID: id, Status: "failed", Error: "the engine server no longer has the episode"}
		} else if err != nil || info.Status == "running" {
			continue
		}
		trajs, err := p.endEpisode(ctx, info)
		if err != nil {
			return
		}
		p.buffer(trajs)
		p.mu.Lock()
		delete(p.watching, id)
		p.mu.Unlock()
		return
	}
}

// EndEpisode attaches the outcome of a finished episode to the sessions
// tied to its seats and returns their trajectories (not buffered for
// Trajectories). A session ends once: a second call, or the watcher,
// finds nothing more. ErrRunning: the episode has not ended.
func (p *Proxy) EndEpisode(ctx context.Context, id string) ([]selfplay.Trajectory, error) {
	if p.episodes == nil {
		return nil, errors.New("proxy: no engine server")
	}
	info, err := p.episodes.Episode(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Status == "running" {
		return nil, ErrRunning
	}
	return p.endEpisode(ctx, info)
}

func (p *Proxy) endEpisode(ctx context.Context, info remote.EpisodeInfo) ([]selfplay.Trajectory, error) {
	p.mu.Lock()
	var tied []*session
	for _, s := range p.sessions {
		if s.tie != nil && s.tie.Episode == info.ID {
			tied = append(tied, s)
		}
	}
	p.mu.Unlock()
	// Sorted by seat: the same episode gives the same order.
	slices.SortFunc(tied, func(a, b *session) int { return a.tie.Seat - b.tie.Seat })
	var out []selfplay.Trajectory
	index := -1
	for _, s := range tied {
		if err := s.acquire(ctx); err != nil {
			return out, err
		}
		if !s.done {
			s.done = true
			if info.Status == "done" && info.Outcome != nil && s.tie.Seat < len(info.Outcome.Rewards) {
				r := info.Outcome.Rewards[s.tie.Seat]
				s.reward = &r
				if index < 0 {
					index = p.episodeIndex()
				}
				out = append(out, s.trajectories(r, index)...)
			} else {
				p.mu.Lock()
				p.stats.Dropped += int64(len(s.segments))
				p.mu.Unlock()
			}
		}
		s.release()
	}
	return out, nil
}

// episodeIndex numbers the ended episodes and rewarded sessions: the
// Trajectory.Episode of their trajectories.
func (p *Proxy) episodeIndex() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended++
	return p.ended - 1
}

// Reward ends a session that no episode ties, with reward for every
// segment, and returns its trajectories (not buffered).
func (p *Proxy) Reward(ctx context.Context, key string, reward float64) ([]selfplay.Trajectory, error) {
	p.mu.Lock()
	s := p.sessions[key]
	p.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("proxy: no session %q", key)
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	switch {
	case s.tie != nil:
		return nil, fmt.Errorf("proxy: session %q is tied to episode %s: its reward comes from the episode", key, s.tie.Episode)
	case s.done:
		return nil, fmt.Errorf("proxy: session %q has already ended", key)
	}
	s.done, s.reward = true, &reward
	return s.trajectories(reward, p.episodeIndex()), nil
}

// buffer keeps trajectories for Trajectories, dropping the oldest beyond
// MaxFinished.
func (p *Proxy) buffer(trajs []selfplay.Trajectory) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = append(p.finished, trajs...)
	p.stats.Trajectories += int64(len(trajs))
	if over := len(p.finished) - p.opts.MaxFinished; over > 0 {
		p.finished = slices.Delete(p.finished, 0, over)
		p.stats.Dropped += int64(over)
	}
}

// Trajectories returns and forgets the trajectories of sessions that
// ended since the last call (watched episodes and the management API's
// rewards).
func (p *Proxy) Trajectories() []selfplay.Trajectory {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.finished
	p.finished = nil
	return out
}

// Session returns a copy of a session's record.
func (p *Proxy) Session(ctx context.Context, key string) (SessionRecord, error) {
	p.mu.Lock()
	s := p.sessions[key]
	p.mu.Unlock()
	if s == nil {
		return SessionRecord{}, fmt.Errorf("proxy: no session %q", key)
	}
	if err := s.acquire(ctx); err != nil {
		return SessionRecord{}, err
	}
	defer s.release()
	return s.snapshot(), nil
}

// WriteParquet writes trajectories as Parquet with package export's
// trajectory schema (docs/datasets.md), streaming them through its
// writer.
func WriteParquet(ctx context.Context, w io.Writer, trajs []selfplay.Trajectory) error {
	pr, pw := io.Pipe()
	go func() {
		tw := selfplay.NewTrajectoryWriter(pw)
		var err error
		for i := range trajs {
			if err = tw.Write(&trajs[i]); err != nil {
				break
			}
		}
		if err == nil {
			err = tw.Flush()
		}
		pw.CloseWithError(err)
	}()
	_, err := export.Export(ctx, pr, w, export.Options{Format: export.Parquet, Kind: export.Trajectories})
	pr.Close() // unblocks the writer if Export stopped early
	if err != nil {
		return fmt.Errorf("proxy: parquet: %w", err)
	}
	return nil
}

// admin wraps a management handler: it needs Options.Secret.
func (p *Proxy) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p.opts.Secret == "" {
			writeError(w, &APIError{Status: http.StatusForbidden, Message: "the management API is disabled (the proxy has no secret)"})
			return
		}
		if !bearer(r, p.opts.Secret) {
			writeError(w, &APIError{Status: http.StatusUnauthorized, Message: "the management API needs the server's secret as the bearer token"})
			return
		}
		h(w, r)
	}
}

func (p *Proxy) listSessions(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		Key   string `json:"key"`
		Tie   *Tie   `json:"tie,omitempty"`
		Calls int    `json:"calls"`
		Done  bool   `json:"done"`
	}
	p.mu.Lock()
	all := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		all = append(all, s)
	}
	p.mu.Unlock()
	slices.SortFunc(all, func(a, b *session) int { return cmpString(a.key, b.key) })
	out := make([]entry, 0, len(all))
	for _, s := range all {
		if s.acquire(r.Context()) != nil {
			return
		}
		e := entry{Key: s.key, Tie: s.tie, Calls: len(s.calls), Done: s.done}
		s.release()
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (p *Proxy) getSession(w http.ResponseWriter, r *http.Request) {
	rec, err := p.Session(r.Context(), r.PathValue("key"))
	if err != nil {
		writeError(w, &APIError{Status: http.StatusNotFound, Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (p *Proxy) rewardSession(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Reward *float64 `json:"reward"`
	}
	if e := decodeRequest(http.MaxBytesReader(w, r.Body, p.opts.MaxBodyBytes), p.opts.MaxBodyBytes, &body); e != nil {
		writeError(w, e)
		return
	}
	if body.Reward == nil {
		writeError(w, badRequest("reward", "reward: missing"))
		return
	}
	trajs, err := p.Reward(r.Context(), r.PathValue("key"), *body.Reward)
	if err != nil {
		writeError(w, &APIError{Status: http.StatusConflict, Message: err.Error()})
		return
	}
	p.buffer(trajs)
	writeJSON(w, http.StatusOK, map[string]int{"trajectories": len(trajs)})
}

func (p *Proxy) endEpisodeHTTP(w http.ResponseWriter, r *http.Request) {
	trajs, err := p.EndEpisode(r.Context(), r.PathValue("id"))
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, ErrRunning) {
			code = http.StatusConflict
		}
		writeError(w, &APIError{Status: code, Message: err.Error()})
		return
	}
	p.buffer(trajs)
	writeJSON(w, http.StatusOK, map[string]int{"trajectories": len(trajs)})
}

// drainTrajectories answers the buffered trajectories as JSONL, or as
// Parquet with ?format=parquet, and forgets them.
func (p *Proxy) drainTrajectories(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if format != "" && format != "jsonl" && format != "parquet" {
		writeError(w, badRequest("format", "format %q: want jsonl or parquet", format))
		return
	}
	trajs := p.Trajectories()
	var err error
	if format == "parquet" {
		w.Header().Set("Content-Type", "application/vnd.apache.parquet")
		err = WriteParquet(r.Context(), w, trajs)
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for i := range trajs {
			if err = enc.Encode(&trajs[i]); err != nil {
				break
			}
		}
	}
	if err != nil {
		// The client got a truncated body (its headers are gone): keep
		// the trajectories for the next drain rather than lose them.
		p.requeue(trajs)
	}
}

// requeue puts drained trajectories back in front of the buffer.
func (p *Proxy) requeue(trajs []selfplay.Trajectory) {
	p.mu.Lock()
	p.finished = append(trajs, p.finished...)
	p.mu.Unlock()
	p.buffer(nil)
}
