package llamacpp

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/omar-selfplay/omar/inference/gbnf"
)

// A grammar sampler's mask depends only on its parse state: the stacks of
// positions in its rules and the partial UTF-8 character it is inside.
// llama.h gives no access to that state, so it is read here from the
// structures of llama.cpp v0.5.0 (the only version Load accepts), laid out
// by libstdc++ (std::string 32 bytes, std::vector 24):
//
//	struct llama_sampler         { iface *; ctx * }                  ctx at 8
//	struct llama_sampler_grammar { vocab *; string grammar_str;      str at 8
//	                               string grammar_root; llama_grammar * }  root at 40, grammar at 72
//	struct llama_grammar         { vocab *; vector<vector<elem>> rules;    rules at 8
//	                               vector<vector<elem *>> stacks;           stacks at 32
//	                               llama_partial_utf8 partial_utf8; ... }   partial at 56
//
// newGrammarView reads everything once and compares it with what it must
// be — both vocabulary pointers, the grammar text and root, and every rule
// element by element against gbnf's parse of the same text — and returns
// nil (no state: callers fall back to masking every step) on any
// difference, so a different layout costs speed, never correctness.
const (
	samplerCtxOff   = 8
	sgVocabOff      = 0
	sgTextOff       = 8
	sgRootOff       = 40
	sgGrammarOff    = 72
	gVocabOff       = 0
	gRulesOff       = 8
	gStacksOff      = 32
	gPartialOff     = 56
	gAwaitingOff    = 65
	cxxVectorSize   = 24
	grammarElemSize = 8
)

