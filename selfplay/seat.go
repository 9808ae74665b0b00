package selfplay

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/omar-selfplay/omar/chattemplate"
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

// modelSeat is the engine.Agent of one seat played by a model. It keeps the
// seat's append-only token stream: each Act renders only the events the
// seat has not seen yet, tokenises only that delta, and appends the sampled
// reply ids verbatim. Act is never called concurrently for one seat (the
// runtime asks a seat at most once at a time).
type modelSeat struct {
	run    *episodeRun
	player *Player
	seat   engine.Seat
	// keep reports whether the seat's trajectory is kept (the trained
	// policy) or only played (a frozen opponent).
	keep bool

	cursor   int64 // last event sequence number rendered
	turn     int   // turns taken, across segments (seeds)
	prepared bool  // announced by Prepare for the coming Act

	// The current segment.
	msgs     []inference.Message
	consumed string // the chat-template text the stream stands for
	lastEOG  int32  // the EOG token that ended the last reply, or -1
	traj     *Trajectory
	segments []*Trajectory
}

func newModelSeat(run *episodeRun, p *Player, s engine.Seat, keep bool) *modelSeat {
	ms := &modelSeat{run: run, player: p, seat: s, keep: keep, lastEOG: -1}
	ms.traj = ms.newTrajectory(0)
	return ms
}

func (ms *modelSeat) newTrajectory(segment int) *Trajectory {
	r := ms.run
	return &Trajectory{
		Env: r.env, Episode: r.index, Seed: r.seed, Scenario: r.scenario,
		Seat: ms.seat.Index, SeatName: ms.seat.Name, Role: ms.seat.Role, Team: ms.seat.Team,
		Agent: ms.player.Label, Segment: segment,
		Tokens: []int32{}, Mask: Mask{}, Logprobs: []float32{}, RawLogprobs: []float32{},
		TurnEnds: []int{}, TurnRewards: []float64{}, PolicyVersions: []int{},
	}
}

// render turns the seat's unseen events into chat messages: briefings
// become the system message (or a user message once the conversation has
// started), everything else a user message; the seat's own actions and
// acknowledgements are skipped because its reply is already in the stream
// as the assistant message.
func (ms *modelSeat) render(view []engine.Event) []inference.Message {
	started := len(ms.msgs) > 0
	var unseen []engine.Event
	for _, e := range view {
		if e.Seq > ms.cursor {
			unseen = append(unseen, e)
			ms.cursor = e.Seq
		}
	}
	maxLegal := DefaultMaxLegal
	if ms.run != nil && ms.run.opts != nil {
		maxLegal = ms.run.opts.maxLegal()
	}
	return renderEvents(unseen, started, ms.player.defang, maxLegal)
}

// Prepare implements engine.Preparer: the seat's request is part of the
// move about to be played.
func (ms *modelSeat) Prepare(engine.Turn) {
	ms.run.moves.announce(ms.player)
	ms.prepared = true
}

