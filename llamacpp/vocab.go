package llamacpp

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unicode/utf8"
)

var (
	// int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab);
	llamaVocabNTokens func(v uintptr) int32
	// enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab);
	llamaVocabType func(v uintptr) int32
	// llama_token llama_vocab_bos(const struct llama_vocab * vocab);
	llamaVocabBOS func(v uintptr) int32
	// llama_token llama_vocab_eos(const struct llama_vocab * vocab);
	llamaVocabEOS func(v uintptr) int32
	// llama_token llama_vocab_eot(const struct llama_vocab * vocab);
	llamaVocabEOT func(v uintptr) int32
	// llama_token llama_vocab_nl(const struct llama_vocab * vocab);
	llamaVocabNL func(v uintptr) int32
	// bool llama_vocab_get_add_bos(const struct llama_vocab * vocab);
	llamaVocabGetAddBOS func(v uintptr) bool
	// bool llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token);
	llamaVocabIsEOG func(v uintptr, t int32) bool
	// bool llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token);
	llamaVocabIsControl func(v uintptr, t int32) bool
	// const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token);
	llamaVocabGetText func(v uintptr, t int32) *byte
	// int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len,
	//                        llama_token * tokens, int32_t n_tokens_max, bool add_special, bool parse_special);
	llamaTokenize func(v uintptr, text *byte, textLen int32, tokens *int32, nMax int32, addSpecial, parseSpecial bool) int32
	// int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf,
	//                              int32_t length, int32_t lstrip, bool special);
	llamaTokenToPiece func(v uintptr, t int32, buf *byte, length int32, lstrip int32, special bool) int32
	// int32_t llama_detokenize(const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens,
	//                          char * text, int32_t text_len_max, bool remove_special, bool unparse_special);
	llamaDetokenize func(v uintptr, tokens *int32, n int32, text *byte, max int32, removeSpecial, unparseSpecial bool) int32
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaVocabNTokens, "llama_vocab_n_tokens"},
			{&llamaVocabType, "llama_vocab_type"},
			{&llamaVocabBOS, "llama_vocab_bos"},
			{&llamaVocabEOS, "llama_vocab_eos"},
			{&llamaVocabEOT, "llama_vocab_eot"},
			{&llamaVocabNL, "llama_vocab_nl"},
			{&llamaVocabGetAddBOS, "llama_vocab_get_add_bos"},
			{&llamaVocabIsEOG, "llama_vocab_is_eog"},
			{&llamaVocabIsControl, "llama_vocab_is_control"},
			{&llamaVocabGetText, "llama_vocab_get_text"},
			{&llamaTokenize, "llama_tokenize"},
			{&llamaTokenToPiece, "llama_token_to_piece"},
			{&llamaDetokenize, "llama_detokenize"},
		})
	})
}

// TokenNull is LLAMA_TOKEN_NULL: "no such token" (for example a vocabulary
// without BOS).
const TokenNull int32 = -1

// Vocab is a model's vocabulary; it lives as long as its Model. Its methods
// are safe for concurrent use (llama.cpp's tokenizer API is thread-safe).
type Vocab struct{ ptr uintptr }

// NTokens is the vocabulary size.
func (v *Vocab) NTokens() int { return int(llamaVocabNTokens(v.ptr)) }

// Type is enum llama_vocab_type (1 SPM, 2 BPE, …).
func (v *Vocab) Type() int { return int(llamaVocabType(v.ptr)) }

// BOS, EOS, EOT and NL return special token ids (TokenNull when absent).
func (v *Vocab) BOS() int32 { return llamaVocabBOS(v.ptr) }
func (v *Vocab) EOS() int32 { return llamaVocabEOS(v.ptr) }
func (v *Vocab) EOT() int32 { return llamaVocabEOT(v.ptr) }
func (v *Vocab) NL() int32  { return llamaVocabNL(v.ptr) }

// AddBOS reports whether tokenizing with addSpecial prepends BOS.
func (v *Vocab) AddBOS() bool { return llamaVocabGetAddBOS(v.ptr) }

