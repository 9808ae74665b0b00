package model

import (
	"fmt"
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
)

// Token types of tokenizer.ggml.token_type (llama_token_type).
const (
	TokenNormal      int32 = 1
	TokenUnknown     int32 = 2
	TokenControl     int32 = 3
	TokenUserDefined int32 = 4
	TokenUnused      int32 = 5
	TokenByte        int32 = 6
)

// Special token texts of the vocabularies we write. <|im_start|> and
// <|im_end|> frame ChatML turns; <|endoftext|> separates documents.
const (
	EndOfText = "<|endoftext|>"
	IMStart   = "<|im_start|>"
	IMEnd     = "<|im_end|>"
)

// ChatTemplate is the standard ChatML Jinja template; llama.cpp's
// llama_chat_apply_template recognises it by "<|im_start|>".
const ChatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Tokenizer is a pure-Go byte-level BPE tokenizer for "gpt2"-model
// vocabularies with the "gpt-2" pre-tokenizer, the kind Generate writes. It
// produces the same ids as llama.cpp for such vocabularies and exists for
// tests and for backends without llama.cpp; at run time the llama backend
// uses llama.cpp's own tokenizer.
type Tokenizer struct {
	tokens   []string // byte-encoded token texts
	types    []int32
	ids      map[string]int32
	ranks    map[[2]string]int
	specials []string // control/user-defined token texts, longest first

	BOS, EOS, EOT, PAD int32 // -1 when absent
}

// NewTokenizer builds a tokenizer from the vocabulary arrays of a GGUF file.
func NewTokenizer(tokens []string, types []int32, merges []string) (*Tokenizer, error) {
	if len(types) != len(tokens) {
		return nil, fmt.Errorf("model: %d token types for %d tokens", len(types), len(tokens))
	}
	t := &Tokenizer{tokens: tokens, types: types, ids: make(map[string]int32, len(tokens)),
		ranks: make(map[[2]string]int, len(merges)), BOS: -1, EOS: -1, EOT: -1, PAD: -1}
	for i, s := range tokens {
		if _, dup := t.ids[s]; !dup {
			t.ids[s] = int32(i)
		}
		if types[i] == TokenControl || types[i] == TokenUserDefined {
			t.specials = append(t.specials, s)
		}
	}
	for b := 0; b < 256; b++ {
		if _, ok := t.ids[string(byteToRune[b])]; !ok {
			return nil, fmt.Errorf("model: vocabulary lacks the byte token for %#02x", b)
		}
	}
	for i, m := range merges {
		l, r, ok := splitMerge(m)
		if !ok {
			return nil, fmt.Errorf("model: merge %d (%q) is not \"left right\"", i, m)
		}
		if _, dup := t.ranks[[2]string{l, r}]; !dup {
			t.ranks[[2]string{l, r}] = i
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool { return len(t.specials[i]) > len(t.specials[j]) })
	return t, nil
}

// TokenizerFromGGUF reads the tokenizer of a GGUF file. Only byte-level
// BPE ("gpt2") vocabularies are supported.
func TokenizerFromGGUF(f *gguf.File) (*Tokenizer, error) {
	kind, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if kind != "gpt2" {
		return nil, fmt.Errorf("model: tokenizer %q is not supported by the Go tokenizer (only gpt2)", kind)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, err
	}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = TokenNormal
	}
	if v, ok := f.Get("tokenizer.ggml.token_type"); ok {
		tt, ok := v.([]int32)
		if !ok || len(tt) != len(tokens) {
			return nil, fmt.Errorf("model: tokenizer.ggml.token_type is %T of the wrong length", v)
		}
		types = tt
	}
	t, err := NewTokenizer(tokens, types, merges)
	if err != nil {
		return nil, err
	}
	for key, dst := range map[string]*int32{"bos": &t.BOS, "eos": &t.EOS, "eot": &t.EOT, "padding": &t.PAD} {
		if n, err := f.Uint("tokenizer.ggml." + key + "_token_id"); err == nil && n < uint64(len(tokens)) {
			*dst = int32(n)
		}
	}
	if t.EOT < 0 {
		t.EOT = t.ID(IMEnd)
	}
	return t, nil
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// ID returns the id of a token given by its text (special tokens by their
// literal text, others in the byte-to-unicode alphabet), or -1.
func (t *Tokenizer) ID(text string) int32 {
	if id, ok := t.ids[text]; ok {
		return id
	}
	return -1
}

// IsControl reports whether id is a control token (such as <|im_end|>).
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.types) && t.types[id] == TokenControl
}

// Encode tokenizes text. With parseSpecial, literal special-token texts
// (such as "<|im_start|>") become their token; otherwise they are ordinary
// text. No BOS is added: our vocabularies, like Qwen's, do not use one.
func (t *Tokenizer) Encode(text string, parseSpecial bool) []int32 {
	var out []int32
	for len(text) > 0 {
		seg, special := text, ""
		if parseSpecial {
			if i, s := t.findSpecial(text); i >= 0 {
				seg, special = text[:i], s
			}
		}
		for _, piece := range preSplit(seg) {
			out = t.encodeWord(out, byteEncode(piece))
		}
		text = text[len(seg):]
		if special != "" {
			out = append(out, t.ids[special])
			text = text[len(special):]
		}
	}
	return out
}

// findSpecial returns the earliest (then longest) special token in text.
func (t *Tokenizer) findSpecial(text string) (int, string) {
	best, bestTok := -1, ""
	for _, s := range t.specials {
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best, bestTok = i, s
		}
	}
	return best, bestTok
}

// encodeWord applies the merges to one byte-encoded pre-token: repeatedly
// merge the adjacent pair with the lowest rank, leftmost first.
func (t *Tokenizer) encodeWord(out []int32, w string) []int32 {
	syms := make([]string, 0, len(w))
	for _, r := range w {
		syms = append(syms, string(r))
	}
	for len(syms) > 1 {
		best, bestRank := -1, int(^uint(0)>>1)
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.ranks[[2]string{syms[i], syms[i+1]}]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		l, r := syms[best], syms[best+1]
		merged := syms[:0:0]
		for i := 0; i < len(syms); i++ {
			if i+1 < len(syms) && syms[i] == l && syms[i+1] == r {
				merged = append(merged, l+r)
				i++
			} else {
				merged = append(merged, syms[i])
			}
		}
		syms = merged
	}
	for _, s := range syms {
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		// A merge result missing from the vocabulary falls back to bytes,
		// as llama.cpp does.
		for _, r := range s {
			out = append(out, t.ids[string(r)])
		}
	}
	return out
}

// Decode turns ids back into text. Control tokens are rendered as their
// literal text; unknown ids are an error.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.tokens) {
			return b.String(), fmt.Errorf("model: token id %d outside the vocabulary of %d", id, len(t.tokens))
		}
		if t.types[id] == TokenControl || t.types[id] == TokenUserDefined {
			b.WriteString(t.tokens[id])
		} else {
			b.Write(byteDecode(t.tokens[id]))
		}
	}
	return b.String(), nil
}
