package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

var (
	smallOnce, baseOnce sync.Once
	smallErr, baseErr   error
)

// baseModel writes the "base" llama preset (the built-in model's shape,
// ~0.9M parameters, a 1,024-token context) next to the tiny test models.
func baseModel(b testing.TB) string {
	tinyModel(b, "llama")
	p := filepath.Join(modelsDir, "base.gguf")
	baseOnce.Do(func() {
		baseErr = model.WriteFile(p, model.Options{Arch: "llama", Preset: "base", Seed: 7, ContextLength: 1024})
	})
	if baseErr != nil {
		b.Fatal(baseErr)
	}
	return p
}

// smallModel writes the "small" llama preset (~27M parameters) next to the
// tiny test models.
func smallModel(b *testing.B) string {
	tinyModel(b, "llama")
	p := filepath.Join(modelsDir, "small.gguf")
	smallOnce.Do(func() { smallErr = model.WriteFile(p, model.Options{Arch: "llama", Preset: "small", Seed: 7}) })
	if smallErr != nil {
		b.Fatal(smallErr)
	}
	return p
}

// BenchmarkPPOStep measures Step (1 epoch, one minibatch: forward+backward
// of the PPO loss, gradient clipping and AdamW; the sequences carry their
// reference logprobs, as in a self-play iteration after Evaluate) and
// reports sequence tokens per second. tiny: 8 sequences of 64–128 tokens;
// small: 2 sequences of 64–128 tokens. backward=outprod is the frozen
// matrices' input gradient as ggml's out_prod (Options.OutProdBackward),
// backward=transposed the default.
func BenchmarkPPOStep(b *testing.B) {
	for _, preset := range []string{"tiny", "small"} {
		for _, threads := range []int{1, 2} {
			for _, backward := range []string{"transposed", "outprod"} {
				b.Run(fmt.Sprintf("%s/threads=%d/backward=%s", preset, threads, backward), func(b *testing.B) {
					o := testOptions()
					o.Threads = threads
					o.OutProdBackward = backward == "outprod"
					o.Epochs, o.MiniBatch = 1, 8
					o.BatchTokens = 1024
					path, n := tinyModel(b, "llama"), 8
					if preset == "small" {
						o.LoRARank = 8
						path, n = smallModel(b), 2
					}
					tr, err := New(path, o)
					if err != nil {
						b.Fatal(err)
					}
					defer tr.Close()
					seqs := randomSeqs(5, n, 64, 128, tr.Vocab())
					ctx := context.Background()
					scores, err := tr.Evaluate(ctx, seqs)
					if err != nil {
						b.Fatal(err)
					}
					for i := range seqs {
						seqs[i].RefLogprobs = scores[i].RefLogprobs
					}
					tokens := 0
					for b.Loop() {
						st, err := tr.Step(ctx, seqs)
						if err != nil {
							b.Fatal(err)
						}
						tokens += st.Tokens
					}
					b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				})
			}
		}
	}
}

