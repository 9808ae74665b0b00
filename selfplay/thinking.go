package selfplay

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/chattemplate"
	"github.com/omar-selfplay/omar/inference"
)

// Thinking modes (Thinking.Mode).
const (
	// ThinkingOff renders the template's no-reasoning form (Qwen3:
	// enable_thinking=false, an empty think block after the opening of
	// the reply).
	ThinkingOff = "off"
	// ThinkingOn lets the model reason in a <think> block before its
	// move; the move is what follows </think>.
	ThinkingOn = "on"
	// ThinkingBudget is ThinkingOn with at most Budget reasoning tokens:
	// then </think> is written for the model and it answers.
	ThinkingBudget = "budget"
)

// Thinking losses (Thinking.Loss).
const (
	// ThinkingTrain trains the reasoning tokens like the move's.
	ThinkingTrain = "train"
	// ThinkingMask keeps the reasoning in the stream but out of the loss.
	ThinkingMask = "mask"
)

// Thinking histories (Thinking.History).
const (
	// HistoryTemplate keeps the conversation as the chat template renders
	// it (Qwen3 drops earlier replies' reasoning): when the rendering no
	// longer extends the seat's stream, a new segment starts with the
	// whole conversation re-rendered, so each segment's tokens are exactly
	// what the model read and sampled.
	HistoryTemplate = "template"
	// HistoryStream keeps every reply in the stream as sampled, reasoning
	// included, and appends only the template's text after it: one
	// segment, its cache reused, but the model reads its earlier
	// reasoning, which the template would have dropped.
	HistoryStream = "stream"
)

// Thinking is how model seats of a reasoning model reply. The zero value
// leaves the template's default (Qwen3: thinking on, nothing parsed).
type Thinking struct {
	Mode    string // "", ThinkingOff, ThinkingOn or ThinkingBudget
	Budget  int    // the most reasoning tokens, with ThinkingBudget
	Loss    string // ThinkingTrain ("" too) or ThinkingMask
	History string // HistoryTemplate ("" too) or HistoryStream
}

// ParseThinking reads the config form: "off", "on" or "budget N".
func ParseThinking(s string) (Thinking, error) {
	f := strings.Fields(s)
	switch {
	case len(f) == 0:
		return Thinking{}, nil
	case len(f) == 1 && (f[0] == ThinkingOff || f[0] == ThinkingOn):
		return Thinking{Mode: f[0]}, nil
	case len(f) == 2 && f[0] == ThinkingBudget:
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 {
			return Thinking{}, fmt.Errorf("thinking %q: want budget N with N ≥ 1 reasoning tokens", s)
		}
		return Thinking{Mode: ThinkingBudget, Budget: n}, nil
	}
	return Thinking{}, fmt.Errorf("thinking %q: want off, on or budget N", s)
}

// Validate checks t.
func (t Thinking) Validate() error {
	switch {
	case t.Mode != "" && t.Mode != ThinkingOff && t.Mode != ThinkingOn && t.Mode != ThinkingBudget:
		return fmt.Errorf("selfplay: thinking mode %q: want off, on or budget", t.Mode)
	case t.Mode == ThinkingBudget && t.Budget < 1:
		return fmt.Errorf("selfplay: thinking budget %d < 1", t.Budget)
	case t.Mode != ThinkingBudget && t.Budget != 0:
		return fmt.Errorf("selfplay: thinking budget %d without the budget mode", t.Budget)
	case t.Loss != "" && t.Loss != ThinkingTrain && t.Loss != ThinkingMask:
		return fmt.Errorf("selfplay: thinking loss %q: want train or mask", t.Loss)
	case t.History != "" && t.History != HistoryTemplate && t.History != HistoryStream:
		return fmt.Errorf("selfplay: thinking history %q: want template or stream", t.History)
	}
	return nil
}

// reasons reports whether the model writes reasoning before its move.
func (t Thinking) reasons() bool { return t.Mode == ThinkingOn || t.Mode == ThinkingBudget }

// chatOptions are the template settings of a rendering.
func (t Thinking) chatOptions(addAssistant bool) inference.ChatOptions {
	o := inference.ChatOptions{AddAssistant: addAssistant}
	if t.Mode != "" {
		on := t.reasons()
		o.Thinking = &on
	}
	return o
}

// negatedClass matches the opening of a negated GBNF character class.
var negatedClass = regexp.MustCompile(`\[\^`)

// noMarkup keeps a move grammar's free text from holding markup: every
// negated character class also excludes '<', with which the control
// tokens of the chat templates (<|im_end|>, <think>, <end_of_turn>,
// <|eot_id|>) begin, so a free-text reply (Werewolf's speech) can never
// spell one.
func noMarkup(g string) string { return negatedClass.ReplaceAllString(g, `[^<`) }

// thinkingGrammar wraps a move grammar for a reply that reasons first:
// "<think>", reasoning without markup, "</think>", a blank line, then the
// move by the move grammar (its root renamed). With g empty the reply is
// free and the move is parsed after </think>.
func thinkingGrammar(g string) string {
	if g == "" {
		return ""
	}
	return "root ::= \"<think>\" think-text \"</think>\\n\\n\" think-move\n" +
		"think-text ::= [^<]*\n" + grammarRoot.ReplaceAllString(noMarkup(g), "think-move$1")
}

