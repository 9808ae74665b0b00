package selfplay

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/omar-selfplay/omar/chattemplate"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
)

// SeatStream is a model playing one seat of one episode. For a player with
// a tokenizer it keeps the seat's append-only token stream: each turn
// renders only the events the seat has not seen yet (RenderEvents),
// extends the stream with exactly the tokens a fresh rendering of the
// conversation would add, and appends the sampled reply ids verbatim; a
// new segment starts when the context is full. A player without one (an
// Ollama model) is played at the message level: the conversation is sent
// whole as chat messages every turn.
//
// Self-play's model seats are SeatStreams, and so are the seats omar serve
// gives to models: for the same game, seat, seed and Reply, a served seat
// sends its backend the prompts a self-play seat sends — chat template,
// thinking mode, legal-replies line, grammar, segments and sampling seeds
// — so what is served is what was trained. Act is never called
// concurrently for one seat (the runtime asks a seat at most once at a
// time).
type SeatStream struct {
	player *Player
	seat   engine.Seat
	opts   StreamOptions
	th     Thinking
	// keep reports whether closed segments are kept for trajectories:
	// nothing reads a played-only seat's (a frozen opponent, a served
	// seat), and a served episode may run long.
	keep bool
	// stats counts a Runner's turns and segments; nil outside one.
	stats *stats
	// head holds the fields every segment's trajectory starts with.
	head Trajectory

	cursor int64 // last event sequence number rendered
	turn   int   // turns taken, across segments (seeds)

	// The current segment.
	msgs     []inference.Message
	consumed string // the chat-template text the stream stands for
	lastEOG  int32  // the EOG token that ended the last reply, or -1
	traj     *Trajectory
	segments []*Trajectory

	// traced are the turns of every segment, kept or not, under the
	// theory-of-mind trace only: its scores read a played-only seat's
	// replies too (an evaluated player), and nothing else needs them.
	traced []turnMeta
}

// StreamOptions say how a SeatStream plays its seat.
type StreamOptions struct {
	// Reply is how the model replies: the settings its policy was
	// trained with.
	Reply
	// Stop ends a reply at any of these strings (Options.Stop).
	Stop []string
	// Key names the seat's sequences in the backend's cache: segment g of
	// a token stream is Key+"/g<g>", a message-level seat is Key. The
	// seats sharing a backend need keys of their own.
	Key string
	// Seed is the episode's sampling seed (SamplingSeed): the seat's turn
	// t samples with seeds.Derive(Seed, seat index, t).
	Seed uint64
}

// SamplingSeed is the sampling seed of episode i of a self-play run with
// seed seed (StreamOptions.Seed). A served episode dealt from seed D is
// sampled as episode 0 of a run with seed D: SamplingSeed(D, 0).
func SamplingSeed(seed uint64, episode int) uint64 {
	return seeds.Derive(seed, 1, uint64(episode))
}

// NewSeatStream returns the stream of seat played by p, with its requests
// sent straight to p's backend (Act). o.ChatTemplate is not read here:
// it is applied where p's model is loaded.
func NewSeatStream(p *Player, seat engine.Seat, o StreamOptions) (*SeatStream, error) {
	if p == nil || p.Backend == nil {
		return nil, errors.New("selfplay: seat stream: no backend")
	}
	// A template file is read once, where the model is loaded; a seat of
	// every served episode must not depend on it still being there.
	r := o.Reply
	r.ChatTemplate = ""
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("selfplay: seat stream: %w", err)
	}
	return newSeatStream(p, seat, o, Trajectory{}, false), nil
}

// newSeatStream returns a stream whose trajectories start with head's
// episode fields.
func newSeatStream(p *Player, seat engine.Seat, o StreamOptions, head Trajectory, keep bool) *SeatStream {
	head.Seat, head.SeatName, head.Role, head.Team = seat.Index, seat.Name, seat.Role, seat.Team
	head.Agent = p.Label
	s := &SeatStream{player: p, seat: seat, opts: o, th: o.thinking(), keep: keep, head: head, lastEOG: -1}
	s.traj = s.newTrajectory(0)
	return s
}

func (s *SeatStream) newTrajectory(segment int) *Trajectory {
	t := s.head
	t.Segment = segment
	t.Tokens, t.Mask, t.Logprobs, t.RawLogprobs = []int32{}, Mask{}, []float32{}, []float32{}
	t.TurnEnds, t.TurnRewards, t.PolicyVersions = []int{}, []float64{}, []int{}
	return &t
}

// sender sends one of a turn's requests to the backend and waits for its
// response.
type sender func(ctx context.Context, req inference.Request) (inference.Response, error)

// Act implements engine.Agent.
func (s *SeatStream) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	return s.act(ctx, t, s.generate)
}

// generate sends req alone to the player's backend.
func (s *SeatStream) generate(ctx context.Context, req inference.Request) (inference.Response, error) {
	resps, err := s.player.Backend.Generate(ctx, []inference.Request{req})
	if err != nil {
		return inference.Response{}, err
	}
	if len(resps) != 1 {
		return inference.Response{}, fmt.Errorf("selfplay: backend returned %d responses for 1 request", len(resps))
	}
	return resps[0], nil
}

