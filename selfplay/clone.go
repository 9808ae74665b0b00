package selfplay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
)

// ErrReplayDiverged is returned (wrapped) by Clone when replaying a record's
// actions does not reproduce its events: the game changed since it was
// recorded, or the record was edited.
var ErrReplayDiverged = errors.New("selfplay: the replay diverged from the record")

// Clone turns a recorded episode into behaviour-cloning trajectories: it
// replays the record's actions through the game and renders each seat in
// seats (nil: every seat) exactly as a model seat of p would have seen it
// in self-play with opts — the same chat template, the same append-only
// stream, the same segments — with the seat's recorded replies in place of
// sampled ones. A reply is its action text tokenised (special-token text
// stays plain text) and closed by the template's end-of-turn token, and is
// masked as generated, so a trainer learns the replies with the prompts as
// context. Logprobs are 0 (nothing was sampled).
//
// The episode index and scenario of the trajectories are idx and the
// record's env#idx. A record whose replay does not reproduce its events
// returns ErrReplayDiverged; a reply longer than opts.MaxTokens is an
// error too, since a model seat could never have written it.
func Clone(ctx context.Context, g engine.Game, rec *engine.Record, idx int, p *Player, opts Options, seats []int) ([]Trajectory, error) {
	if p == nil || p.Tokenizer == nil {
		return nil, errors.New("selfplay: clone needs a token-level player (a tokenizer)")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if rec.Env != g.ID() {
		return nil, fmt.Errorf("selfplay: clone: record of %s, game %s", rec.Env, g.ID())
	}
	replyTokens, err := ReplyTokenizer(p.Tokenizer)
	if err != nil {
		return nil, err
	}
	replies := map[string][]string{} // notification id → action texts in order
	for _, e := range rec.Events {
		if e.Kind == engine.KindAction {
			replies[e.NotificationID] = append(replies[e.NotificationID], e.Text)
		}
	}
	// Seats asked together (ask_all) act concurrently.
	var mu sync.Mutex
	next := func(id string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		q := replies[id]
		if len(q) == 0 {
			return "", false
		}
		replies[id] = q[1:]
		return q[0], true
	}
	var st stats
	run := &episodeRun{
		opts: &opts, stats: &st, key: "clone", env: g.ID(), index: idx, seed: rec.Seed,
		scenario: fmt.Sprintf("%s#%d", g.ID(), idx), samplingSeed: seeds.Derive(opts.Seed, 1, uint64(idx)),
	}
	pending := map[*Player]*string{}
	run.gen = generator{
		prepare: func(*Player) {}, unprepare: func(*Player) {},
		intercepts: func(*Player) bool { return true }, count: func(int, int) {},
		generate: func(_ context.Context, _ int, sp *Player, req inference.Request) (inference.Response, error) {
			text := pending[sp]
			ids, err := replyTokens(*text)
			if err != nil {
				return inference.Response{}, err
			}
			if len(ids) > req.MaxTokens {
				return inference.Response{}, fmt.Errorf("selfplay: clone: reply %q is %d tokens, more than max tokens %d", *text, len(ids), req.MaxTokens)
			}
			zeros := make([]float32, len(ids))
			return inference.Response{Tokens: ids, Logprobs: zeros, RawLogprobs: zeros, Text: *text, Stop: inference.StopEOG}, nil
		},
	}
	run.moves = &moves{gen: run.gen, episode: idx}
	var kept []*modelSeat
	cast := func(s engine.Seat) (engine.Agent, string, error) {
		label := ""
		if s.Index < len(rec.Seats) {
			label = rec.Seats[s.Index].Agent
		}
		replay := engine.AgentFunc(func(_ context.Context, t engine.Turn) (engine.Action, error) {
			text, ok := next(t.Notification.ID)
			if !ok {
				// The recorded seat gave no reply: it timed out.
				return engine.Action{}, engine.ErrTimeout
			}
			return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
		})
		if seats != nil && !slices.Contains(seats, s.Index) {
			return replay, label, nil
		}
		sp := &Player{Label: p.Label, Backend: p.Backend, Tokenizer: p.Tokenizer}
		var text string
		pending[sp] = &text
		ms := newModelSeat(run, sp, s, true)
		kept = append(kept, ms)
		return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
			reply, ok := next(t.Notification.ID)
			if !ok {
				return engine.Action{}, engine.ErrTimeout
			}
			text = reply
			a, err := ms.Act(ctx, t)
			if err == nil && a.Text != reply {
				return a, fmt.Errorf("selfplay: clone: reply %q does not survive tokenisation (%q)", reply, a.Text)
			}
			return a, err
		}), label, nil
	}
	got, err := engine.Play(ctx, g, rec.Seed, rec.Params, cast, opts.Engine, nil)
	if err != nil {
		return nil, fmt.Errorf("selfplay: clone episode %d: %w", idx, err)
	}
	if err := sameEvents(got.Events, rec.Events); err != nil {
		return nil, fmt.Errorf("%w (episode %d): %v", ErrReplayDiverged, idx, err)
	}
	var out []Trajectory
	for _, ms := range kept {
		trajs := ms.trajectories(rec.Outcome.Rewards[ms.seat.Index])
		for k := range trajs {
			trajs[k].meta = nil
		}
		out = append(out, trajs...)
	}
	return out, nil
}

// ReplyTokenizer returns what Clone renders a reply text as with tok: the
// text tokenised (special-token text stays plain text) and closed by the
// chat template's end-of-turn token.
func ReplyTokenizer(tok inference.Tokenizer) (func(text string) ([]int32, error), error) {
	eot, err := endOfTurn(tok)
	if err != nil {
		return nil, err
	}
	return func(text string) ([]int32, error) {
		ids, err := tok.Tokenize(text, false, false)
		if err != nil {
			return nil, fmt.Errorf("selfplay: clone: tokenize reply: %w", err)
		}
		if eot >= 0 {
			ids = append(ids, eot)
		}
		return ids, nil
	}, nil
}

// sameEvents compares two logs by what a seat reads (kind, seat,
// notification, text, audience).
func sameEvents(a, b []engine.Event) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d events, the record has %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.Seat != y.Seat || x.NotificationID != y.NotificationID || x.Text != y.Text || !reflect.DeepEqual(x.Audience, y.Audience) {
			return fmt.Errorf("event %d: %s %q, the record has %s %q", i, x.Kind, x.Text, y.Kind, y.Text)
		}
	}
	return nil
}

// endOfTurn is the token that ends an assistant turn in tok's chat
// template (the first token of the text the template puts after a reply),
// or -1 when that text starts with no end-of-generation token.
func endOfTurn(tok inference.Tokenizer) (int32, error) {
	text, err := tok.ChatTemplate([]inference.Message{{Role: "user", Content: "x"}, {Role: "assistant", Content: replySentinel}}, false)
	if err != nil {
		return -1, fmt.Errorf("selfplay: chat template: %w", err)
	}
	i := strings.LastIndex(text, replySentinel)
	if i < 0 {
		return -1, nil
	}
	ids, err := tok.Tokenize(text[i+len(replySentinel):], false, true)
	if err != nil {
		return -1, fmt.Errorf("selfplay: tokenize: %w", err)
	}
	if len(ids) > 0 && tok.EOG(ids[0]) {
		return ids[0], nil
	}
	return -1, nil
}
