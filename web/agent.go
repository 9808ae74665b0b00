package web

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// SeatOptions say how a model plays a served seat.
type SeatOptions struct {
	// Reply is how the model replies: the settings a policy was trained
	// with (selfplay.Reply), so a served seat reads the prompt it learnt
	// on — the legal-replies line included. Context is the token budget
	// of one seat's prompt and reply; the oldest turns are left out of
	// the prompt when it would not fit (the briefing always stays).
	selfplay.Reply
}

// Defaults returns self-play's reply defaults (selfplay.DefaultReply).
func (SeatOptions) Defaults() SeatOptions {
	return SeatOptions{Reply: selfplay.DefaultReply()}
}

// Validate checks o.
func (o SeatOptions) Validate() error {
	if err := o.Reply.Validate(); err != nil {
		return fmt.Errorf("web: seat: %w", err)
	}
	return nil
}

// ModelAgents plays served seats with model players; it implements
// remote.Agents. A player with a Tokenizer (a llama backend) is played at
// the token level, one without (Ollama) with chat messages.
type ModelAgents struct {
	names   []string
	players map[string]*selfplay.Player
	opts    SeatOptions
}

// ModelAlias names the first model player, so that a create request can
// say "model" without knowing how the server was started.
const ModelAlias = "model"

// NewModelAgents returns the agents of players, by name, in order. The
// first is also called ModelAlias unless a player already has that name.
func NewModelAgents(names []string, players []*selfplay.Player, opts SeatOptions) (*ModelAgents, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(names) != len(players) {
		return nil, fmt.Errorf("web: %d names for %d players", len(names), len(players))
	}
	m := &ModelAgents{players: map[string]*selfplay.Player{}, opts: opts}
	for i, n := range names {
		switch {
		case n == "" || n == "remote" || engine.IsScripted(n):
			return nil, fmt.Errorf("web: player name %q is reserved (remote, scripted, scripted:NAME)", n)
		case players[i] == nil || players[i].Backend == nil:
			return nil, fmt.Errorf("web: player %q has no backend", n)
		case m.players[n] != nil:
			return nil, fmt.Errorf("web: two players named %q", n)
		}
		m.players[n] = players[i]
		m.names = append(m.names, n)
	}
	if len(names) > 0 && m.players[ModelAlias] == nil {
		m.players[ModelAlias] = players[0]
		m.names = append([]string{ModelAlias}, m.names...)
	}
	return m, nil
}

// Names implements remote.Agents.
func (m *ModelAgents) Names() []string { return slices.Clone(m.names) }

// Agent implements remote.Agents.
func (m *ModelAgents) Agent(name string, g engine.Game, seat engine.Seat, seed uint64, episode string) (engine.Agent, string, error) {
	p := m.players[name]
	if p == nil {
		return nil, "", fmt.Errorf("web: no model player %q (have %v)", name, m.names)
	}
	a := &modelAgent{player: p, opts: m.opts, seat: seat, seed: seeds.Derive(seed, 0x5e47, uint64(seat.Index)),
		key: "serve/" + episode + "/s" + strconv.Itoa(seat.Index)}
	if p.Tokenizer != nil {
		a.defang = inference.NewDefanger(p.Tokenizer).Defang
	}
	return a, p.Label, nil
}

// modelAgent is one served seat played by a model. It keeps the seat's
// conversation as chat messages, rendered by the rule of self-play's
// model seats (selfplay.RenderEvents), and sends it whole every turn: a
// llama backend reuses the cached prefix of the seat's key, so only the
// new turns are decoded. Nothing is kept for training. The runtime never
// calls Act concurrently for one seat.
type modelAgent struct {
	player *selfplay.Player
	opts   SeatOptions
	seat   engine.Seat
	seed   uint64
	key    string
	defang func(string) string

	cursor int64
	turn   atomic.Int64
	msgs   []inference.Message
}

// Act implements engine.Agent.
func (a *modelAgent) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	var unseen []engine.Event
	for _, e := range t.View {
		if e.Seq > a.cursor {
			unseen = append(unseen, e)
			a.cursor = e.Seq
		}
	}
	a.msgs = append(a.msgs, selfplay.RenderEvents(unseen, len(a.msgs) > 0, a.defang, a.opts.MaxLegal)...)
	turn := a.turn.Add(1) - 1
	req := inference.Request{Key: a.key, MaxTokens: a.opts.MaxTokens, Sampling: a.opts.Sampling, Adapter: a.player.Adapter}
	req.Sampling.Seed = seeds.Derive(a.seed, uint64(turn))
	if a.opts.Grammar {
		req.Grammar = t.Notification.Grammar
	}
	tok := a.player.Tokenizer
	if tok == nil {
		req.Messages = slices.Clone(a.msgs)
	} else {
		prompt, err := a.prompt(tok)
		if err != nil {
			return engine.Action{}, err
		}
		req.Prompt = prompt
	}
	resps, err := a.player.Backend.Generate(ctx, []inference.Request{req})
	if err != nil {
		// The seat plays on after a timeout: an empty reply keeps the
		// roles alternating, and the default event says what was applied.
		a.msgs = append(a.msgs, inference.Message{Role: "assistant"})
		return engine.Action{}, err
	}
	if len(resps) != 1 {
		return engine.Action{}, fmt.Errorf("web: backend answered %d responses to one request", len(resps))
	}
	text := resps[0].Text
	if tok != nil {
		reply := resps[0].Tokens
		if n := len(reply); n > 0 && tok.EOG(reply[n-1]) {
			reply = reply[:n-1]
		}
		if text, err = tok.Detokenize(reply); err != nil {
			return engine.Action{}, fmt.Errorf("web: detokenize reply: %w", err)
		}
	}
	a.msgs = append(a.msgs, inference.Message{Role: "assistant", Content: text})
	return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
}

// prompt renders the conversation with the model's chat template. When
// it does not leave room for a reply in opts.Context, the oldest
// exchanges after the system message are left out, one message at a
// time, until it does.
func (a *modelAgent) prompt(tok inference.Tokenizer) ([]int32, error) {
	msgs := a.msgs
	for {
		text, err := tok.ChatTemplate(msgs, true)
		if err != nil {
			return nil, fmt.Errorf("web: chat template: %w", err)
		}
		ids, err := tok.Tokenize(text, true, true)
		if err != nil {
			return nil, fmt.Errorf("web: tokenize: %w", err)
		}
		if len(ids)+a.opts.MaxTokens <= a.opts.Context {
			return ids, nil
		}
		first := 0
		if len(msgs) > 0 && msgs[0].Role == "system" {
			first = 1
		}
		if len(msgs)-first <= 1 {
			return nil, fmt.Errorf("web: seat %d: the briefing and the last message (%d tokens) leave no room for a %d-token reply in %d: %w",
				a.seat.Index, len(ids), a.opts.MaxTokens, a.opts.Context, inference.ErrContextFull)
		}
		msgs = append(slices.Clone(msgs[:first]), msgs[first+1:]...)
	}
}
