package llama

import (
	"container/list"
	"crypto/sha256"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// Grammar-constrained sampling.
//
// llama.cpp's grammar sampler decides, at every step, which of the whole
// vocabulary's tokens the grammar allows: it decodes each token's text and
// walks it through the grammar's parse stacks. With a 151,936-token
// vocabulary that pass cost as much as the model (issue 51: 4.9–5.6 tok/s
// constrained against 10.3–12.7 without). But the set of allowed tokens is
// a function of the grammar's parse state alone — its stacks and a partial
// UTF-8 character, not the text that led there nor the logits — and a
// grammar visits few states: a free-text line is one state per remaining
// character budget, a fixed move list a handful. So the backend keeps the
// mask of every state it has met (maskCache, shared by all sequences and
// contexts, keyed by the grammar text's hash and the state), and computes
// a mask with llama.cpp only for a state it has not seen.
//
// The draw itself is unchanged: the masked logits are exactly the array
// that applying the grammar sampler used to leave (allowed tokens keep
// their logit, the others are −∞, in id order), so top-k, top-p, min-p,
// temperature, the seeded uniform draw and both log-probabilities are
// computed from the same numbers in the same order. Tokens, Logprobs and
// RawLogprobs are identical to the bit with the cache and without it
// (TestGrammarCacheIdentical), and so are the transcripts of a seed.
//
// The alternative the issue suggests — draw from the unconstrained
// distribution, keep the token if the grammar accepts it, else mask and
// draw again — samples the constrained distribution exactly only when no
// filter precedes the draw. With q the unconstrained softmax at
// temperature T, A the allowed set, Q(A) = Σ_{a∈A} q(a) and p = q/Q(A) on
// A the constrained distribution, a token x ∈ A comes out with
// probability q(x) (accepted at once) + (1 − Q(A))·p(x) (rejected, then
// redrawn) = q(x)/Q(A) = p(x). omar's chain masks first and filters after
// (grammar → top-k → top-p → min-p → temperature → draw), and top-k of A
// is not A ∩ top-k of the vocabulary: a token of A ranked below k overall
// has p(x) > 0 but is never accepted at once, so the mixture differs from
// p. It also changes which uniform draws a seed's tokens use (new
// transcripts), and above all it cannot report Logprobs: log p(x) =
// log q(x) − log Q(A) needs Q(A), the mass of the whole allowed set, which
// is the mask it meant to avoid. The cache avoids the mask computation
// instead of the mask, so nothing of the distribution changes.
//
// Measurements: docs/results/2026-12-07-grammar-sampling.md.

// defaultGrammarCacheBytes bounds the cached masks: one bit per token, so
// 3,450 states of a 151,936-token vocabulary.
const defaultGrammarCacheBytes = 64 << 20

// maxGrammarStacks ends a reply whose grammar has split into more parse
// stacks than this: llama.cpp checks every candidate against every stack,
// and an ambiguous grammar ("s ::= "a" s "b" | "a" s "c" |") doubles them
// with each character. gbnf bounds what one position expands into; this
// bounds what a reply accumulates.
const maxGrammarStacks = 4096

// maskCache holds the allowed-token masks of grammar states, least
// recently used first out.
type maskCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	lru    *list.List // of *maskEntry, most recent at the front
	byKey  map[string]*list.Element
	// Statistics: hits and misses of lookups.
	hits, misses int64
}

type maskEntry struct {
	key  string
	mask []uint64
}

func newMaskCache(budget int64) *maskCache {
	if budget <= 0 {
		return nil
	}
	return &maskCache{budget: budget, lru: list.New(), byKey: map[string]*list.Element{}}
}

// get returns the mask stored under key, or nil.
func (c *maskCache) get(key []byte) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[string(key)]
	if !ok {
		c.misses++
		return nil
	}
	c.hits++
	c.lru.MoveToFront(e)
	return e.Value.(*maskEntry).mask
}

