package model

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// TrainBPE learns byte-level BPE merges from corpus until the vocabulary
// (256 byte tokens plus the distinct results of the merges, see
// BPEVocab) has vocabSize tokens; a corpus too small for that is an error. The result is deterministic: the most frequent
// pair wins and ties go to the pair whose tokens were created first.
// Each merge is "left right" in the byte-to-unicode alphabet, the format of
// tokenizer.ggml.merges.
func TrainBPE(corpus string, vocabSize int) ([]string, error) {
	return TrainBPEWith(corpus, vocabSize, BPEOptions{})
}

// BPEOptions shape what TrainBPEWith may merge.
type BPEOptions struct {
	// SplitDigits learns no merge inside a number (the pre-tokenizer's
	// digit runs, with their leading space), so every digit stays its own
	// token. A model then reads and writes a number digit by digit, the
	// same few tokens whatever its value, which a small model learns to
	// copy and compare from far fewer examples than one token per number
	// it happened to see often.
	SplitDigits bool
}

// TrainBPEWith is TrainBPE with options.
func TrainBPEWith(corpus string, vocabSize int, o BPEOptions) ([]string, error) {
	if vocabSize < 256 {
		return nil, fmt.Errorf("model: BPE vocabulary of %d tokens is smaller than the 256 byte tokens", vocabSize)
	}
	// Symbols are ids: 0..255 the bytes, then one per merge.
	names := make([]string, 256, vocabSize)
	nameID := map[string]int32{}
	for b := 0; b < 256; b++ {
		names[b] = string(byteToRune[b])
		nameID[names[b]] = int32(b)
	}
	// Distinct pre-tokenized words with counts, in first-seen order.
	type word struct {
		syms  []int32
		count int
	}
	var words []word
	index := map[string]int{}
	for _, piece := range preSplit(corpus) {
		if o.SplitDigits && strings.ContainsAny(piece, "0123456789") {
			continue
		}
		if i, ok := index[piece]; ok {
			words[i].count++
			continue
		}
		syms := make([]int32, len(piece))
		for j := 0; j < len(piece); j++ {
			syms[j] = int32(piece[j])
		}
		index[piece] = len(words)
		words = append(words, word{syms, 1})
	}

	counts := map[uint64]int{}
	where := map[uint64]map[int]bool{} // pair → words containing it
	h := &pairHeap{}
	key := func(a, b int32) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }
	addPairs := func(wi int, sign int) {
		w := words[wi]
		for j := 0; j+1 < len(w.syms); j++ {
			k := key(w.syms[j], w.syms[j+1])
			counts[k] += sign * w.count
			if sign > 0 {
				if where[k] == nil {
					where[k] = map[int]bool{}
				}
				where[k][wi] = true
			}
			heap.Push(h, pairCount{k, counts[k]})
		}
	}
	for wi := range words {
		addPairs(wi, +1)
	}

	var merges []string
	for len(names) < vocabSize {
		// Pop stale heap entries until the top matches the live count.
		var best pairCount
		found := false
		for h.Len() > 0 {
			top := heap.Pop(h).(pairCount)
			if c := counts[top.pair]; c == top.count && c > 0 {
				best, found = top, true
				break
			}
		}
		if !found {
			break
		}
		a, b := int32(best.pair>>32), int32(uint32(best.pair))
		// Two merge paths can spell the same token ("ab"+"c", "a"+"bc");
		// the vocabulary keeps one entry per spelling.
		text := names[a] + names[b]
		id, seen := nameID[text]
		if !seen {
			id = int32(len(names))
			names = append(names, text)
			nameID[text] = id
		}
		merges = append(merges, names[a]+" "+names[b])
		// Sorted word indices keep the update order (and so the heap's
		// contents) deterministic.
		affected := sortedKeys(where[best.pair])
		delete(where, best.pair)
		for _, wi := range affected {
			addPairs(wi, -1)
			w := &words[wi]
			out := w.syms[:0]
			for j := 0; j < len(w.syms); j++ {
				if j+1 < len(w.syms) && w.syms[j] == a && w.syms[j+1] == b {
					out = append(out, id)
					j++
				} else {
					out = append(out, w.syms[j])
				}
			}
			w.syms = out
			addPairs(wi, +1)
		}
	}
	if len(names) < vocabSize {
		return merges, fmt.Errorf("model: corpus only supports %d BPE tokens, %d requested", len(names), vocabSize)
	}
	return merges, nil
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// pairCount is a heap entry; entries go stale when counts change and are
// skipped when popped.
type pairCount struct {
	pair  uint64
	count int
}

type pairHeap []pairCount

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count > h[j].count
	}
	return h[i].pair < h[j].pair // older tokens first, then by right token
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCount)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// splitMerge splits a "left right" merge string.
func splitMerge(m string) (string, string, bool) {
	// The byte alphabet has no plain space, so the first space separates.
	i := strings.IndexByte(m, ' ')
	if i <= 0 || i == len(m)-1 {
		return "", "", false
	}
	return m[:i], m[i+1:], true
}

// BPEVocab returns the ordinary tokens a list of merges defines: the 256
// byte tokens (token i is byte i) followed by each merge's result, in merge
// order, once per distinct spelling.
func BPEVocab(merges []string) []string {
	tokens := make([]string, 256, 256+len(merges))
	seen := map[string]bool{}
	for b := 0; b < 256; b++ {
		tokens[b] = string(byteToRune[b])
		seen[tokens[b]] = true
	}
	for _, m := range merges {
		l, r, _ := splitMerge(m)
		if t := l + r; !seen[t] {
			seen[t] = true
			tokens = append(tokens, t)
		}
	}
	return tokens
}
