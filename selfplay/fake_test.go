package selfplay

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/omar-selfplay/omar/inference"
)

// Token ids of the test tokenizer: bytes are 0..255, then the specials.
const (
	tokStart int32 = 256 // <|im_start|>
	tokEnd   int32 = 257 // <|im_end|>, end of generation
	tokBOS   int32 = 258 // <s>
)

var specials = []struct {
	text string
	id   int32
}{{"<|im_start|>", tokStart}, {"<|im_end|>", tokEnd}, {"<s>", tokBOS}}

// byteTokenizer is a byte-level tokenizer with a ChatML template. trim
// makes the template trim message contents (as many real templates do),
// which breaks the plain prefix relation after a reply with spaces.
// renderSpecial makes Detokenize print special tokens.
type byteTokenizer struct {
	trim          bool
	renderSpecial bool
}

func (bt byteTokenizer) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var out []int32
	if addSpecial {
		out = append(out, tokBOS)
	}
	for len(text) > 0 {
		matched := false
		if parseSpecial {
			for _, s := range specials {
				if strings.HasPrefix(text, s.text) {
					out = append(out, s.id)
					text = text[len(s.text):]
					matched = true
					break
				}
			}
		}
		if !matched {
			out = append(out, int32(text[0]))
			text = text[1:]
		}
	}
	return out, nil
}

func (bt byteTokenizer) Detokenize(tokens []int32) (string, error) {
	var b strings.Builder
	for _, t := range tokens {
		switch {
		case t < 256:
			b.WriteByte(byte(t))
		case bt.renderSpecial:
			for _, s := range specials {
				if s.id == t {
					b.WriteString(s.text)
				}
			}
		}
	}
	return b.String(), nil
}

func (bt byteTokenizer) ChatTemplate(msgs []inference.Message, addAssistant bool) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		c := m.Content
		if bt.trim {
			c = strings.TrimSpace(c)
		}
		fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, c)
	}
	if addAssistant {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}

func (bt byteTokenizer) EOG(t int32) bool { return t == tokEnd }

// fakeLM is a deterministic stand-in for a model: its reply depends only
// on the request's seed, and the log-probability of a token only on the
// prefix before it, so tests can recompute both. It checks that every
// sequence is append-only (each prompt extends the previous prompt and
// reply of the same key) and counts batch sizes. It does not merge
// concurrent callers.
type fakeLM struct {
	tok byteTokenizer

	mu         sync.Mutex
	last       map[string][]int32
	violations []string
	calls      int
	requests   int
	maxBatch   int
	version    int
}

func newFakeLM(tok byteTokenizer) *fakeLM { return &fakeLM{tok: tok, last: map[string][]int32{}} }

// logprob is the fake model's log-probability of tok after prefix.
func (f *fakeLM) logprob(prefix []int32, tok int32) float32 {
	h := fnv.New64a()
	for _, t := range prefix {
		h.Write([]byte{byte(t), byte(t >> 8)})
	}
	h.Write([]byte{byte(tok), byte(tok >> 8)})
	return -float32(h.Sum64()%1000+1) / 250
}

func (f *fakeLM) reply(req inference.Request) (string, bool) {
	rng := rand.New(rand.NewPCG(req.Sampling.Seed, 99))
	n := 10
	if req.Grammar != "" {
		n = 6
	}
	switch c := rng.IntN(n); {
	case c < 5:
		return fmt.Sprintf("BID %d", rng.IntN(101)), true
	case c == 5:
		return fmt.Sprintf("BID %d", rng.IntN(101)), false // stopped without EOG
	case c == 6:
		return fmt.Sprintf("  bid %d ", rng.IntN(101)), true // spaces around
	case c == 7:
		return "I pass.", true // invalid move
	case c == 8:
		return "BID 1000", true // out of range
	default:
		return strings.Repeat("blah ", 40), true // runs into MaxTokens
	}
}

func (f *fakeLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]inference.Response, len(reqs))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.requests += len(reqs)
	f.maxBatch = max(f.maxBatch, len(reqs))
	for i, req := range reqs {
		if prev, ok := f.last[req.Key]; ok && (len(req.Prompt) < len(prev) || !slices.Equal(req.Prompt[:len(prev)], prev)) {
			f.violations = append(f.violations, req.Key)
		}
		text, eog := f.reply(req)
		toks, _ := f.tok.Tokenize(text, false, false)
		if eog {
			toks = append(toks, tokEnd)
		}
		stop := inference.StopEOG
		if !eog {
			stop = inference.StopString
		}
		if len(toks) > req.MaxTokens {
			toks, stop = toks[:req.MaxTokens], inference.StopLength
		}
		resp := inference.Response{Tokens: toks, Stop: stop, PolicyVersion: f.version}
		seq := slices.Clone(req.Prompt)
		for _, t := range toks {
			lp := f.logprob(seq, t)
			resp.Logprobs = append(resp.Logprobs, lp)
			resp.RawLogprobs = append(resp.RawLogprobs, lp/2)
			seq = append(seq, t)
		}
		resp.Text, _ = f.tok.Detokenize(toks)
		f.last[req.Key] = seq
		out[i] = resp
	}
	return out, nil
}

func (f *fakeLM) Close() error { return nil }