// Act implements engine.Agent.
func (ms *modelSeat) Act(ctx context.Context, t engine.Turn) (engine.Action, error) {
	tok := ms.player.Tokenizer
	ms.run.moves.enter(ms.player, &ms.prepared)
	submitted := false
	defer func() {
		if !submitted {
			ms.run.moves.withdraw(ms.player)
		}
	}()
	newMsgs := ms.render(t.View)
	prompt, err := ms.extend(newMsgs)
	if err != nil {
		return engine.Action{}, err
	}
	if ms.run.opts.Context-len(ms.traj.Tokens)-len(prompt) < ms.run.opts.MinReplyTokens && (len(ms.traj.Tokens) > 0 || ms.hasHistory()) {
		// The prefix would break (or a re-rendered conversation does not
		// fit): start a new segment holding the system message and the
		// new messages only.
		ms.restart()
		if prompt, err = ms.extend(newMsgs); err != nil {
			return engine.Action{}, err
		}
	}
	ms.appendTokens(prompt, false, nil, nil)
	maxTok := min(ms.run.opts.MaxTokens, ms.run.opts.Context-len(ms.traj.Tokens))
	if maxTok <= 0 {
		return engine.Action{}, fmt.Errorf("selfplay: seat %d: the prompt (%d tokens) fills the context of %d: %w",
			ms.seat.Index, len(ms.traj.Tokens), ms.run.opts.Context, inference.ErrContextFull)
	}
	req := inference.Request{
		Key: fmt.Sprintf("%s/e%d/s%d/g%d", ms.run.key, ms.run.index, ms.seat.Index, ms.traj.Segment),
		// Capped, so a backend that appends to the prompt it keeps can
		// never write into the stream's spare capacity.
		Prompt:    ms.traj.Tokens[:len(ms.traj.Tokens):len(ms.traj.Tokens)],
		MaxTokens: maxTok,
		Sampling:  ms.run.opts.Sampling,
		Stop:      ms.run.opts.Stop,
		Adapter:   ms.player.Adapter,
	}
	req.Sampling.Seed = seeds.Derive(ms.run.samplingSeed, uint64(ms.seat.Index), uint64(ms.turn))
	th := ms.run.opts.thinking()
	moveGrammar := ""
	if ms.run.opts.Grammar {
		moveGrammar = t.Notification.Grammar
		if ms.run.opts.Trace == TraceToM {
			moveGrammar = traceGrammar(moveGrammar)
		}
		if th.Mode != "" {
			moveGrammar = noMarkup(moveGrammar)
		}
		req.Grammar = moveGrammar
		if th.Mode == ThinkingOn {
			req.Grammar = thinkingGrammar(moveGrammar)
		}
	}
	submitted = true
	var r turnReply
	if th.Mode == ThinkingBudget {
		r, err = ms.think(ctx, req, moveGrammar)
	} else {
		var resp inference.Response
		resp, err = ms.run.moves.generate(ctx, ms.seat.Index, ms.player, req)
		r.add(resp.Tokens, true, resp.Logprobs, resp.RawLogprobs)
		r.last, r.reused = resp, resp.ReusedTokens
	}
	if err != nil {
		// The stream now ends with an opened assistant turn: record it as
		// an empty reply so the next turn's delta closes it (a timed-out
		// seat plays on).
		ms.msgs = append(ms.msgs, newMsgs...)
		ms.msgs = append(ms.msgs, inference.Message{Role: "assistant"})
		ms.lastEOG = -1
		return engine.Action{}, err
	}
	ms.turn++
	reply := r.tokens
	ms.lastEOG = -1
	if n := len(reply); n > 0 && tok.EOG(reply[n-1]) {
		ms.lastEOG = reply[n-1]
		reply = reply[:n-1]
	}
	text, err := tok.Detokenize(reply)
	if err != nil {
		return engine.Action{}, fmt.Errorf("selfplay: detokenize reply: %w", err)
	}
	if th.reasons() && th.Loss == ThinkingMask {
		if err := ms.maskReasoning(&r); err != nil {
			return engine.Action{}, err
		}
	}
	// The turn ends on its last sampled token: under a thinking budget
	// the tokens written for the model may come last (no room was left
	// for the move), and with the reasoning masked a reply that never
	// closed it has no trained token at all — then the turn stays in the
	// stream as context and is not a turn of the trajectory.
	end := -1
	for i := len(r.gen) - 1; i >= 0; i-- {
		if r.gen[i] {
			end = i
			break
		}
	}
	if len(r.tokens) > 0 {
		ms.appendReply(r)
	}
	if end >= 0 {
		tr := ms.traj
		tr.TurnEnds = append(tr.TurnEnds, len(tr.Tokens)-len(r.tokens)+end)
		tr.TurnRewards = append(tr.TurnRewards, 0)
		tr.PolicyVersions = append(tr.PolicyVersions, r.last.PolicyVersion)
		tr.meta = append(tr.meta, turnMeta{
			notification: t.Notification, text: text, stop: r.last.Stop, maxTokens: maxTok,
			eog: ms.lastEOG >= 0 && end == len(r.tokens)-1,
		})
	}
	ms.msgs = append(ms.msgs, newMsgs...)
	ms.msgs = append(ms.msgs, inference.Message{Role: "assistant", Content: text})
	ms.consumed += text
	ms.run.stats.addTurn(len(prompt), len(r.tokens), r.reused)
	move := text
	if th.Mode != "" {
		// The move follows the reasoning; a reply that reasons and never
		// closes it has no move (an invalid move: the engine asks again).
		_, answer, closed := chattemplate.SplitThinking(text)
		switch {
		case closed:
			move = answer
		case th.reasons():
			move = ""
		}
	}
	if ms.run.opts.Trace == TraceToM {
		// A trace without its move line is an invalid move: the engine
		// rejects the empty reply and asks again.
		move, _ = traceAction(move)
	}
	return engine.Action{NotificationID: t.Notification.ID, Text: move}, nil
}

