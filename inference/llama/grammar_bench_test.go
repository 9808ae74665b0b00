package llama

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/model"
)

// benchVocab is Qwen3's vocabulary size, where issue 51 measured grammar
// sampling at half the unconstrained rate.
const benchVocab = 151936

var (
	bigVocabOnce sync.Once
	bigVocabPath string
	bigVocabErr  error
)

// bigVocabModel writes (once per test binary) the tiny llama shape with a
// byte-level BPE vocabulary of benchVocab tokens: random merges of a
// token and a character, so the pieces are word-like (mostly 4–12 bytes,
// some with a leading space), as a real vocabulary's are.
func bigVocabModel(tb testing.TB) string {
	tb.Helper()
	bigVocabOnce.Do(func() {
		dir, err := os.MkdirTemp("", "omar-bigvocab")
		if err != nil {
			bigVocabErr = err
			return
		}
		alphabet := []string{"Ġ", "Ġ", "Ġ", "Ġ", ",", ".", "'", "-", "Ċ"}
		for c := 'a'; c <= 'z'; c++ {
			alphabet = append(alphabet, string(c), string(c))
		}
		for c := 'A'; c <= 'Z'; c++ {
			alphabet = append(alphabet, string(c))
		}
		for c := '0'; c <= '9'; c++ {
			alphabet = append(alphabet, string(c))
		}
		rng := rand.New(rand.NewPCG(51, 151936))
		tokens := append([]string(nil), alphabet...)
		seen := map[string]bool{}
		for _, t := range tokens {
			seen[t] = true
		}
		want := benchVocab - 256 - 3 // byte tokens and the 3 special tokens
		var merges []string
		for len(merges) < want {
			l := tokens[rng.IntN(len(tokens))]
			r := alphabet[rng.IntN(len(alphabet))]
			if len(l)+len(r) > 16 || seen[l+r] {
				continue
			}
			seen[l+r] = true
			tokens = append(tokens, l+r)
			merges = append(merges, l+" "+r)
		}
		// Merges of single characters the alphabet does not list as
		// tokens of their own are byte tokens already: BPEVocab counts
		// only new spellings, so the count is exact.
		p := filepath.Join(dir, "bigvocab.gguf")
		bigVocabErr = model.WriteFile(p, model.Options{Seed: 51, Merges: merges})
		bigVocabPath = p
	})
	if bigVocabErr != nil {
		tb.Fatal(bigVocabErr)
	}
	return bigVocabPath
}

// sayGrammar is a one-line SAY grammar as issue 51 measured (negotiation
// games' say line without its length bound, Werewolf's speech).
const sayGrammar = `root ::= "SAY: " [^\r\n<]+`

// boundedSayGrammar is the negotiation say line with its 240-character
// bound: a state per remaining character, the most states a game grammar
// has.
const boundedSayGrammar = "root ::= say | say \"\\n\" move | move\nsay ::= \"SAY: \" [!-~] [^\\n<]{0,240}\nmove ::= \"REJECT\" | \"WALK\"\n"

// cpuTime is the CPU time this process has used, all threads.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGrammarSampling reports tokens/s at the 151,936-token
// vocabulary without a grammar, with a grammar and the mask cache, and
// with a grammar masked by llama.cpp every step (the code before the
// cache), each b.Loop round running all three (one sequence, 32 tokens,
// temperature 1), and the ratios to the unconstrained rate of the same
// round. Results: docs/results/2026-12-07-grammar-sampling.md.
func BenchmarkGrammarSampling(b *testing.B) {
	for _, g := range []struct{ name, grammar string }{{"say", sayGrammar}, {"say240", boundedSayGrammar}} {
		b.Run(g.name, func(b *testing.B) {
			o := testOptions(b)
			o.Model = bigVocabModel(b)
			o.Parallel, o.Context, o.Batch = 1, 512, 64
			o.ignoreEOG = true
			off := o
			off.GrammarCacheBytes = -1
			cached, plain := newBackend(b, o), newBackend(b, off)
			p := prompt(b, cached, "Make your move.")
			const n = 32
			// The machine this ran on is shared: alongside wall time each
			// run counts the process's CPU time (getrusage), which other
			// processes' load leaves nearly untouched, and the ratios are
			// reported for both.
			type cost struct{ wall, cpu time.Duration }
			run := func(be *Backend, grammar string, seed uint64) cost {
				c0, t0 := cpuTime(b), time.Now()
				r := gen(b, be, inference.Request{Prompt: p, MaxTokens: n, Grammar: grammar, Sampling: inference.Sampling{Temperature: 1, Seed: seed}})
				c := cost{time.Since(t0), cpuTime(b) - c0}
				if len(r[0].Tokens) != n {
					b.Fatalf("generated %d tokens, want %d (stop %s)", len(r[0].Tokens), n, r[0].Stop)
				}
				return c
			}
			run(cached, "", 0) // load the weights into the caches
			cold := run(cached, g.grammar, 0)
			var free, hit, miss cost
			add := func(sum *cost, c cost) { sum.wall += c.wall; sum.cpu += c.cpu }
			rounds := 0
			for b.Loop() {
				seed := uint64(rounds + 1)
				add(&free, run(cached, "", seed))
				add(&hit, run(cached, g.grammar, seed))
				add(&miss, run(plain, g.grammar, seed))
				rounds++
			}
			rate := func(d time.Duration) float64 { return float64(n*rounds) / d.Seconds() }
			b.ReportMetric(rate(free.wall), "free-tok/s")
			b.ReportMetric(rate(hit.wall), "cached-tok/s")
			b.ReportMetric(rate(miss.wall), "uncached-tok/s")
			b.ReportMetric(float64(n)/cold.wall.Seconds(), "cold-tok/s")
			b.ReportMetric(rate(hit.wall)/rate(free.wall), "cached/free")
			b.ReportMetric(rate(miss.wall)/rate(free.wall), "uncached/free")
			b.ReportMetric(rate(free.cpu), "free-tok/cpu-s")
			b.ReportMetric(rate(hit.cpu), "cached-tok/cpu-s")
			b.ReportMetric(rate(miss.cpu), "uncached-tok/cpu-s")
			b.ReportMetric(float64(n)/cold.cpu.Seconds(), "cold-tok/cpu-s")
			b.ReportMetric(rate(hit.cpu)/rate(free.cpu), "cpu-cached/free")
			b.ReportMetric(rate(miss.cpu)/rate(free.cpu), "cpu-uncached/free")
		})
	}
}
