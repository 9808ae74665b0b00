package web

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/selfplay"
)

// SeatOptions say how a model plays a served seat.
type SeatOptions struct {
	// Reply is how the model replies: the settings a policy was trained
	// with (selfplay.Reply). A served seat is a self-play seat stream
	// (selfplay.SeatStream), so with these settings it reads the prompts
	// the policy learnt on: the chat template and thinking mode, the
	// legal-replies line, the grammar, and a new segment when a seat's
	// stream fills Context.
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
// the token level, one without (Ollama) with chat messages, as in
// self-play.
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

// Agent implements remote.Agents. The seat is a selfplay.SeatStream, so it
// plays as a self-play seat with the same Reply plays: a served episode
// dealt from seed samples its seats as episode 0 of a self-play run with
// that seed does (selfplay.SamplingSeed(seed, 0)).
func (m *ModelAgents) Agent(name string, g engine.Game, seat engine.Seat, seed uint64, episode string) (engine.Agent, string, error) {
	p := m.players[name]
	if p == nil {
		return nil, "", fmt.Errorf("web: no model player %q (have %v)", name, m.names)
	}
	s, err := selfplay.NewSeatStream(p, seat, selfplay.StreamOptions{
		Reply: m.opts.Reply,
		Key:   "serve/" + episode + "/s" + strconv.Itoa(seat.Index),
		Seed:  selfplay.SamplingSeed(seed, 0),
	})
	if err != nil {
		return nil, "", fmt.Errorf("web: %w", err)
	}
	return s, p.Label, nil
}
