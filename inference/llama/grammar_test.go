package llama

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/games/negotiation"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/gbnf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/sotopia"
)

// cacheGrammars are grammars of the shapes omar uses: a fixed move list, a
// free-text line with a character budget, a SAY line then a move, JSON.
var cacheGrammars = []string{
	`root ::= ("yes" | "no" | "vote " [0-9] [0-9]?) "."`,
	`root ::= [^\r\n<]+`,
	"root ::= say | say \"\\n\" move | move\nsay ::= \"SAY: \" [!-~] [^\\n<]{0,40}\nmove ::= \"PROPOSE: price=\" [1-9] [0-9]{0,3} | \"REJECT\" | \"WALK\"\n",
	`root ::= "{" "\"a\":" [0-9]+ ("," "\"b\":" ("true" | "false"))? "}"`,
}

var cacheSamplings = []inference.Sampling{
	{Temperature: 1},
	{Temperature: 0.7},
	{Temperature: 1.3, TopK: 40},
	{Temperature: 1, TopP: 0.9, MinP: 0.05},
	{Temperature: 0}, // greedy
}

// TestGrammarCacheIdentical: masks by state give the very tokens and
// log-probabilities (to the bit) that llama.cpp's grammar pass every step
// gives, for every grammar and sampling setting, and again from a warm
// cache; the same seed gives the same transcript.
func TestGrammarCacheIdentical(t *testing.T) {
	on := testOptions(t)
	off := on
	off.GrammarCacheBytes = -1
	cached, plain := newBackend(t, on), newBackend(t, off)
	p := prompt(t, cached, "Say something.")
	var reqs []inference.Request
	for gi, g := range cacheGrammars {
		for si, s := range cacheSamplings {
			for seed := range uint64(3) {
				s.Seed = seed + uint64(10*gi+100*si)
				reqs = append(reqs, inference.Request{Prompt: p, MaxTokens: 48, Grammar: g, Sampling: s})
			}
		}
	}
	want := make([]inference.Response, len(reqs))
	for i := range reqs {
		// One at a time: requests decoded together may differ in the
		// logits' last bits, which is not what this test is about.
		want[i] = gen(t, plain, reqs[i])[0]
	}
	for pass := range 2 { // cold cache, then warm
		for i, r := range reqs {
			got := gen(t, cached, r)[0]
			w := want[i]
			if !sameTokens(got.Tokens, w.Tokens) || got.Text != w.Text || got.Stop != w.Stop {
				t.Fatalf("pass %d, grammar %q, sampling %+v: got %q (%s), want %q (%s)", pass, r.Grammar, r.Sampling, got.Text, got.Stop, w.Text, w.Stop)
			}
			for k := range got.Tokens {
				if math.Float32bits(got.Logprobs[k]) != math.Float32bits(w.Logprobs[k]) ||
					math.Float32bits(got.RawLogprobs[k]) != math.Float32bits(w.RawLogprobs[k]) {
					t.Fatalf("pass %d, %q token %d: logprobs %v/%v, want %v/%v", pass, r.Grammar, k,
						got.Logprobs[k], got.RawLogprobs[k], w.Logprobs[k], w.RawLogprobs[k])
				}
			}
		}
	}
	c := cached.masks
	if c.hits == 0 || c.misses == 0 || c.hits < 4*c.misses {
		t.Errorf("cache: %d hits, %d misses; want most lookups to hit", c.hits, c.misses)
	}
}