// put stores mask under key, evicting the least recently used masks to
// stay within the budget. Stored masks are never written again.
func (c *maskCache) put(key []byte, mask []uint64) {
	size := int64(len(mask)*8 + len(key) + 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[string(key)]; ok || size > c.budget {
		return
	}
	for c.used+size > c.budget {
		old := c.lru.Back()
		e := old.Value.(*maskEntry)
		c.lru.Remove(old)
		delete(c.byKey, e.key)
		c.used -= int64(len(e.mask)*8 + len(e.key) + 64)
	}
	k := string(key)
	c.byKey[k] = c.lru.PushFront(&maskEntry{key: k, mask: mask})
	c.used += size
}

// grammarState is a request's grammar sampler kept out of its chain, for
// masks by state.
type grammarState struct {
	sampler *llamacpp.Sampler
	hash    [sha256.Size]byte // of the grammar text
}

// newGrammarState makes j's grammar sampler; it returns nil state when
// the sampler's state cannot be read (then it goes into the chain and is
// applied every step, as without a cache).
func (b *Backend) newGrammarState(g *llamacpp.Sampler, grammar string) *grammarState {
	if b.masks == nil {
		return nil
	}
	if _, _, ok := g.GrammarState(nil); !ok {
		return nil
	}
	return &grammarState{sampler: g, hash: sha256.Sum256([]byte(grammar))}
}

// grammarMask returns the mask of j's grammar in its current state, from
// the cache or computed and stored.
func (b *Backend) grammarMask(j *job, sc *scratch, n int) ([]uint64, error) {
	g := j.grammar
	key := append(sc.key[:0], g.hash[:]...)
	key, stacks, ok := g.sampler.GrammarState(key)
	sc.key = key
	if !ok {
		// Not expected (the state was readable when the request began):
		// mask this step without the cache rather than fail the reply.
		m := make([]uint64, (n+63)/64)
		sc.cand.GrammarMask(g.sampler, n, m)
		return m, nil
	}
	if stacks > maxGrammarStacks {
		return nil, fmt.Errorf("llama: the grammar is too ambiguous: %d parse stacks after %d tokens (limit %d)", stacks, len(j.resp.Tokens), maxGrammarStacks)
	}
	if m := b.masks.get(key); m != nil {
		return m, nil
	}
	m := make([]uint64, (n+63)/64)
	sc.cand.GrammarMask(g.sampler, n, m)
	b.masks.put(key, m)
	return m, nil
}

func allowed(mask []uint64, t int32) bool { return mask[t>>6]>>(t&63)&1 == 1 }

// maskLogits writes logits with every token mask forbids at −∞ into dst:
// the candidates the grammar sampler leaves, in id order.
func maskLogits(dst, logits []float32, mask []uint64) []float32 {
	dst = dst[:0]
	inf := float32(math.Inf(-1))
	for w, bits := range mask {
		base := w * 64
		end := min(base+64, len(logits))
		switch bits {
		case 0:
			for range end - base {
				dst = append(dst, inf)
			}
		case math.MaxUint64:
			dst = append(dst, logits[base:end]...)
		default:
			for i := base; i < end; i++ {
				if bits>>(i-base)&1 == 1 {
					dst = append(dst, logits[i])
				} else {
					dst = append(dst, inf)
				}
			}
		}
	}
	return dst
}

// allowedSet returns the tokens mask allows, with their log-mass under the
// raw softmax (log-sum-exp rawLSE), when there are at most
// inference.MaxRecordedAllowed of them; the zero value otherwise.
func allowedSet(mask []uint64, logits []float32, rawLSE float64) inference.AllowedTokens {
	n := 0
	for _, w := range mask {
		if n += bits.OnesCount64(w); n > inference.MaxRecordedAllowed {
			return inference.AllowedTokens{}
		}
	}
	ids := make([]int32, 0, n)
	var sum float64
	for w, word := range mask {
		for word != 0 {
			t := int32(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			if int(t) < len(logits) {
				ids = append(ids, t)
				sum += math.Exp(float64(logits[t]) - rawLSE)
			}
		}
	}
	return inference.AllowedTokens{IDs: ids, LogMass: float32(math.Log(sum))}
}
