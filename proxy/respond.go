package proxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/omar-selfplay/omar/inference"
)

// fingerprint is the system_fingerprint of every answer: one omar build
// serves one model.
const fingerprint = "omar"

// finishReason maps a stop reason to OpenAI's finish_reason.
func finishReason(s inference.StopReason) string {
	switch s {
	case inference.StopLength, inference.StopFull:
		return "length"
	}
	return "stop"
}

func (p *Proxy) usage(res *result) *Usage {
	n := len(res.resp.Tokens)
	return &Usage{PromptTokens: res.prompt, CompletionTokens: n, TotalTokens: res.prompt + n,
		PromptTokensDetails: &PromptDetail{CachedTokens: res.resp.ReusedTokens}}
}

// tokenEntry is token i's chat logprob entry: the raw model logprob (what
// OpenAI reports; the behaviour logprob is in the session record).
func (p *Proxy) tokenEntry(res *result, i int) TokenLogprob {
	e := TokenLogprob{Token: res.pieces[i], Logprob: float64(res.resp.RawLogprobs[i]), Bytes: byteList(res.pieces[i]), TopLogprobs: []TopLogprob{}}
	if i < len(res.resp.TopLogprobs) {
		for _, t := range res.resp.TopLogprobs[i] {
			piece := p.piece(t.Token)
			e.TopLogprobs = append(e.TopLogprobs, TopLogprob{Token: piece, Logprob: float64(t.Logprob), Bytes: byteList(piece)})
		}
	}
	return e
}

// piece is one token's text ("" when it cannot be detokenised).
func (p *Proxy) piece(t int32) string {
	s, _ := p.tok.Detokenize([]int32{t})
	return s
}

// byteList is s's bytes as JSON numbers (a piece may be part of a UTF-8
// character; the bytes are exact where the string shows U+FFFD).
func byteList(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// replyMessage is the reply's message and finish reason: its content, or
// the calls read from it and the content besides them.
func replyMessage(res *result) (*ReplyMessage, string) {
	content := res.content
	if res.calls == nil {
		return &ReplyMessage{Role: "assistant", Content: &content}, finishReason(res.resp.Stop)
	}
	m := &ReplyMessage{Role: "assistant", ToolCalls: res.calls, nullContent: true}
	if res.callText != "" {
		text := res.callText
		m.Content = &text
	}
	return m, "tool_calls"
}

func (p *Proxy) chatCompletion(pl *plan, res *result) ChatCompletion {
	msg, fr := replyMessage(res)
	ch := ChatChoice{Message: msg, FinishReason: &fr}
	if pl.logprobs {
		lp := &ChatLogprobs{Content: []TokenLogprob{}}
		for i := range res.resp.Tokens {
			lp.Content = append(lp.Content, p.tokenEntry(res, i))
		}
		ch.Logprobs = lp
	}
	return ChatCompletion{ID: "chatcmpl-" + res.id, Object: "chat.completion", Created: res.created, Model: p.opts.Model,
		SystemFingerprint: fingerprint, Choices: []ChatChoice{ch}, Usage: p.usage(res), Omar: res.info}
}

func (p *Proxy) completion(pl *plan, res *result) Completion {
	fr := finishReason(res.resp.Stop)
	ch := CompletionChoice{Text: res.content, FinishReason: &fr}
	if pl.logprobs {
		ch.Logprobs = p.legacyLogprobs(pl, res, 0, len(res.resp.Tokens), 0)
	}
	return Completion{ID: "cmpl-" + res.id, Object: "text_completion", Created: res.created, Model: p.opts.Model,
		SystemFingerprint: fingerprint, Choices: []CompletionChoice{ch}, Usage: p.usage(res), Omar: res.info}
}

// legacyLogprobs are the completions API's arrays for tokens [from, to);
// offset is the text offset of token from.
func (p *Proxy) legacyLogprobs(pl *plan, res *result, from, to, offset int) *CompletionLogprobs {
	lp := &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TextOffset: []int{}}
	if pl.top > 0 {
		lp.TopLogprobs = []map[string]float64{}
	}
	for i := from; i < to; i++ {
		lp.Tokens = append(lp.Tokens, res.pieces[i])
		lp.TokenLogprobs = append(lp.TokenLogprobs, float64(res.resp.RawLogprobs[i]))
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(res.pieces[i])
		if pl.top > 0 && i < len(res.resp.TopLogprobs) {
			m := map[string]float64{}
			for _, t := range res.resp.TopLogprobs[i] {
				if _, ok := m[p.piece(t.Token)]; !ok {
					m[p.piece(t.Token)] = float64(t.Logprob)
				}
			}
			lp.TopLogprobs = append(lp.TopLogprobs, m)
		}
	}
	return lp
}

// visiblePieces are the tokens' texts as the reply shows them: special
// tokens (end of turn, control tokens) render empty, as in the backend's
// Text.
func (p *Proxy) visiblePieces(res *result) []string {
	var specials []string
	if st, ok := p.tok.(inference.SpecialTexter); ok {
		specials = st.SpecialTexts()
	}
	out := make([]string, len(res.pieces))
	for i, t := range res.resp.Tokens {
		if !p.tok.EOG(t) && !slices.Contains(specials, res.pieces[i]) {
			out[i] = res.pieces[i]
		}
	}
	return out
}