// cptr turns an address llama.cpp gave us into a pointer (through memory,
// which go vet accepts; the memory is C's and never moves).
func cptr(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

func readWord(a uintptr) uintptr                { return *(*uintptr)(cptr(a)) }
func readU32(a uintptr) uint32                  { return *(*uint32)(cptr(a)) }
func readByte(a uintptr) byte                   { return *(*byte)(cptr(a)) }
func readVector(a uintptr) (begin, end uintptr) { return readWord(a), readWord(a + 8) }

// readCxxString reads a libstdc++ std::string (data pointer, size).
func readCxxString(a uintptr, max int) (string, bool) {
	data, n := readWord(a), int(readWord(a+8))
	if n < 0 || n > max || (n > 0 && data == 0) {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	return string(unsafe.Slice((*byte)(cptr(data)), n)), true
}

// grammarView locates a grammar sampler's rules, to name stack positions
// by (rule, element) rather than by address.
type grammarView struct {
	grammar uintptr // the llama_grammar the rules belong to
	rules   []ruleSpan
}

type ruleSpan struct {
	begin, end uintptr
	id         uint32
}

func newGrammarView(s *Sampler, v *Vocab, text, root string, g *gbnf.Grammar) *grammarView {
	ctx := readWord(s.ptr + samplerCtxOff)
	if ctx == 0 || readWord(ctx+sgVocabOff) != v.ptr {
		return nil
	}
	if t, ok := readCxxString(ctx+sgTextOff, len(text)); !ok || t != text {
		return nil
	}
	if r, ok := readCxxString(ctx+sgRootOff, len(root)); !ok || r != root {
		return nil
	}
	gr := readWord(ctx + sgGrammarOff)
	if gr == 0 || readWord(gr+gVocabOff) != v.ptr || readByte(gr+gAwaitingOff) != 0 {
		return nil
	}
	begin, end := readVector(gr + gRulesOff)
	if end < begin || (end-begin)%cxxVectorSize != 0 || int((end-begin)/cxxVectorSize) != len(g.Rules) {
		return nil
	}
	view := &grammarView{grammar: gr, rules: make([]ruleSpan, len(g.Rules))}
	for i, want := range g.Rules {
		rb, re := readVector(begin + uintptr(i)*cxxVectorSize)
		if re < rb || int((re-rb)/grammarElemSize) != len(want) || rb == 0 {
			return nil
		}
		for k, e := range want {
			a := rb + uintptr(k)*grammarElemSize
			typ, val := readU32(a), readU32(a+4)
			if gbnf.Type(typ) != e.Type || (val != e.Value && !(g.Tokens && (e.Type == gbnf.Token || e.Type == gbnf.TokenNot))) {
				return nil
			}
		}
		view.rules[i] = ruleSpan{rb, re, uint32(i)}
	}
	slices.SortFunc(view.rules, func(a, b ruleSpan) int {
		switch {
		case a.begin < b.begin:
			return -1
		case a.begin > b.begin:
			return 1
		}
		return 0
	})
	if _, _, ok := view.state(nil); !ok {
		return nil
	}
	return view
}

// position names the element at address a as (rule, index).
func (g *grammarView) position(a uintptr) (uint32, uint32, bool) {
	i, _ := slices.BinarySearchFunc(g.rules, a, func(r ruleSpan, a uintptr) int {
		switch {
		case r.end <= a:
			return -1
		case r.begin > a:
			return 1
		}
		return 0
	})
	if i == len(g.rules) || a < g.rules[i].begin || a >= g.rules[i].end || (a-g.rules[i].begin)%grammarElemSize != 0 {
		return 0, 0, false
	}
	return g.rules[i].id, uint32((a - g.rules[i].begin) / grammarElemSize), true
}

// state appends the grammar's state to dst: the partial UTF-8 character,
// then each stack as its length and its positions.
func (g *grammarView) state(dst []byte) ([]byte, int, bool) {
	gr := g.grammar
	// llama_partial_utf8 keeps the last code point in value even when the
	// character is complete (n_remain 0) or invalid (−1); llama.cpp reads
	// value only while n_remain > 0, so otherwise it is no part of the
	// state (else every last character would make a state of its own).
	value, remain := readU32(gr+gPartialOff), int32(readU32(gr+gPartialOff+4))
	if remain <= 0 {
		value, remain = 0, 0
	}
	dst = binary.LittleEndian.AppendUint32(dst, value)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(remain))
	begin, end := readVector(gr + gStacksOff)
	if end < begin || (end-begin)%cxxVectorSize != 0 {
		return dst, 0, false
	}
	n := int((end - begin) / cxxVectorSize)
	for i := range n {
		sb, se := readVector(begin + uintptr(i)*cxxVectorSize)
		if se < sb || (se-sb)%8 != 0 || (se-sb)/8 > math.MaxUint32 {
			return dst, 0, false
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32((se-sb)/8))
		for a := sb; a < se; a += 8 {
			r, k, ok := g.position(readWord(a))
			if !ok {
				return dst, 0, false
			}
			dst = binary.LittleEndian.AppendUint32(dst, r)
			dst = binary.LittleEndian.AppendUint32(dst, k)
		}
	}
	return dst, n, true
}

// GrammarState appends the parse state of a grammar sampler to dst and
// returns it with the number of parse stacks. Two samplers of the same
// grammar text and vocabulary with equal states mask exactly the same
// tokens. ok is false when the state cannot be read (not a grammar
// sampler made by NewGrammarSampler, or one reset since).
func (s *Sampler) GrammarState(dst []byte) (state []byte, stacks int, ok bool) {
	g := s.grammar
	if g == nil || s.ptr == 0 {
		return dst, 0, false
	}
	ctx := readWord(s.ptr + samplerCtxOff)
	if ctx == 0 || readWord(ctx+sgGrammarOff) != g.grammar {
		// llama_sampler_reset makes a new llama_grammar.
		return dst, 0, false
	}
	return g.state(dst)
}

// GrammarMask sets bit t of mask (len ≥ ⌈n/64⌉) for every token t < n
// that grammar sampler s allows now and clears the others: the tokens
// applying s leaves finite. The candidates' logits are not the model's
// (the grammar reads only the ids), so the mask holds for any logits.
func (c *Candidates) GrammarMask(s *Sampler, n int, mask []uint64) {
	if cap(c.buf) < n {
		c.buf = make([]TokenData, n)
	}
	c.buf = c.buf[:n]
	for i := range c.buf {
		c.buf[i] = TokenData{ID: int32(i)}
	}
	c.arr = cTokenDataArray{data: &c.buf[0], size: uintptr(n), selected: -1}
	c.Apply(s)
	clear(mask)
	for _, t := range c.Data() {
		if !math.IsInf(float64(t.Logit), -1) {
			mask[t.ID>>6] |= 1 << (t.ID & 63)
		}
	}
}