// TestGrammarCacheDistribution: the first token of a constrained reply,
// drawn with many seeds, follows the distribution whose log-probability
// the backend reports (Pearson's χ² over the allowed tokens), and every
// token drawn is one the grammar allows.
func TestGrammarCacheDistribution(t *testing.T) {
	b := newBackend(t, testOptions(t))
	p := prompt(t, b, "Pick.")
	grammar := `root ::= [a-z]`
	const n = 3000
	reqs := make([]inference.Request, n)
	for i := range reqs {
		reqs[i] = inference.Request{Prompt: p, MaxTokens: 1, Grammar: grammar, Sampling: inference.Sampling{Temperature: 2, Seed: uint64(i)}}
	}
	count := map[int32]int{}
	prob := map[int32]float64{}
	for i := 0; i < n; i += 4 {
		for _, r := range gen(t, b, reqs[i:min(i+4, n)]...) {
			tok := r.Tokens[0]
			if len(r.Text) != 1 || r.Text[0] < 'a' || r.Text[0] > 'z' {
				t.Fatalf("drew %q, which the grammar forbids", r.Text)
			}
			count[tok]++
			q := math.Exp(float64(r.Logprobs[0]))
			if old, ok := prob[tok]; ok && math.Abs(old-q) > 1e-5 {
				t.Fatalf("token %d: reported probability %v, then %v", tok, old, q)
			}
			prob[tok] = q
		}
	}
	var chi2, seen float64
	for tok, c := range count {
		e := n * prob[tok]
		chi2 += (float64(c) - e) * (float64(c) - e) / e
		seen += prob[tok]
	}
	// Tokens never drawn carry the rest of the mass.
	if rest := n * (1 - seen); rest > 0 {
		chi2 += rest
	}
	df := float64(len(count))
	// Far beyond the 0.999 quantile of χ²(df) (about df + 4.3·√(2df)).
	if limit := df + 6*math.Sqrt(2*df) + 10; chi2 > limit {
		t.Errorf("χ² = %.1f over %d tokens (limit %.1f): the draws do not follow the reported distribution", chi2, len(count), limit)
	}
	if len(count) < 5 {
		t.Errorf("only %d distinct tokens drawn at temperature 2; want a spread", len(count))
	}
}

