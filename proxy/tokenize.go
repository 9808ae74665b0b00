package proxy

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/omar-selfplay/omar/inference"
)

// llama.cpp splits a text at every special token before tokenising it,
// and each split searches the rest of the whole text: tokenising a
// prompt of n special tokens costs O(n × bytes), so 40,000 chat messages
// took 16 s of CPU (issue 52, defect 5). The proxy therefore tokenises
// long texts in chunks cut right after a special token: the tokenizer
// treats the text between special tokens as independent fragments, so the
// ids are those of the whole text, and each chunk's cost is bounded
// (measured in docs/results/2026-12-07-proxy-tokenize.md). It assumes no
// special token's text ends with the start of another's (llama.cpp
// matches longer specials first, this scan leftmost first); ChatML's,
// Llama's and Mistral's special texts do not overlap so.

// chunkBytes is the size past which a chunk is cut at the next boundary.
const chunkBytes = 4 << 10

// splitter finds the chunk boundaries of a tokenizer's texts.
type splitter struct {
	once sync.Once
	// byFirst lists the special texts by their first byte, longest
	// first: at a position the longest special matches, as llama.cpp
	// prefers.
	byFirst map[byte][]string
	// ok is false when chunking would change the ids: the tokenizer adds
	// a token at the end of a text, or has no special texts.
	ok bool
	// size is the chunk size (chunkBytes; tests make it small).
	size int
}

// init learns the tokenizer's special texts and checks that a chunk
// boundary leaves the ids alone.
func (sp *splitter) init(tok inference.Tokenizer) {
	st, isST := tok.(inference.SpecialTexter)
	if !isST {
		return
	}
	sp.byFirst = map[byte][]string{}
	for _, s := range st.SpecialTexts() {
		if s != "" {
			sp.byFirst[s[0]] = append(sp.byFirst[s[0]], s)
		}
	}
	if sp.size == 0 {
		sp.size = chunkBytes
	}
	for _, l := range sp.byFirst {
		slices.SortFunc(l, func(a, b string) int { return len(b) - len(a) })
	}
	// With addSpecial the tokenizer may add a token at the start (BOS),
	// which the first chunk carries, and at the end (EOS), which would
	// land after the first chunk: then the text is not cut.
	with, err1 := tok.Tokenize("a", true, true)
	without, err2 := tok.Tokenize("a", false, true)
	sp.ok = len(sp.byFirst) > 0 && err1 == nil && err2 == nil && len(without) > 0 &&
		len(with) >= len(without) && slices.Equal(with[len(with)-len(without):], without)
}

// cuts returns the boundaries at which text is cut: each right after a
// special token that a byte other than white space follows (so that no
// special token's stripping of neighbouring spaces can differ), the first
// past chunkBytes from the previous cut.
func (sp *splitter) cuts(text string) []int {
	var out []int
	last := 0
	for i := 0; i < len(text); {
		cands := sp.byFirst[text[i]]
		n := 0
		for _, s := range cands {
			if strings.HasPrefix(text[i:], s) {
				n = len(s)
				break
			}
		}
		if n == 0 {
			i++
			continue
		}
		i += n
		if i-last >= sp.size && i < len(text) && !isSpace(text[i]) {
			out = append(out, i)
			last = i
		}
	}
	return out
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// tokenize is tok.Tokenize(text, addSpecial, true) in chunks, giving up
// between chunks once ctx is done (the client went away).
func (p *Proxy) tokenize(ctx context.Context, text string, addSpecial bool) ([]int32, error) {
	p.split.once.Do(func() { p.split.init(p.tok) })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !p.split.ok || len(text) <= p.split.size {
		return p.tok.Tokenize(text, addSpecial, true)
	}
	var out []int32
	start := 0
	for k, end := range append(p.split.cuts(text), len(text)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ids, err := p.tok.Tokenize(text[start:end], addSpecial && k == 0, true)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		start = end
	}
	return out, nil
}