// act plays one turn with its requests sent by send.
func (s *SeatStream) act(ctx context.Context, t engine.Turn, send sender) (engine.Action, error) {
	if s.player.Tokenizer == nil {
		return s.actChat(ctx, t, send)
	}
	newMsgs := s.render(t.View)
	prompt, err := s.prompt(newMsgs)
	if err != nil {
		return engine.Action{}, err
	}
	req, moveGrammar, err := s.request(t)
	if err != nil {
		return engine.Action{}, err
	}
	r, err := s.sample(ctx, req, moveGrammar, send)
	if err != nil {
		// The stream now ends with an opened assistant turn: record it as
		// an empty reply so the next turn's delta closes it (a timed-out
		// seat plays on).
		s.msgs = append(s.msgs, newMsgs...)
		s.msgs = append(s.msgs, inference.Message{Role: "assistant"})
		s.lastEOG = -1
		return engine.Action{}, err
	}
	text, err := s.record(t, r, req.MaxTokens)
	if err != nil {
		return engine.Action{}, err
	}
	s.msgs = append(s.msgs, newMsgs...)
	s.msgs = append(s.msgs, inference.Message{Role: "assistant", Content: text})
	s.consumed += text
	s.stats.addTurn(len(prompt), len(r.tokens), r.reused)
	return engine.Action{NotificationID: t.Notification.ID, Text: s.move(text)}, nil
}

// unseen returns the events of view the seat has not read yet and marks
// them read.
func (s *SeatStream) unseen(view []engine.Event) []engine.Event {
	var out []engine.Event
	for _, e := range view {
		if e.Seq > s.cursor {
			out = append(out, e)
			s.cursor = e.Seq
		}
	}
	return out
}

// render turns the seat's unseen events into chat messages: briefings
// become the system message (or a user message once the conversation has
// started), everything else a user message; the seat's own actions and
// acknowledgements are skipped because its reply is already in the stream
// as the assistant message.
func (s *SeatStream) render(view []engine.Event) []inference.Message {
	return renderEvents(s.unseen(view), len(s.msgs) > 0, s.player.defang, s.opts.maxLegal())
}

// prompt extends the stream with newMsgs and returns the tokens it added,
// in a new segment when the current one would leave less than
// MinReplyTokens for the reply.
func (s *SeatStream) prompt(newMsgs []inference.Message) ([]int32, error) {
	prompt, err := s.extend(newMsgs)
	if err != nil {
		return nil, err
	}
	if s.opts.Context-len(s.traj.Tokens)-len(prompt) < s.opts.MinReplyTokens && (len(s.traj.Tokens) > 0 || s.hasHistory()) {
		// The prefix would break (or a re-rendered conversation does not
		// fit): start a new segment holding the system message and the
		// new messages only.
		s.restart()
		if prompt, err = s.extend(newMsgs); err != nil {
			return nil, err
		}
	}
	s.appendTokens(prompt, false, nil, nil)
	return prompt, nil
}

// request returns the turn's request for the stream as it stands and the
// grammar of the move the reply ends with ("" without grammars).
func (s *SeatStream) request(t engine.Turn) (inference.Request, string, error) {
	n := len(s.traj.Tokens)
	maxTok := min(s.opts.MaxTokens, s.opts.Context-n)
	if maxTok <= 0 {
		return inference.Request{}, "", fmt.Errorf("selfplay: seat %d: the prompt (%d tokens) fills the context of %d: %w",
			s.seat.Index, n, s.opts.Context, inference.ErrContextFull)
	}
	req := inference.Request{
		Key: fmt.Sprintf("%s/g%d", s.opts.Key, s.traj.Segment),
		// Capped, so a backend that appends to the prompt it keeps can
		// never write into the stream's spare capacity.
		Prompt:    s.traj.Tokens[:n:n],
		MaxTokens: maxTok,
		Sampling:  s.opts.Sampling,
		Stop:      s.opts.Stop,
		Adapter:   s.player.Adapter,
	}
	req.Sampling.Seed = s.seed()
	if !s.opts.Grammar {
		return req, "", nil
	}
	moveGrammar := t.Notification.Grammar
	if s.opts.Trace == TraceToM {
		moveGrammar = traceGrammar(moveGrammar)
	}
	if s.th.Mode != "" {
		moveGrammar = noMarkup(moveGrammar)
	}
	req.Grammar = moveGrammar
	if s.th.Mode == ThinkingOn {
		req.Grammar = thinkingGrammar(moveGrammar)
	}
	return req, moveGrammar, nil
}

// seed is the sampling seed of the seat's coming turn.
func (s *SeatStream) seed() uint64 {
	return seeds.Derive(s.opts.Seed, uint64(s.seat.Index), uint64(s.turn))
}