// deltas splits content over the tokens: delta i is what token i adds,
// holding back a UTF-8 character until its last byte has come, and the
// last delta takes whatever is left. When the pieces do not add up to the
// reply's text (a tokenizer whose pieces are not its text), the whole
// content goes with the last token.
func deltas(content, text string, vis []string) []string {
	out := make([]string, len(vis))
	if len(out) == 0 {
		return out
	}
	if strings.Join(vis, "") != text {
		out[len(out)-1] = content
		return out
	}
	end, emitted := 0, 0
	for i, v := range vis {
		end = min(end+len(v), len(content))
		cut := end
		if i == len(vis)-1 {
			cut = len(content)
		}
		for cut > emitted && cut < len(content) && !utf8.RuneStart(content[cut]) {
			cut--
		}
		out[i] = content[emitted:cut]
		emitted = cut
	}
	return out
}

// writeStream answers a streaming call as server-sent events. The reply
// is complete when the first event is written (the backend returns whole
// replies): the events carry it token by token, as clients expect.
func (p *Proxy) writeStream(w http.ResponseWriter, pl *plan, res *result) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	var usage *Usage
	if pl.usage {
		usage = p.usage(res)
	}
	ok := false
	if pl.chat {
		ok = p.streamChat(send, pl, res, usage)
	} else {
		ok = p.streamCompletion(send, pl, res, usage)
	}
	if !ok {
		return
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if flusher != nil {
		flusher.Flush()
	}
}

// streamChat sends a chat reply's chunks; false: the client has gone.
func (p *Proxy) streamChat(send func(any) bool, pl *plan, res *result, usage *Usage) bool {
	msg, fr := replyMessage(res)
	ds := deltas(res.content, res.resp.Text, p.visiblePieces(res))
	id := "chatcmpl-" + res.id
	chunk := func(ch ChatChoice) ChatChunk {
		return ChatChunk{ID: id, Object: "chat.completion.chunk", Created: res.created, Model: p.opts.Model,
			SystemFingerprint: fingerprint, Choices: []ChatChoice{ch}}
	}
	empty := ""
	first := chunk(ChatChoice{Delta: &ReplyMessage{Role: "assistant", Content: &empty}})
	first.Omar = res.info
	if !send(first) {
		return false
	}
	if res.calls != nil {
		if !send(chunk(p.callsDelta(pl, res, msg))) {
			return false
		}
	}
	for i, d := range ds {
		if res.calls != nil {
			break
		}
		ch := ChatChoice{Delta: &ReplyMessage{Content: &d}}
		if pl.logprobs {
			ch.Logprobs = &ChatLogprobs{Content: []TokenLogprob{p.tokenEntry(res, i)}}
		}
		if !send(chunk(ch)) {
			return false
		}
	}
	if !send(chunk(ChatChoice{Delta: &ReplyMessage{}, FinishReason: &fr})) {
		return false
	}
	if usage != nil {
		last := chunk(ChatChoice{})
		last.Choices, last.Usage = []ChatChoice{}, usage
		if !send(last) {
			return false
		}
	}
	return true
}

// streamCompletion sends a completion's chunks; false: the client has gone.
func (p *Proxy) streamCompletion(send func(any) bool, pl *plan, res *result, usage *Usage) bool {
	ds := deltas(res.content, res.resp.Text, p.visiblePieces(res))
	fr := finishReason(res.resp.Stop)
	id := "cmpl-" + res.id
	chunk := func(ch CompletionChoice) Completion {
		return Completion{ID: id, Object: "text_completion", Created: res.created, Model: p.opts.Model,
			SystemFingerprint: fingerprint, Choices: []CompletionChoice{ch}}
	}
	offset := 0
	for i, d := range ds {
		ch := CompletionChoice{Text: d}
		if pl.logprobs {
			ch.Logprobs = p.legacyLogprobs(pl, res, i, i+1, offset)
		}
		offset += len(res.pieces[i])
		c := chunk(ch)
		if i == 0 {
			c.Omar = res.info
		}
		if !send(c) {
			return false
		}
	}
	if !send(chunk(CompletionChoice{FinishReason: &fr})) {
		return false
	}
	if usage != nil {
		last := chunk(CompletionChoice{})
		last.Choices, last.Usage = []CompletionChoice{}, usage
		if !send(last) {
			return false
		}
	}
	return true
}

// callsDelta is the one delta of a reply with tool calls: its content
// besides the calls, every call whole (with its index, as streamed calls
// carry), and all the tokens' logprobs. The reply is complete before the
// first chunk, so nothing is gained by cutting the arguments up.
func (p *Proxy) callsDelta(pl *plan, res *result, msg *ReplyMessage) ChatChoice {
	d := &ReplyMessage{Content: msg.Content}
	for i, c := range msg.ToolCalls {
		c.Index = &i
		d.ToolCalls = append(d.ToolCalls, c)
	}
	ch := ChatChoice{Delta: d}
	if pl.logprobs {
		lp := &ChatLogprobs{Content: []TokenLogprob{}}
		for i := range res.resp.Tokens {
			lp.Content = append(lp.Content, p.tokenEntry(res, i))
		}
		ch.Logprobs = lp
	}
	return ch
}
