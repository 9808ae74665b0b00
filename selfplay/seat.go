package selfplay

import (
	"context"
	"fmt"
	"sync"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
)

// Player is a policy: a backend and, for a token-level backend, its
// tokenizer. The policy and frozen players are token-level; a named player
// (Options.Players) without a Tokenizer is played at the message level: its
// seats send the conversation as chat messages (an Ollama model) and keep
// no trajectory.
type Player struct {
	// Label names the player in episode records ("llama:tiny.gguf").
	Label     string
	Backend   inference.Backend
	Tokenizer inference.Tokenizer
	// Adapter is put in every request of the player's seats
	// (inference.Request.Adapter): several players can share one llama
	// backend with different adapters, and their seats are still decoded
	// together. "" is the backend's current adapter.
	Adapter string

	defangOnce sync.Once
	defanger   *inference.Defanger
}

// defang keeps text that other participants wrote (a model's SAY line, a
// remote client's message) from forging control tokens in this seat's
// prompt (see inference.Defanger).
func (p *Player) defang(text string) string {
	p.defangOnce.Do(func() { p.defanger = inference.NewDefanger(p.Tokenizer) })
	return p.defanger.Defang(text)
}

// modelSeat is the engine.Agent of one seat of a self-play episode played
// by a model: a SeatStream whose requests go through the episode's move
// (moves), so that a simultaneous move's requests reach the backend
// together whatever order the seats' goroutines run in.
type modelSeat struct {
	stream *SeatStream
	run    *episodeRun
	player *Player
	seat   engine.Seat
	// keep reports whether the seat's trajectory is kept (the trained
	// policy) or only played (a frozen opponent, a named player).
	keep     bool
	prepared bool // announced by Prepare for the coming Act
}

func newModelSeat(run *episodeRun, p *Player, s engine.Seat, keep bool) *modelSeat {
	o := StreamOptions{Reply: run.opts.Reply, Stop: run.opts.Stop, Key: fmt.Sprintf("%s/e%d/s%d", run.key, run.index, s.Index), Seed: run.samplingSeed}
	head := Trajectory{Env: run.env, Episode: run.index, Seed: seeds.JSON(run.seed), Scenario: run.scenario}
	st := newSeatStream(p, s, o, head, keep)
	st.stats = run.stats
	return &modelSeat{stream: st, run: run, player: p, seat: s, keep: keep}
}

// Prepare implements engine.Preparer: the seat's request is part of the
// move about to be played.
func (ms *modelSeat) Prepare(engine.Turn) {
	ms.run.moves.announce(ms.player)
	ms.prepared = true
}

// Act implements engine.Agent. A turn that sends no request (its prompt
// fills the context) withdraws the seat from the move; a further request
// of one turn (a budgeted reply's move) is announced as a move of its own.
func (ms *modelSeat) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	moves := ms.run.moves
	moves.enter(ms.player, &ms.prepared)
	sent := 0
	defer func() {
		if sent == 0 {
			moves.withdraw(ms.player)
		}
	}()
	return ms.stream.act(ctx, t, func(ctx context.Context, req inference.Request) (inference.Response, error) {
		if sent > 0 {
			moves.announce(ms.player)
		}
		sent++
		return moves.generate(ctx, ms.seat.Index, ms.player, req)
	})
}

// trajectories returns the seat's trajectories (SeatStream.trajectories).
func (ms *modelSeat) trajectories(reward float64) []Trajectory {
	return ms.stream.trajectories(reward)
}