// sample asks the model for the turn's reply: one request, or two under a
// thinking budget.
func (s *SeatStream) sample(ctx context.Context, req inference.Request, moveGrammar string, send sender) (turnReply, error) {
	if s.th.Mode == ThinkingBudget {
		return s.think(ctx, req, moveGrammar, send)
	}
	var r turnReply
	resp, err := send(ctx, req)
	r.addResponse(resp)
	r.last, r.reused = resp, resp.ReusedTokens
	return r, err
}

// record appends a sampled reply to the stream, and to the trajectory as
// a turn when it holds a trained token, and returns its text (without the
// end-of-generation token).
func (s *SeatStream) record(t engine.Turn, r turnReply, maxTok int) (string, error) {
	tok := s.player.Tokenizer
	s.turn++
	reply := r.tokens
	s.lastEOG = -1
	if n := len(reply); n > 0 && tok.EOG(reply[n-1]) {
		s.lastEOG = reply[n-1]
		reply = reply[:n-1]
	}
	text, err := tok.Detokenize(reply)
	if err != nil {
		return "", fmt.Errorf("selfplay: detokenize reply: %w", err)
	}
	if s.th.reasons() && s.th.Loss == ThinkingMask {
		if err := s.maskReasoning(&r); err != nil {
			return "", err
		}
	}
	end := lastSampled(r)
	if len(r.tokens) > 0 {
		s.appendReply(r)
	}
	if end >= 0 {
		tr := s.traj
		tr.TurnEnds = append(tr.TurnEnds, len(tr.Tokens)-len(r.tokens)+end)
		tr.TurnRewards = append(tr.TurnRewards, 0)
		tr.PolicyVersions = append(tr.PolicyVersions, r.last.PolicyVersion)
		m := turnMeta{
			notification: t.Notification, text: text, stop: r.last.Stop, maxTokens: maxTok,
			eog: s.lastEOG >= 0 && end == len(r.tokens)-1,
		}
		tr.meta = append(tr.meta, m)
		if s.opts.Trace == TraceToM {
			s.traced = append(s.traced, m)
		}
	}
	return text, nil
}

// lastSampled returns the index of r's last sampled token, where its turn
// ends, or -1. Under a thinking budget the tokens written for the model may
// come last (no room was left for the move), and with the reasoning masked
// a reply that never closed it has no trained token at all — then the turn
// stays in the stream as context and is not a turn of the trajectory.
func lastSampled(r turnReply) int {
	for i := len(r.gen) - 1; i >= 0; i-- {
		if r.gen[i] {
			return i
		}
	}
	return -1
}

// move returns what of a reply's text the engine receives.
func (s *SeatStream) move(text string) string {
	move := text
	if s.th.Mode != "" {
		// The move follows the reasoning; a reply that reasons and never
		// closes it has no move (an invalid move: the engine asks again).
		_, answer, closed := chattemplate.SplitThinking(text)
		switch {
		case closed:
			move = answer
		case s.th.reasons():
			move = ""
		}
	}
	if s.opts.Trace == TraceToM {
		// A trace without its move line is an invalid move: the engine
		// rejects the empty reply and asks again.
		move, _ = traceAction(move)
	}
	return move
}

// actChat plays a turn at the message level. The notification's GBNF
// grammar is passed on in Request.Grammar, which a message-level backend
// cannot enforce (Ollama constrains only JSON schemas, and the games'
// move lines are not JSON): a reply that breaks the move format is a
// validation error, and the engine retries with the error in the
// conversation and finally applies the inert default, as it does for any
// participant. Nothing is recorded for training: a message-level backend
// returns text, not the token ids and logprobs a trajectory needs.
func (s *SeatStream) actChat(ctx context.Context, t engine.Turn, send sender) (engine.Action, error) {
	// Text from other seats is not defanged: there is no tokenizer to list
	// special tokens, and the server renders message contents as text.
	s.msgs = append(s.msgs, renderEvents(s.unseen(t.View), len(s.msgs) > 0, nil, s.opts.maxLegal())...)
	req := inference.Request{
		Key:       s.opts.Key,
		Messages:  slices.Clone(s.msgs),
		MaxTokens: s.opts.MaxTokens,
		Sampling:  s.opts.Sampling,
		Stop:      s.opts.Stop,
		Adapter:   s.player.Adapter,
	}
	req.Sampling.Seed = s.seed()
	if s.opts.Grammar {
		req.Grammar = t.Notification.Grammar
	}
	resp, err := send(ctx, req)
	if err != nil {
		// A timed-out seat plays on: an empty reply keeps the roles
		// alternating, and the default event explains what was applied.
		s.msgs = append(s.msgs, inference.Message{Role: "assistant"})
		return engine.Action{}, err
	}
	s.turn++
	s.msgs = append(s.msgs, inference.Message{Role: "assistant", Content: resp.Text})
	s.stats.addTurn(0, len(resp.Tokens), resp.ReusedTokens)
	return engine.Action{NotificationID: t.Notification.ID, Text: resp.Text}, nil
}