// extend renders newMsgs after the segment's messages and returns only the
// tokens of the new text. The stream stands for ms.consumed; when the new
// rendering extends it, only the difference is tokenised. When a template
// rewrites earlier text (trimming a reply, dropping an earlier reply's
// reasoning), the template's text after the last reply is used instead
// (history "stream", and outside thinking modes when the rest of the
// rendering still agrees); otherwise a new segment starts: with the whole
// conversation re-rendered under thinking's history "template", with the
// system messages only outside thinking modes.
func (ms *modelSeat) extend(newMsgs []inference.Message) ([]int32, error) {
	th := ms.run.opts.thinking()
	all := append(append([]inference.Message{}, ms.msgs...), newMsgs...)
	full, err := ms.renderChat(all, true)
	if err != nil {
		return nil, err
	}
	if len(ms.traj.Tokens) == 0 {
		ms.consumed = full
		return ms.tokenize(full, true)
	}
	var delta string
	switch {
	case strings.HasPrefix(full, ms.consumed):
		delta = full[len(ms.consumed):]
	case th.Mode != "" && th.History == HistoryStream:
		if delta, err = ms.afterReply(all, len(ms.msgs)); err != nil {
			return nil, err
		}
	case th.Mode != "":
		// History "template": a segment of the conversation as the
		// template renders it now.
		ms.run.stats.addBreak()
		ms.resegment()
		return ms.extend(newMsgs)
	default:
		prev, err := ms.renderChat(ms.msgs, false)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(full, prev) {
			ms.run.stats.addBreak()
			ms.restart()
			return ms.extend(newMsgs)
		}
		// prev ends with the last reply's end-of-turn text, which the
		// stream lacks (the reply is in it as sampled): without it a reply
		// that stopped without an end-of-turn token would stay open.
		closing, err := ms.replyClosing()
		if err != nil {
			return nil, err
		}
		delta = closing + full[len(prev):]
	}
	ids, err := ms.tokenize(delta, false)
	if err != nil {
		return nil, err
	}
	// The end-of-turn token the model sampled already stands for the
	// template's end-of-turn marker.
	if ms.lastEOG >= 0 && len(ids) > 0 && ids[0] == ms.lastEOG {
		ids = ids[1:]
	}
	ms.consumed = full
	return ids, nil
}

// renderChat renders msgs with the seat's chat template and thinking
// setting.
func (ms *modelSeat) renderChat(msgs []inference.Message, addAssistant bool) (string, error) {
	text, err := inference.RenderChat(ms.player.Tokenizer, msgs, ms.run.opts.thinking().chatOptions(addAssistant))
	if err != nil {
		return "", fmt.Errorf("selfplay: chat template: %w", err)
	}
	return text, nil
}

// replySentinel stands in for a reply's content when replyClosing renders
// it; no template trims or rewrites it.
const replySentinel = "\x1eOMAR-REPLY\x1e"

// afterReply returns the template's text after the reply at all[n-1]
// (the segment's last message) when all is rendered with the opening of
// the next reply: the reply's end-of-turn marker, the new messages and
// the opening. The reply is rendered as a sentinel, so the text does not
// depend on how the template rewrites it.
func (ms *modelSeat) afterReply(all []inference.Message, n int) (string, error) {
	if n == 0 || all[n-1].Role != "assistant" {
		return "", fmt.Errorf("selfplay: seat %d: the stream does not end with a reply", ms.seat.Index)
	}
	msgs := append([]inference.Message{}, all...)
	msgs[n-1] = inference.Message{Role: "assistant", Content: replySentinel}
	text, err := ms.renderChat(msgs, true)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(text, replySentinel)
	if i < 0 {
		return "", fmt.Errorf("selfplay: seat %d: the chat template drops a reply", ms.seat.Index)
	}
	return text[i+len(replySentinel):], nil
}

