package selfplay

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/inference"
)

// extend renders newMsgs after the segment's messages and returns only the
// tokens of the new text. The stream stands for s.consumed; when the new
// rendering extends it, only the difference is tokenised. When a template
// rewrites earlier text (trimming a reply, dropping an earlier reply's
// reasoning), the template's text after the last reply is used instead
// (history "stream", and outside thinking modes when the rest of the
// rendering still agrees); otherwise a new segment starts: with the whole
// conversation re-rendered under thinking's history "template", with the
// system messages only outside thinking modes.
func (s *SeatStream) extend(newMsgs []inference.Message) ([]int32, error) {
	th := s.th
	all := append(append([]inference.Message{}, s.msgs...), newMsgs...)
	full, err := s.renderChat(all, true)
	if err != nil {
		return nil, err
	}
	if len(s.traj.Tokens) == 0 {
		s.consumed = full
		return s.tokenize(full, true)
	}
	var delta string
	switch {
	case strings.HasPrefix(full, s.consumed):
		delta = full[len(s.consumed):]
	case th.Mode != "" && th.History == HistoryStream:
		if delta, err = s.afterReply(all, len(s.msgs)); err != nil {
			return nil, err
		}
	case th.Mode != "":
		// History "template": a segment of the conversation as the
		// template renders it now.
		s.stats.addBreak()
		s.resegment()
		return s.extend(newMsgs)
	default:
		prev, err := s.renderChat(s.msgs, false)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(full, prev) {
			s.stats.addBreak()
			s.restart()
			return s.extend(newMsgs)
		}
		// prev ends with the last reply's end-of-turn text, which the
		// stream lacks (the reply is in it as sampled): without it a reply
		// that stopped without an end-of-turn token would stay open.
		closing, err := s.replyClosing()
		if err != nil {
			return nil, err
		}
		delta = closing + full[len(prev):]
	}
	ids, err := s.tokenize(delta, false)
	if err != nil {
		return nil, err
	}
	// The end-of-turn token the model sampled already stands for the
	// template's end-of-turn marker.
	if s.lastEOG >= 0 && len(ids) > 0 && ids[0] == s.lastEOG {
		ids = ids[1:]
	}
	s.consumed = full
	return ids, nil
}

// renderChat renders msgs with the seat's chat template and thinking
// setting.
func (s *SeatStream) renderChat(msgs []inference.Message, addAssistant bool) (string, error) {
	text, err := inference.RenderChat(s.player.Tokenizer, msgs, s.th.chatOptions(addAssistant))
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
func (s *SeatStream) afterReply(all []inference.Message, n int) (string, error) {
	if n == 0 || all[n-1].Role != "assistant" {
		return "", fmt.Errorf("selfplay: seat %d: the stream does not end with a reply", s.seat.Index)
	}
	msgs := append([]inference.Message{}, all...)
	msgs[n-1] = inference.Message{Role: "assistant", Content: replySentinel}
	text, err := s.renderChat(msgs, true)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(text, replySentinel)
	if i < 0 {
		return "", fmt.Errorf("selfplay: seat %d: the chat template drops a reply", s.seat.Index)
	}
	return text[i+len(replySentinel):], nil
}

// replyClosing returns the text the chat template puts after the content
// of the segment's last message when that is a reply (the end-of-turn
// marker and what follows it), or "".
func (s *SeatStream) replyClosing() (string, error) {
	n := len(s.msgs)
	if n == 0 || s.msgs[n-1].Role != "assistant" {
		return "", nil
	}
	msgs := append(append([]inference.Message{}, s.msgs[:n-1]...), inference.Message{Role: "assistant", Content: replySentinel})
	text, err := s.renderChat(msgs, false)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(text, replySentinel)
	if i < 0 {
		return "", nil
	}
	return text[i+len(replySentinel):], nil
}

func (s *SeatStream) tokenize(text string, addSpecial bool) ([]int32, error) {
	ids, err := s.player.Tokenizer.Tokenize(text, addSpecial, true)
	if err != nil {
		return nil, fmt.Errorf("selfplay: tokenize: %w", err)
	}
	return ids, nil
}

// restart closes the current segment and opens a new one that keeps only
// the system messages of the conversation.
func (s *SeatStream) restart() {
	var sys []inference.Message
	for _, m := range s.msgs {
		if m.Role == "system" {
			sys = append(sys, m)
		}
	}
	s.nextSegment()
	s.msgs = sys
}

// hasHistory reports whether the segment's messages hold more than the
// system messages.
func (s *SeatStream) hasHistory() bool {
	for _, m := range s.msgs {
		if m.Role != "system" {
			return true
		}
	}
	return false
}

// resegment closes the current segment and opens a new one that keeps the
// whole conversation, to be rendered afresh by the template.
func (s *SeatStream) resegment() { s.nextSegment() }

// nextSegment closes the current segment and opens an empty one.
func (s *SeatStream) nextSegment() {
	if s.keep && len(s.traj.TurnEnds) > 0 {
		s.segments = append(s.segments, s.traj)
	}
	s.traj = s.newTrajectory(s.traj.Segment + 1)
	s.consumed, s.lastEOG = "", -1
	s.stats.addSegment()
}

// appendTokens appends ids to the stream; generated marks them as the
// model's (lp and raw may be nil or short for backends that report no
// logprobs; missing entries are 0).
func (s *SeatStream) appendTokens(ids []int32, generated bool, lp, raw []float32) {
	tr := s.traj
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
func (s *SeatStream) appendReply(r turnReply) {
	tr := s.traj
	for i, a := range r.allowed {
		if tr.Allowed == nil {
			tr.Allowed = map[int]inference.AllowedTokens{}
		}
		tr.Allowed[len(tr.Tokens)+i] = a
	}
	tr.Tokens = append(tr.Tokens, r.tokens...)
	tr.Mask = append(tr.Mask, r.gen...)
	tr.Logprobs = append(tr.Logprobs, r.lp...)
	tr.RawLogprobs = append(tr.RawLogprobs, r.raw...)
}

// trajectories returns the seat's segments that contain turns, with the
// terminal reward on each (a seat's outcome is the return of every segment
// of its conversation).
func (s *SeatStream) trajectories(reward float64) []Trajectory {
	var out []Trajectory
	for _, t := range s.allSegments() {
		if len(t.TurnEnds) == 0 {
			continue
		}
		t.Reward = reward
		out = append(out, *t)
	}
	return out
}

// allSegments returns the closed segments kept and the current one.
func (s *SeatStream) allSegments() []*Trajectory {
	return append(append([]*Trajectory{}, s.segments...), s.traj)
}