// IsEOG reports end-of-generation tokens (EOS, EOT, <|im_end|>, …).
func (v *Vocab) IsEOG(t int32) bool { return v.valid(t) && llamaVocabIsEOG(v.ptr, t) }

// IsControl reports control tokens.
func (v *Vocab) IsControl(t int32) bool { return v.valid(t) && llamaVocabIsControl(v.ptr, t) }

// valid guards the per-token calls: llama.cpp indexes its tables with
// std::vector::at and aborts the process on an id outside the vocabulary.
func (v *Vocab) valid(t int32) bool { return t >= 0 && int(t) < v.NTokens() }

// Text is the token's text as stored in the vocabulary.
func (v *Vocab) Text(t int32) string {
	if !v.valid(t) {
		return ""
	}
	return goString(llamaVocabGetText(v.ptr, t))
}

// ErrTokenize is returned when llama.cpp cannot tokenize the text.
var ErrTokenize = errors.New("llamacpp: tokenize failed")

// Tokenize converts text to tokens. addSpecial adds BOS/EOS as the model
// asks; parseSpecial turns special-token text (like "<|im_start|>") into
// the special tokens instead of plain text.
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("%w: text of %d bytes is too long", ErrTokenize, len(text))
	}
	// llama.cpp's pre-tokenizers assume UTF-8 and can abort the process on
	// stray bytes, which grammar-constrained replies may contain (a negated
	// class admits continuation bytes). Invalid runs become U+FFFD.
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	b := []byte(text)
	var tp *byte
	if len(b) > 0 {
		tp = &b[0]
	}
	toks := make([]int32, len(b)+8)
	n := llamaTokenize(v.ptr, tp, int32(len(b)), &toks[0], int32(len(toks)), addSpecial, parseSpecial)
	if n < 0 {
		if n == -1<<31 {
			return nil, fmt.Errorf("%w: result overflows", ErrTokenize)
		}
		toks = make([]int32, -n)
		n = llamaTokenize(v.ptr, tp, int32(len(b)), &toks[0], int32(len(toks)), addSpecial, parseSpecial)
		if n < 0 {
			return nil, ErrTokenize
		}
	}
	runtime.KeepAlive(b)
	return toks[:n], nil
}

// Piece is the text of one token. special renders special tokens (like
// "<|im_end|>"); otherwise they render as "".
func (v *Vocab) Piece(t int32, special bool) string {
	if !v.valid(t) {
		return ""
	}
	var buf [64]byte
	n := llamaTokenToPiece(v.ptr, t, &buf[0], int32(len(buf)), 0, special)
	if n >= 0 {
		return string(buf[:n])
	}
	big := make([]byte, -n)
	n = llamaTokenToPiece(v.ptr, t, &big[0], int32(len(big)), 0, special)
	if n < 0 {
		return ""
	}
	return string(big[:n])
}

// AppendPiece appends the bytes of token t to dst (a byte-level BPE token
// may be part of a UTF-8 character, so callers accumulate bytes, not
// strings).
func (v *Vocab) AppendPiece(dst []byte, t int32, special bool) []byte {
	return append(dst, v.Piece(t, special)...)
}

// Detokenize converts tokens back to text. removeSpecial drops BOS/EOS the
// model adds; unparseSpecial renders special tokens as their text.
func (v *Vocab) Detokenize(tokens []int32, removeSpecial, unparseSpecial bool) (string, error) {
	if len(tokens) == 0 {
		return "", nil
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= v.NTokens() {
			return "", fmt.Errorf("llamacpp: detokenize: token %d outside the vocabulary of %d", t, v.NTokens())
		}
	}
	buf := make([]byte, len(tokens)*8+16)
	n := llamaDetokenize(v.ptr, &tokens[0], int32(len(tokens)), &buf[0], int32(len(buf)), removeSpecial, unparseSpecial)
	if n < 0 {
		buf = make([]byte, -n)
		n = llamaDetokenize(v.ptr, &tokens[0], int32(len(tokens)), &buf[0], int32(len(buf)), removeSpecial, unparseSpecial)
		if n < 0 {
			return "", errors.New("llamacpp: detokenize failed")
		}
	}
	return string(buf[:n]), nil
}
