package selfplay

import (
	"context"
	"fmt"
	"slices"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
)

// chatSeat is the engine.Agent of a seat played by a message-level backend
// (an Ollama model): the seat's conversation is kept as chat messages,
// rendered by the same rule as a model seat's prompt (RenderEvents), and
// sent whole every turn; the backend applies its own chat template and
// prompt cache. Nothing is recorded for training: a message-level backend
// returns text, not the token ids and logprobs a trajectory needs.
//
// The notification's GBNF grammar is passed on in Request.Grammar, which
// a message-level backend cannot enforce (Ollama constrains only JSON
// schemas, and the games' move lines are not JSON): a reply that breaks
// the move format is a validation error, and the engine retries with the
// error in the conversation and finally applies the inert default, as it
// does for any participant.
type chatSeat struct {
	run      *episodeRun
	player   *Player
	seat     engine.Seat
	cursor   int64 // last event sequence number rendered
	turn     int
	prepared bool // announced by Prepare for the coming Act
	msgs     []inference.Message
}

func newChatSeat(run *episodeRun, p *Player, s engine.Seat) *chatSeat {
	return &chatSeat{run: run, player: p, seat: s}
}

// Prepare implements engine.Preparer (see modelSeat.Prepare).
func (cs *chatSeat) Prepare(engine.Turn) {
	cs.run.moves.announce(cs.player)
	cs.prepared = true
}

// Act implements engine.Agent.
func (cs *chatSeat) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	run := cs.run
	run.moves.enter(cs.player, &cs.prepared)
	var unseen []engine.Event
	for _, e := range t.View {
		if e.Seq > cs.cursor {
			unseen = append(unseen, e)
			cs.cursor = e.Seq
		}
	}
	// Text from other seats is not defanged: there is no tokenizer to list
	// special tokens, and the server renders message contents as text.
	cs.msgs = append(cs.msgs, renderEvents(unseen, len(cs.msgs) > 0, nil, cs.run.opts.maxLegal())...)
	req := inference.Request{
		Key:       fmt.Sprintf("%s/e%d/s%d", run.key, run.index, cs.seat.Index),
		Messages:  slices.Clone(cs.msgs),
		MaxTokens: run.opts.MaxTokens,
		Sampling:  run.opts.Sampling,
		Stop:      run.opts.Stop,
		Adapter:   cs.player.Adapter,
	}
	req.Sampling.Seed = seeds.Derive(run.samplingSeed, uint64(cs.seat.Index), uint64(cs.turn))
	if run.opts.Grammar {
		req.Grammar = t.Notification.Grammar
	}
	resp, err := run.moves.generate(ctx, cs.seat.Index, cs.player, req)
	if err != nil {
		// A timed-out seat plays on: an empty reply keeps the roles
		// alternating, and the default event explains what was applied.
		cs.msgs = append(cs.msgs, inference.Message{Role: "assistant"})
		return engine.Action{}, err
	}
	cs.turn++
	cs.msgs = append(cs.msgs, inference.Message{Role: "assistant", Content: resp.Text})
	run.stats.addTurn(0, len(resp.Tokens), resp.ReusedTokens)
	return engine.Action{NotificationID: t.Notification.ID, Text: resp.Text}, nil
}