// TestGrammarCrashInputsBackend: the grammars that killed the server are
// refused by Generate with an error, and the backend keeps serving.
func TestGrammarCrashInputsBackend(t *testing.T) {
	b := newBackend(t, testOptions(t))
	p := prompt(t, b, "vote")
	var chain strings.Builder
	chain.WriteString("root ::= r0\n")
	for i := range 149999 {
		chain.WriteString("r" + itoa(i) + " ::= r" + itoa(i+1) + "\n")
	}
	chain.WriteString(`r149999 ::= "a"` + "\n")
	for name, g := range map[string]string{
		"nesting": "root ::= " + strings.Repeat("(", 18000) + `"a"` + strings.Repeat(")", 18000),
		"chain":   chain.String(),
	} {
		_, err := b.Generate(context.Background(), []inference.Request{{Prompt: p, MaxTokens: 4, Grammar: g}})
		if !errors.Is(err, llamacpp.ErrGrammar) || !errors.Is(err, gbnf.ErrLimit) {
			t.Errorf("%s: got %v, want ErrGrammar and gbnf.ErrLimit", name, err)
		}
	}
	if r := gen(t, b, inference.Request{Prompt: p, MaxTokens: 4, Grammar: `root ::= "yes" | "no"`}); r[0].Text != "yes" && r[0].Text != "no" {
		t.Errorf("after the refusals: got %q, want yes or no", r[0].Text)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// TestMaskCacheBudget: the cache stays within its budget, dropping the
// least recently used masks.
func TestMaskCacheBudget(t *testing.T) {
	mask := make([]uint64, 16) // 128 bytes
	c := newMaskCache(3 * (128 + 1 + 64))
	for _, k := range []string{"a", "b", "c"} {
		c.put([]byte(k), mask)
	}
	c.get([]byte("a")) // a is now the most recent
	c.put([]byte("d"), mask)
	if c.get([]byte("b")) != nil {
		t.Error("b: got a mask, want it evicted (least recently used)")
	}
	for _, k := range []string{"a", "c", "d"} {
		if c.get([]byte(k)) == nil {
			t.Errorf("%s: got none, want it kept", k)
		}
	}
	if c.used > c.budget {
		t.Errorf("used %d bytes, budget %d", c.used, c.budget)
	}
	if newMaskCache(-1) != nil {
		t.Error("negative budget: got a cache, want none")
	}
}

func TestMaskLogits(t *testing.T) {
	logits := make([]float32, 130)
	for i := range logits {
		logits[i] = float32(i)
	}
	mask := []uint64{math.MaxUint64, 0, 0b101}
	got := maskLogits(nil, logits, mask)
	for i, v := range got {
		want := float32(math.Inf(-1))
		if i < 64 || i == 128 {
			want = float32(i)
		}
		if v != want {
			t.Errorf("logit %d: got %v, want %v", i, v, want)
		}
	}
	if len(got) != len(logits) {
		t.Errorf("got %d logits, want %d", len(got), len(logits))
	}
}

// TestGameGrammarsRefuseControlText: inside a free-text reply the games'
// grammars allow no token whose text holds '<', so no chat control token
// (<think>, <|im_end|>) appears in a reply as text; end-of-generation
// tokens still end the reply where the grammar is complete.
func TestGameGrammarsRefuseControlText(t *testing.T) {
	b := newBackend(t, testOptions(t))
	v := b.vocab
	n := v.NTokens()
	for _, tc := range []struct {
		name, grammar, prefix string
	}{
		{"negotiation say", negotiation.Grammar(negotiation.PriceGrammar, "", true, false), "SAY: Hi"},
		{"sotopia speak", sotopia.MoveGrammar(200), "speak: Hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mask := maskAfter(t, v, tc.grammar, tc.prefix)
			lt := -1
			for tok := range int32(n) {
				p := v.Piece(tok, true)
				if p == "<" {
					lt = int(tok)
				}
				if allowed(mask, tok) && !v.IsEOG(tok) && strings.Contains(p, "<") {
					t.Errorf("after %q the grammar allows token %d %q", tc.prefix, tok, p)
				}
			}
			if lt < 0 {
				t.Fatal("the vocabulary has no '<' token to test with")
			}
		})
	}
}

// maskAfter is the mask of the tokens grammar allows after prefix.
func maskAfter(t *testing.T, v *llamacpp.Vocab, grammar, prefix string) []uint64 {
	t.Helper()
	g, err := llamacpp.NewGrammarSampler(v, grammar, "root")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	toks, err := v.Tokenize(prefix, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		g.Accept(tok)
	}
	n := v.NTokens()
	mask := make([]uint64, (n+63)/64)
	llamacpp.NewCandidates(n).GrammarMask(g, n, mask)
	return mask
}

// TestPriceGrammarDigits: a price game's grammar bounded to the scale of
// its item (PriceRules.Scale) lets a price have as many whole digits as
// the scale and no more, and still its cents.
func TestPriceGrammarDigits(t *testing.T) {
	b := newBackend(t, testOptions(t))
	v := b.vocab
	n := v.NTokens()
	terms, _ := negotiation.PriceRules{Scale: 305}.TermsGrammar(0)
	grammar := negotiation.Grammar(terms, "", true, true)
	for _, tc := range []struct {
		prefix    string
		digitNext bool
	}{
		{"PROPOSE: price=9", true},
		{"PROPOSE: price=99", true},
		{"PROPOSE: price=999", false},
		{"PROPOSE: price=999.", true},
	} {
		mask := maskAfter(t, v, grammar, tc.prefix)
		digit := false
		for tok := range int32(n) {
			if p := v.Piece(tok, true); len(p) > 0 && p[0] >= '0' && p[0] <= '9' && allowed(mask, tok) {
				digit = true
			}
		}
		if digit != tc.digitNext {
			t.Errorf("after %q a digit allowed: %v, want %v", tc.prefix, digit, tc.digitNext)
		}
	}
}

// TestOmarGrammarsWithinLimits: every grammar omar writes passes gbnf's
// default limits, and llama.cpp parses it into gbnf's very rules (so its
// masks can be cached by state).
func TestOmarGrammarsWithinLimits(t *testing.T) {
	b := newBackend(t, testOptions(t))
	grammars := map[string]string{
		"negotiation":    negotiation.Grammar(negotiation.PriceGrammar, "", true, false),
		"price digits":   negotiation.Grammar(negotiation.PriceGrammarDigits(3), "", true, true),
		"price 1 digit":  negotiation.Grammar(negotiation.PriceGrammarDigits(1), "", true, true),
		"sotopia move":   sotopia.MoveGrammar(sotopia.Params{}.Defaults().MaxChars),
		"sotopia score":  sotopia.ScoreGrammar(sotopia.EvalDimensions, 300),
		"sotopia extra":  sotopia.ScoreGrammar(sotopia.ExtraDimensions, 300),
		"sotopia judge":  sotopia.ProcessGrammar(300),
		"sealed bid":     sealedbid.Grammar(1_000_000),
		"proxy json":     gbnf.JSONObject,
		"choice grammar": `root ::= "VOTE p2" | "VOTE p3" | "ABSTAIN"`,
	}
	for name, g := range grammars {
		if _, err := gbnf.Check(g, "root", gbnf.Limits{}.Defaults()); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		s, err := llamacpp.NewGrammarSampler(b.vocab, g, "root")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, _, ok := s.GrammarState(nil); !ok {
			t.Errorf("%s: no readable state: llama.cpp's rules differ from gbnf's", name)
		}
		s.Close()
	}
}

// TestGrammarStacksBounded: a grammar that doubles its parse stacks with
// every character ends the reply with an error once it holds more than
// maxGrammarStacks, before llama.cpp's per-token work explodes.
func TestGrammarStacksBounded(t *testing.T) {
	b := newBackend(t, testOptions(t))
	src := "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" |\n"
	g, err := llamacpp.NewGrammarSampler(b.vocab, src, "root")
	if err != nil {
		t.Fatal(err)
	}
	j := &job{grammar: b.newGrammarState(g, src)}
	if j.grammar == nil {
		t.Fatal("no readable grammar state")
	}
	defer g.Close()
	toks, err := b.vocab.Tokenize("a", false, false)
	if err != nil || len(toks) != 1 {
		t.Fatalf("tokenize a: %v, %v", toks, err)
	}
	sc := b.scratch[0]
	n := b.vocab.NTokens()
	var got error
	for i := range 16 {
		if _, got = b.grammarMask(j, sc, n); got != nil {
			if i < 10 { // 3·2^i stacks after i a's
				t.Fatalf("after %d a's: %v, want the bound only beyond %d stacks", i, got, maxGrammarStacks)
			}
			break
		}
		g.Accept(toks[0])
	}
	if got == nil || !strings.Contains(got.Error(), "ambiguous") {
		t.Errorf("after 16 a's: got %v, want the too-ambiguous error", got)
	}
}

// TestAllowedRecorded: a reply under a menu grammar records, at each
// sampled position, the set the grammar allowed (holding the token), and
// its log-mass; at temperature 1 without filters the behaviour logprob is
// then exactly the raw one renormalised over the set.
func TestAllowedRecorded(t *testing.T) {
	b := newBackend(t, testOptions(t))
	p := prompt(t, b, "Pick.")
	req := inference.Request{Prompt: p, MaxTokens: 8, Grammar: `root ::= "ARM " [1-4]`,
		Sampling: inference.Sampling{Temperature: 1, Seed: 3}}
	r := gen(t, b, req)[0]
	if len(r.Allowed) != len(r.Tokens) {
		t.Fatalf("%d tokens, %d allowed sets", len(r.Tokens), len(r.Allowed))
	}
	branched := false
	for k, a := range r.Allowed {
		if a.IDs == nil {
			continue // the end-of-generation step may allow more
		}
		if !slices.IsSorted(a.IDs) || !slices.Contains(a.IDs, r.Tokens[k]) {
			t.Fatalf("token %d (%d): set %v unsorted or without it", k, r.Tokens[k], a.IDs)
		}
		if d := math.Abs(float64(r.RawLogprobs[k] - a.LogMass - r.Logprobs[k])); d > 1e-4 {
			t.Errorf("token %d: raw %g − log mass %g = %g, behaviour logprob %g", k, r.RawLogprobs[k], a.LogMass, r.RawLogprobs[k]-a.LogMass, r.Logprobs[k])
		}
		branched = branched || len(a.IDs) > 1
	}
	if !branched {
		t.Errorf("no set with more than one token in %q: %+v", r.Text, r.Allowed)
	}
	if r2 := gen(t, b, inference.Request{Prompt: p, MaxTokens: 4, Sampling: req.Sampling})[0]; r2.Allowed != nil {
		t.Errorf("no grammar: got allowed sets %v", r2.Allowed)
	}
}