// BenchmarkEvaluate measures the no-grad scoring (policy and base passes)
// of 8 sequences of 64–128 tokens on the tiny model.
func BenchmarkEvaluate(b *testing.B) {
	o := testOptions()
	o.BatchTokens = 1024
	tr := newTrainer(b, "llama", o)
	seqs := randomSeqs(5, 8, 64, 128, tr.Vocab())
	ctx := context.Background()
	tokens := 0
	for b.Loop() {
		if _, _, _, err := columns(tr.Evaluate(ctx, seqs)); err != nil {
			b.Fatal(err)
		}
		for _, s := range seqs {
			tokens += len(s.Tokens)
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkFullStep measures a full-parameter cross-entropy step (forward
// and backward through every weight, gradient clipping, AdamW on all of
// them) on language-model batches: 8 sequences of 256 tokens, all trained,
// one optimizer step per call, and reports trained tokens per second. base
// is the preset of the built-in model.
func BenchmarkFullStep(b *testing.B) {
	for _, preset := range []string{"tiny", "base"} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", preset, threads), func(b *testing.B) {
				o := Options{}.FullDefaults()
				o.Threads = threads
				// Passes of 512 tokens: slightly faster per token than
				// 2048 (the activations OUT_PROD re-reads stay in cache).
				o.MiniBatch, o.BatchTokens = 8, 512
				path := tinyModel(b, "llama")
				if preset != "tiny" {
					path = baseModel(b)
				}
				tr, err := New(path, o)
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				seqs := randomSeqs(5, 8, 256, 257, tr.Vocab())
				for i := range seqs {
					for j := range seqs[i].Mask {
						seqs[i].Mask[j] = j > 0
					}
				}
				obj, err := NewObjective(CrossEntropy{})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				tokens := 0
				cpu0 := cpuSeconds()
				for b.Loop() {
					st, err := tr.StepWith(ctx, obj, seqs)
					if err != nil {
						b.Fatal(err)
					}
					tokens += st.TrainedTokens
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				b.ReportMetric(float64(tokens)/(cpuSeconds()-cpu0), "tokens/cpu-s")
				b.ReportMetric(float64(tr.TrainableParams()), "params")
			})
		}
	}
}

// cpuSeconds is the process's user+system CPU time: on a shared machine
// tokens per CPU-second vary less than tokens per wall-second.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkVersusLlamaOpt measures, in one run and alternating every
// iteration, the trainer's LoRA PPO step (one epoch, one minibatch) and
// llama.cpp's own full fine-tune (llama_opt_epoch: forward, backward and
// AdamW over every weight, one optimizer step per window) on the same
// tiny model and the same 4 sequences of 256 tokens (llama.cpp rounds its
// context to a multiple of 256), and reports the
// time per sequence token of each and their ratio (llama_opt ÷ LoRA PPO;
// above 1 the trainer is faster). One thread each; backward=outprod is the
// trainer with Options.OutProdBackward.
//
// mask=random trains ~47% of the tokens (randomSeqs), mask=selfplay 8%, in
// the pattern of a seat stream (seatSeqs: a briefing of 100 tokens, 4
// turns of 34 context and 5 generated tokens); llama_opt trains on all.
func BenchmarkVersusLlamaOpt(b *testing.B) {
	for _, mask := range []string{"random", "selfplay"} {
		for _, backward := range []string{"transposed", "outprod"} {
			b.Run("mask="+mask+"/backward="+backward, func(b *testing.B) { versusLlamaOpt(b, backward == "outprod", mask == "selfplay") })
		}
	}
}

func versusLlamaOpt(b *testing.B, outProd, selfplayMask bool) {
	const nSeq, nCtx = 4, 256
	path := tinyModel(b, "llama")
	o := testOptions()
	o.Epochs, o.MiniBatch, o.BatchTokens = 1, nSeq, nSeq*nCtx
	o.OutProdBackward = outProd
	tr, err := New(path, o)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	seqs := randomSeqs(5, nSeq, nCtx, nCtx+1, tr.Vocab())
	if selfplayMask {
		seqs = seatSeqs(5, nSeq, tr.Vocab(), 100, 4, 34, 5, 1)
	}
	ctx := context.Background()
	scores, err := tr.Evaluate(ctx, seqs)
	if err != nil {
		b.Fatal(err)
	}
	windows := make([][]int32, nSeq)
	for i := range seqs {
		seqs[i].RefLogprobs = scores[i].RefLogprobs
		windows[i] = seqs[i].Tokens
	}

	m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{NoMmap: true})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	co := llamacpp.ContextOptions{}.Defaults()
	co.NCtx, co.NBatch, co.NUBatch, co.Threads, co.ThreadsBatch = nCtx, nCtx, nCtx, 1, 1
	co.TypeK, co.TypeV = llamacpp.KVTypeF32, llamacpp.KVTypeF32
	lc, err := llamacpp.NewLlamaContext(m, co)
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	if lc.NCtx() != nCtx {
		b.Fatalf("llama.cpp made a context of %d tokens, want %d", lc.NCtx(), nCtx)
	}
	if err := lc.OptInit(); err != nil {
		b.Fatal(err)
	}

	var ppoTime, optTime time.Duration
	ppoTokens, optTokens := 0, 0
	for b.Loop() {
		t0 := time.Now()
		st, err := tr.Step(ctx, seqs)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := lc.OptEpoch(windows); err != nil {
			b.Fatal(err)
		}
		optTime += time.Since(t1)
		ppoTime += t1.Sub(t0)
		ppoTokens += st.Tokens
		optTokens += nSeq * nCtx
	}
	ppo := float64(ppoTime.Nanoseconds()) / float64(ppoTokens)
	opt := float64(optTime.Nanoseconds()) / float64(optTokens)
	b.ReportMetric(ppo, "ppo-ns/token")
	b.ReportMetric(opt, "llama_opt-ns/token")
	b.ReportMetric(opt/ppo, "ratio")
}