// replyClosing returns the text the chat template puts after the content
// of the segment's last message when that is a reply (the end-of-turn
// marker and what follows it), or "".
func (ms *modelSeat) replyClosing() (string, error) {
	n := len(ms.msgs)
	if n == 0 || ms.msgs[n-1].Role != "assistant" {
		return "", nil
	}
	msgs := append(append([]inference.Message{}, ms.msgs[:n-1]...), inference.Message{Role: "assistant", Content: replySentinel})
	text, err := ms.renderChat(msgs, false)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(text, replySentinel)
	if i < 0 {
		return "", nil
	}
	return text[i+len(replySentinel):], nil
}

func (ms *modelSeat) tokenize(text string, addSpecial bool) ([]int32, error) {
	ids, err := ms.player.Tokenizer.Tokenize(text, addSpecial, true)
	if err != nil {
		return nil, fmt.Errorf("selfplay: tokenize: %w", err)
	}
	return ids, nil
}

// restart closes the current segment and opens a new one that keeps only
// the system messages of the conversation.
func (ms *modelSeat) restart() {
	var sys []inference.Message
	for _, m := range ms.msgs {
		if m.Role == "system" {
			sys = append(sys, m)
		}
	}
	if len(ms.traj.TurnEnds) > 0 {
		ms.segments = append(ms.segments, ms.traj)
	}
	ms.traj = ms.newTrajectory(ms.traj.Segment + 1)
	ms.msgs, ms.consumed, ms.lastEOG = sys, "", -1
	ms.run.stats.addSegment()
}

// hasHistory reports whether the segment's messages hold more than the
// system messages.
func (ms *modelSeat) hasHistory() bool {
	for _, m := range ms.msgs {
		if m.Role != "system" {
			return true
		}
	}
	return false
}

// resegment closes the current segment and opens a new one that keeps the
// whole conversation, to be rendered afresh by the template.
func (ms *modelSeat) resegment() {
	if len(ms.traj.TurnEnds) > 0 {
		ms.segments = append(ms.segments, ms.traj)
	}
	ms.traj = ms.newTrajectory(ms.traj.Segment + 1)
	ms.consumed, ms.lastEOG = "", -1
	ms.run.stats.addSegment()
}

// appendTokens appends ids to the stream; generated marks them as the
// model's (lp and raw may be nil or short for backends that report no
// logprobs; missing entries are 0).
func (ms *modelSeat) appendTokens(ids []int32, generated bool, lp, raw []float32) {
	tr := ms.traj
	tr.Tokens = append(tr.Tokens, ids...)
	for i := range ids {
		tr.Mask = append(tr.Mask, generated)
		var a, b float32
		if generated && i < len(lp) {
			a = lp[i]
		}
		if generated && i < len(raw) {
			b = raw[i]
		}
		tr.Logprobs = append(tr.Logprobs, a)
		tr.RawLogprobs = append(tr.RawLogprobs, b)
	}
}

// appendReply appends a turn's reply: sampled tokens as generated, tokens
// written for the model (a closed reasoning budget) or masked reasoning as
// context.
func (ms *modelSeat) appendReply(r turnReply) {
	tr := ms.traj
	tr.Tokens = append(tr.Tokens, r.tokens...)
	tr.Mask = append(tr.Mask, r.gen...)
	tr.Logprobs = append(tr.Logprobs, r.lp...)
	tr.RawLogprobs = append(tr.RawLogprobs, r.raw...)
}

// trajectories returns the seat's segments that contain turns, with the
// terminal reward on each (a seat's outcome is the return of every segment
// of its conversation).
func (ms *modelSeat) trajectories(reward float64) []Trajectory {
	all := append(append([]*Trajectory{}, ms.segments...), ms.traj)
	var out []Trajectory
	for _, t := range all {
		if len(t.TurnEnds) == 0 {
			continue
		}
		t.Reward = reward
		out = append(out, *t)
	}
	return out
}