// reasoningGrammar is the grammar of the reasoning phase of a budgeted
// reply: "<think>" and reasoning without markup, up to </think>.
const reasoningGrammar = "root ::= \"<think>\" [^<]* \"</think>\""

// thinkClose is what is written for the model when its reasoning budget
// runs out, and thinkSep what follows </think> before the move.
const (
	thinkClose = "\n" + chattemplate.ThinkClose
	thinkSep   = "\n\n"
)

// turnReply is what one turn appended to the stream.
type turnReply struct {
	tokens []int32
	gen    []bool // sampled (and trained) tokens
	lp     []float32
	raw    []float32
	// allowed are the grammar's recorded sets by index in tokens
	// (inference.Response.Allowed).
	allowed map[int]inference.AllowedTokens
	last    inference.Response // the last response (stop reason, version)
	reused  int
}

func (r *turnReply) add(ids []int32, gen bool, lp, raw []float32) {
	r.tokens = append(r.tokens, ids...)
	for i := range ids {
		r.gen = append(r.gen, gen)
		var a, b float32
		if gen && i < len(lp) {
			a = lp[i]
		}
		if gen && i < len(raw) {
			b = raw[i]
		}
		r.lp, r.raw = append(r.lp, a), append(r.raw, b)
	}
}

// addResponse adds a response's sampled tokens with their logprobs and
// recorded grammar sets.
func (r *turnReply) addResponse(resp inference.Response) {
	at := len(r.tokens)
	r.add(resp.Tokens, true, resp.Logprobs, resp.RawLogprobs)
	for i, a := range resp.Allowed {
		if a.IDs != nil && i < len(resp.Tokens) {
			if r.allowed == nil {
				r.allowed = map[int]inference.AllowedTokens{}
			}
			r.allowed[at+i] = a
		}
	}
}

// think plays a budgeted reply in two requests: the reasoning (at most
// Budget tokens, stopped at </think>; the grammar, when on, keeps markup
// out of it), then </think> written for the model when it did not close,
// the separator, and the move under the move grammar. The second request
// extends the first's prompt under the same key, so its cache is reused.
func (s *SeatStream) think(ctx context.Context, req inference.Request, moveGrammar string, send sender) (turnReply, error) {
	var out turnReply
	th := s.th
	first := req
	first.MaxTokens = min(th.Budget, req.MaxTokens)
	first.Stop = append(append([]string{}, req.Stop...), chattemplate.ThinkClose)
	if moveGrammar != "" {
		first.Grammar = reasoningGrammar
	} else {
		first.Grammar = ""
	}
	resp, err := send(ctx, first)
	if err != nil {
		return out, err
	}
	out.addResponse(resp)
	out.last, out.reused = resp, resp.ReusedTokens
	n := len(resp.Tokens)
	if n > 0 && s.player.Tokenizer.EOG(resp.Tokens[n-1]) {
		return out, nil // the turn ended in the reasoning
	}
	text, err := s.player.Tokenizer.Detokenize(resp.Tokens)
	if err != nil {
		return out, fmt.Errorf("selfplay: detokenize reasoning: %w", err)
	}
	forced := thinkSep
	switch {
	case strings.Contains(text, chattemplate.ThinkClose):
	case strings.HasPrefix(chattemplate.ThinkOpen, text):
		// The budget ran out inside the opening tag (a vocabulary that
		// spells <think> in pieces): complete it first.
		forced = chattemplate.ThinkOpen[len(text):] + thinkClose + thinkSep
	default:
		forced = thinkClose + thinkSep
	}
	ids, err := s.tokenize(forced, false)
	if err != nil {
		return out, err
	}
	out.add(ids, false, nil, nil)
	rest := req.MaxTokens - len(out.tokens)
	if rest <= 0 {
		return out, nil
	}
	second := req
	second.Prompt = append(append([]int32{}, req.Prompt...), out.tokens...)
	second.Prompt = second.Prompt[:len(second.Prompt):len(second.Prompt)]
	second.MaxTokens = rest
	second.Grammar = moveGrammar
	second.Sampling.Seed++ // a draw of its own, still a function of (seat, turn)
	resp, err = send(ctx, second)
	if err != nil {
		return out, err
	}
	out.addResponse(resp)
	out.last, out.reused = resp, out.reused+resp.ReusedTokens
	return out, nil
}

// maskReasoning clears the generated flags of a reply's tokens up to and
// including the one that completes </think> (thinking loss "mask"): they
// stay in the stream as context, out of the loss.
func (s *SeatStream) maskReasoning(r *turnReply) error {
	// The first prefix whose text holds </think>: prefixes only grow, so
	// a binary search over their lengths finds it.
	lo, hi := 0, len(r.tokens)
	text, err := s.player.Tokenizer.Detokenize(r.tokens)
	if err != nil {
		return fmt.Errorf("selfplay: detokenize reply: %w", err)
	}
	if !strings.Contains(text, chattemplate.ThinkClose) {
		hi = len(r.tokens) // no close: the whole reply is reasoning
		lo = hi
	}
	for lo < hi {
		mid := (lo + hi) / 2
		t, err := s.player.Tokenizer.Detokenize(r.tokens[:mid])
		if err != nil {
			return fmt.Errorf("selfplay: detokenize reply: %w", err)
		}
		if strings.Contains(t, chattemplate.ThinkClose) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for i := range lo {
		r.gen[i], r.lp[i], r.raw[i] = false, 0, 0
		delete(r.allowed, i)
	}
	return nil
}