// selfplaySeqs are n sequences shaped like a default self-play
// iteration's seat streams: a briefing of 150 tokens, then 7 turns of 75
// context tokens (the other seat's move, the notification, the template)
// and 5 generated ones — ~710 tokens, 5% trained.
func selfplaySeqs(seed uint64, n, vocab int) []Sequence {
	return seatSeqs(seed, n, vocab, 150, 7, 75, 5, 32)
}

// seatSeqs are n seat streams of random tokens: a briefing, then turns of
// ctx context and gen generated (masked) tokens, then up to jitter-1 more
// context tokens.
func seatSeqs(seed uint64, n, vocab, brief, turns, ctx, gen, jitter int) []Sequence {
	r := rand.New(rand.NewPCG(seed, 3))
	seqs := make([]Sequence, n)
	for i := range seqs {
		l := brief + turns*(ctx+gen) + r.IntN(jitter)
		s := Sequence{Tokens: make([]int32, l), Mask: make([]bool, l), OldLogprobs: make([]float32, l),
			Advantages: make([]float32, l), Returns: make([]float32, l), OldValues: make([]float32, l)}
		for j := range l {
			s.Tokens[j] = int32(r.IntN(vocab))
			if j >= brief && (j-brief)%(ctx+gen) >= ctx && j < brief+turns*(ctx+gen) {
				s.Mask[j] = true
				s.OldLogprobs[j] = -float32(1 + r.Float64())
				s.Advantages[j] = float32(r.NormFloat64())
				s.Returns[j] = float32(r.Float64())
				s.OldValues[j] = float32(r.Float64())
			}
		}
		seqs[i] = s
	}
	return seqs
}

// BenchmarkSelfplayUpdate measures the score and update phases of one
// default self-play iteration on the built-in model's shape (preset base):
// Evaluate (policy and reference passes) and Step (2 epochs, minibatches
// of 8, the default options) over 32 seat streams of ~710 tokens, 5%
// trained (selfplaySeqs). last=all runs the last layer on every row,
// last=selected on the selected rows only (the default). Reports the
// seconds of each phase per iteration.
func BenchmarkSelfplayUpdate(b *testing.B) {
	path := baseModel(b)
	for _, c := range []struct {
		last, attn string
		threads    int
	}{{"selected", "blocks", 1}, {"selected", "full", 1}, {"all", "blocks", 1}, {"selected", "blocks", 2}} {
		b.Run(fmt.Sprintf("last=%s/attn=%s/threads=%d", c.last, c.attn, c.threads), func(b *testing.B) {
			o := Options{}.Defaults()
			o.Threads = c.threads
			tr, err := New(path, o)
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			tr.fullLastLayer = c.last == "all"
			if c.attn == "full" {
				tr.attnBlock = -1
			}
			seqs := selfplaySeqs(5, 32, tr.Vocab())
			ctx := context.Background()
			var score, update time.Duration
			for b.Loop() {
				start := time.Now()
				scores, err := tr.Evaluate(ctx, seqs)
				if err != nil {
					b.Fatal(err)
				}
				score += time.Since(start)
				for i := range seqs {
					seqs[i].RefLogprobs = scores[i].RefLogprobs
				}
				start = time.Now()
				if _, err := tr.Step(ctx, seqs); err != nil {
					b.Fatal(err)
				}
				update += time.Since(start)
				for i := range seqs {
					seqs[i].RefLogprobs = nil
				}
			}
			b.ReportMetric(score.Seconds()/float64(b.N), "score-s/op")
			b.ReportMetric(update.Seconds()/float64(b.N), "update-s/op")
		})
	}
}

// BenchmarkQuantizedBase measures scoring and a PPO step (as
// BenchmarkPPOStep's small case, one thread) on the small preset stored in
// F32 and quantized, with the frozen matrices held in the file's type
// (the default) and dequantized to F32 (Options.DequantizeBase).
func BenchmarkQuantizedBase(b *testing.B) {
	for _, typ := range []gguf.TensorType{gguf.F32, gguf.Q8_0, gguf.Q4_0} {
		for _, held := range []string{"file", "f32", "file/outprod"} {
			if typ == gguf.F32 && held != "file" {
				continue
			}
			b.Run(fmt.Sprintf("%v/held=%s", typ, held), func(b *testing.B) {
				path := smallModel(b)
				if typ != gguf.F32 {
					path = filepath.Join(b.TempDir(), "q.gguf")
					quantizeModel(b, smallModel(b), path, typ)
				}
				o := testOptions()
				o.LoRARank, o.Epochs, o.MiniBatch, o.BatchTokens = 8, 1, 8, 1024
				o.DequantizeBase = held == "f32"
				o.OutProdBackward = held == "file/outprod"
				tr, err := New(path, o)
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				seqs := randomSeqs(5, 2, 64, 128, tr.Vocab())
				ctx := context.Background()
				tokens := 0
				for b.Loop() {
					scores, err := tr.Evaluate(ctx, seqs)
					if err != nil {
						b.Fatal(err)
					}
					for i := range seqs {
						seqs[i].RefLogprobs = scores[i].RefLogprobs
					}
					st, err := tr.Step(ctx, seqs)
					if err != nil {
						b.Fatal(err)
					}
					tokens += st.Tokens
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				b.ReportMetric(float64(tr.memoryNeed(tr.base).weights)/(1<<20), "MiB-weights")
			})
		}
	}
}

// TestStepBenchText: the text names both devices and every difference
// with a comparison, and only the one device without.
func TestStepBenchText(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	r := StepBench{Model: "m.gguf", Arch: "llama", Device: "cuda", Backend: "CUDA0", Steps: 5, StepMSMedian: 2,
		CompareDevice: "cpu", CompareBackend: "CPU", CompareStepMSMedian: 8, Speedup: 4,
		DiffLogprobs: f(1e-5), DiffRefLogprobs: f(1e-5), DiffLoss: f(1e-6), DiffGradNorm: f(1e-5), DiffLogprobsAfter: f(2e-5), DiffValuesAfter: f(1e-6)}
	var b strings.Builder
	r.WriteText(&b)
	for _, want := range []string{"model m.gguf (llama)", "cuda is 4.00× as fast", "largest |cuda − cpu|:", "values after the update", "2e-05"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("got\n%s\nwant %q", b.String(), want)
		}
	}
	r.CompareDevice = ""
	b.Reset()
	r.WriteText(&b)
	if strings.Count(b.String(), "\n") != 2 || strings.Contains(b.String(), "largest") {
		t.Errorf("without a comparison got\n%s", b.String())
	}
}
