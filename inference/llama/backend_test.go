package llama

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

var (
	modelOnce sync.Once
	modelPath string
	modelErr  error
)

// tinyModel writes the tiny test model once per test binary.
func tinyModel(t testing.TB) string {
	t.Helper()
	modelOnce.Do(func() {
		dir, err := os.MkdirTemp("", "llama-backend-test")
		if err != nil {
			modelErr = err
			return
		}
		modelPath = filepath.Join(dir, "tiny.gguf")
		modelErr = model.WriteFile(modelPath, model.Options{Seed: 1})
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelPath != "" {
		os.RemoveAll(filepath.Dir(modelPath))
	}
	os.Exit(code)
}

// testOptions returns options for the tiny model, or skips when the
// libraries are not installed (make test installs them, so there it runs).
func testOptions(t testing.TB) Options {
	t.Helper()
	dir := llamatest.LibDir()
	if dir == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	o := Options{}.Defaults()
	o.LibDir = dir
	o.Model = tinyModel(t)
	o.Parallel = 4
	o.Context = 256
	o.Batch = 128
	// One thread: the test machine is shared, and llama.cpp's worker
	// threads spin-wait for each other, which collapses under contention.
	o.Threads, o.ThreadsBatch = 1, 1
	// F32 keys and values: logits then agree with a recomputation to
	// float rounding, which the logprob tests rely on.
	o.KVType = llamacpp.KVTypeF32
	return o
}

func newBackend(t testing.TB, o Options) *Backend {
	t.Helper()
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func prompt(t testing.TB, b *Backend, text string) []int32 {
	t.Helper()
	s, err := b.ChatTemplate([]inference.Message{{Role: "user", Content: text}}, true)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := b.Tokenize(s, false, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func gen(t testing.TB, b *Backend, reqs ...inference.Request) []inference.Response {
	t.Helper()
	out, err := b.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{}.Defaults()
	ok.Model = "m.gguf"
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"defaults", func(*Options) {}, ""},
		{"no model", func(o *Options) { o.Model = "" }, "no model"},
		{"no threads", func(o *Options) { o.Threads = 0 }, "threads"},
		{"batch below parallel", func(o *Options) { o.Parallel, o.Batch = 16, 8 }, "batch 8 < parallel 16"},
		{"tiny context", func(o *Options) { o.Context = 4 }, "context 4"},
		{"contexts", func(o *Options) { o.Contexts = 4 }, ""},
		{"negative contexts", func(o *Options) { o.Contexts = -1 }, "contexts -1 < 0"},
		{"contexts beyond slots", func(o *Options) { o.Parallel, o.Contexts = 2, 3 }, "contexts 3 > parallel 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mutate(&o)
			err := o.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !regexp.MustCompile(regexp.QuoteMeta(tt.want)).MatchString(err.Error())) {
				t.Errorf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	o := testOptions(t)
	dir := t.TempDir()
	trunc := filepath.Join(dir, "trunc.gguf")
	data, _ := os.ReadFile(o.Model)
	os.WriteFile(trunc, data[:len(data)/2], 0o644)
	for _, tt := range []struct{ name, model string }{
		{"missing", filepath.Join(dir, "nope.gguf")},
		{"truncated", trunc},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := o
			o.Model = tt.model
			if _, err := New(o); err == nil {
				t.Errorf("New(%s): got no error", tt.model)
			}
		})
	}
}

func TestTokenizer(t *testing.T) {
	b := newBackend(t, testOptions(t))
	for _, text := range []string{"i offer you three books", "<|im_start|>user\nhi<|im_end|>\n", "ünïcode 🐺"} {
		toks, err := b.Tokenize(text, false, true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Detokenize(toks)
		if err != nil {
			t.Fatal(err)
		}
		if got != text {
			t.Errorf("round trip: got %q, want %q", got, text)
		}
	}
	toks, _ := b.Tokenize(model.IMEnd, false, true)
	imEnd := toks[0]
	if len(toks) != 1 || !b.EOG(imEnd) || b.EOG(65) {
		t.Errorf("EOG(<|im_end|>) = %v, EOG(65) = %v", b.EOG(imEnd), b.EOG(65))
	}
}

// TestSpecialTexts: the chat markers are listed, and each tokenises to a
// single special token only when special parsing is on.
func TestSpecialTexts(t *testing.T) {
	b := newBackend(t, testOptions(t))
	got := b.SpecialTexts()
	for _, want := range []string{model.IMStart, model.IMEnd, model.EndOfText} {
		if !slices.Contains(got, want) {
			t.Errorf("SpecialTexts() = %q, missing %q", got, want)
		}
	}
	for _, sp := range got {
		special, _ := b.Tokenize(sp, false, true)
		plain, _ := b.Tokenize(sp, false, false)
		if len(special) != 1 || slices.Equal(special, plain) {
			t.Errorf("%q: special parse %v, plain %v; want one special token only with special parsing", sp, special, plain)
		}
	}
}

// TestMessages: a request with Messages and no Prompt is rendered with the
// chat template, and samples what the rendered token prompt samples.
func TestMessages(t *testing.T) {
	b := newBackend(t, testOptions(t))
	sp := inference.Sampling{Temperature: 1, Seed: 3}
	byMsgs := gen(t, b, inference.Request{Messages: []inference.Message{{Role: "user", Content: "hello"}}, MaxTokens: 8, Sampling: sp})[0]
	byToks := gen(t, b, inference.Request{Prompt: prompt(t, b, "hello"), MaxTokens: 8, Sampling: sp})[0]
	if !sameTokens(byMsgs.Tokens, byToks.Tokens) {
		t.Errorf("messages %v, tokens %v", byMsgs.Tokens, byToks.Tokens)
	}
	if _, err := b.Generate(context.Background(), []inference.Request{{MaxTokens: 2}}); err == nil {
		t.Errorf("no prompt and no messages: got no error")
	}
}

func TestSeedDeterminism(t *testing.T) {
	b := newBackend(t, testOptions(t))
	p := prompt(t, b, "what is your price?")
	req := func(seed uint64) inference.Request {
		return inference.Request{Prompt: p, MaxTokens: 24, Sampling: inference.Sampling{Temperature: 1, Seed: seed}}
	}
	a := gen(t, b, req(1))[0]
	again := gen(t, b, req(1))[0]
	other := gen(t, b, req(2))[0]
	if !sameTokens(a.Tokens, again.Tokens) {
		t.Errorf("same seed: got %v and %v", a.Tokens, again.Tokens)
	}
	if sameTokens(a.Tokens, other.Tokens) {
		t.Errorf("seeds 1 and 2 gave the same %d tokens %v", len(a.Tokens), a.Tokens)
	}
	for i := range a.Logprobs {
		if a.Logprobs[i] != again.Logprobs[i] {
			t.Fatalf("logprob %d: %v vs %v", i, a.Logprobs[i], again.Logprobs[i])
		}
	}
}

func TestGrammar(t *testing.T) {
	b := newBackend(t, testOptions(t))
	p := prompt(t, b, "vote")
	grammar := `root ::= ("yes" | "no" | "vote " [0-9] [0-9]?) "."`
	valid := regexp.MustCompile(`^(yes|no|vote [0-9][0-9]?)\.$`)
	var reqs []inference.Request
	for seed := range uint64(16) {
		reqs = append(reqs, inference.Request{Prompt: p, MaxTokens: 32, Grammar: grammar,
			Sampling: inference.Sampling{Temperature: 1.5, Seed: seed}})
	}
	for i, r := range gen(t, b, reqs...) {
		if !valid.MatchString(r.Text) {
			t.Errorf("seed %d: reply %q does not parse (stop %s)", i, r.Text, r.Stop)
		}
		if r.Stop != inference.StopEOG {
			t.Errorf("seed %d: stop %s, want eog after the grammar completed", i, r.Stop)
		}
	}
	_, err := b.Generate(context.Background(), []inference.Request{{Prompt: p, MaxTokens: 4, Grammar: "root ::= ("}})
	if !errors.Is(err, llamacpp.ErrGrammar) {
		t.Errorf("bad grammar: got %v, want ErrGrammar", err)
	}
}

// TestBatchedEqualsSequential: requests decoded together give the tokens
// they give alone.
func TestBatchedEqualsSequential(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	var reqs []inference.Request
	for i := range 6 { // more than the 4 slots: some wait for a free one
		reqs = append(reqs, inference.Request{
			Key:       fmt.Sprintf("seat%d", i),
			Prompt:    prompt(t, b, fmt.Sprintf("player %d, make your offer", i)),
			MaxTokens: 20,
			Sampling:  inference.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: uint64(100 + i)},
		})
	}
	batched := gen(t, b, reqs...)

	seq := newBackend(t, o)
	for i, r := range reqs {
		alone := gen(t, seq, r)[0]
		if !sameTokens(alone.Tokens, batched[i].Tokens) {
			t.Errorf("request %d: batched %v, alone %v", i, batched[i].Tokens, alone.Tokens)
		}
	}

	// Concurrent callers share the loop and get the same answers too, also
	// when the draws are split over goroutines.
	o.sampleWork = 1
	conc := newBackend(t, o)
	got := make([]inference.Response, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			rs, err := conc.Generate(context.Background(), []inference.Request{r})
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			got[i] = rs[0]
		})
	}
	wg.Wait()
	for i := range reqs {
		if !sameTokens(got[i].Tokens, batched[i].Tokens) {
			t.Errorf("request %d: concurrent %v, batched %v", i, got[i].Tokens, batched[i].Tokens)
		}
	}
}

// TestPrefixReuse: a seat's next turn decodes only its new tokens and
// samples what a full re-decode samples.
func TestPrefixReuse(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	sp := inference.Sampling{Temperature: 1, Seed: 9}
	p1 := prompt(t, b, "first turn")
	r1 := gen(t, b, inference.Request{Key: "ep1/seat0", Prompt: p1, MaxTokens: 12, Sampling: sp})[0]
	more, _ := b.Tokenize("<|im_end|>\n<|im_start|>user\nsecond turn<|im_end|>\n<|im_start|>assistant\n", false, true)
	p2 := append(append(append([]int32{}, p1...), r1.Tokens...), more...)
	r2 := gen(t, b, inference.Request{Key: "ep1/seat0", Prompt: p2, MaxTokens: 12, Sampling: sp})[0]
	// Everything but the last sampled token (never decoded) is reused.
	if want := len(p1) + len(r1.Tokens) - 1; r2.ReusedTokens != want {
		t.Errorf("reused %d tokens, want %d", r2.ReusedTokens, want)
	}
	fresh := newBackend(t, o)
	full := gen(t, fresh, inference.Request{Key: "other", Prompt: p2, MaxTokens: 12, Sampling: sp})[0]
	if full.ReusedTokens != 0 {
		t.Errorf("fresh backend reused %d tokens", full.ReusedTokens)
	}
	if !sameTokens(r2.Tokens, full.Tokens) {
		t.Errorf("with reuse %v, full re-decode %v", r2.Tokens, full.Tokens)
	}
	for i := range r2.RawLogprobs {
		if d := math.Abs(float64(r2.RawLogprobs[i] - full.RawLogprobs[i])); d > 1e-4 {
			t.Errorf("raw logprob %d: reuse %v, full %v", i, r2.RawLogprobs[i], full.RawLogprobs[i])
		}
	}
	// A prompt that diverges from the cache drops the cached tail.
	p3 := append(append([]int32{}, p1[:len(p1)-2]...), more...)
	r3 := gen(t, b, inference.Request{Key: "ep1/seat0", Prompt: p3, MaxTokens: 4, Sampling: sp})[0]
	full3 := gen(t, fresh, inference.Request{Key: "x", Prompt: p3, MaxTokens: 4, Sampling: sp})[0]
	if r3.ReusedTokens != len(p1)-2 || !sameTokens(r3.Tokens, full3.Tokens) {
		t.Errorf("diverged prompt: reused %d (want %d), tokens %v vs %v", r3.ReusedTokens, len(p1)-2, r3.Tokens, full3.Tokens)
	}
}

// TestLogprobsMatchRecomputation decodes prompt+reply in one batch and
// compares each reply token's log-softmax with what Generate returned.
func TestLogprobsMatchRecomputation(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	p := prompt(t, b, "the seer is")
	const temp = 0.7
	tests := []struct {
		name string
		sp   inference.Sampling
	}{
		{"temperature", inference.Sampling{Temperature: temp, Seed: 5}},
		{"top-k", inference.Sampling{Temperature: temp, TopK: 5, Seed: 6}},
		{"greedy", inference.Sampling{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gen(t, b, inference.Request{Prompt: p, MaxTokens: 16, Sampling: tt.sp})[0]
			if len(r.Tokens) == 0 {
				t.Fatal("no tokens")
			}
			all := append(append([]int32{}, p...), r.Tokens...)
			rows := recompute(t, b, all)
			for i, tok := range r.Tokens {
				l := rows[len(p)-1+i]
				raw := logSoftmaxAt(l, tok, 1, 0)
				if d := math.Abs(raw - float64(r.RawLogprobs[i])); d > 1e-3 {
					t.Errorf("token %d: raw logprob %v, recomputed %v", i, r.RawLogprobs[i], raw)
				}
				var want float64
				switch {
				case tt.sp.Temperature == 0:
					want = 0
				default:
					want = logSoftmaxAt(l, tok, tt.sp.Temperature, tt.sp.TopK)
				}
				if d := math.Abs(want - float64(r.Logprobs[i])); d > 1e-3 {
					t.Errorf("token %d: logprob %v, recomputed %v", i, r.Logprobs[i], want)
				}
			}
		})
	}
}

// recompute returns the logits at every position of toks from a separate
// context over the same model.
func recompute(t *testing.T, b *Backend, toks []int32) [][]float32 {
	t.Helper()
	co := llamacpp.ContextOptions{}.Defaults()
	co.NCtx, co.NBatch, co.TypeK, co.TypeV = 512, 512, llamacpp.KVTypeF32, llamacpp.KVTypeF32
	co.Threads, co.ThreadsBatch = 1, 1
	c, err := llamacpp.NewLlamaContext(b.Model(), co)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	batch, _ := llamacpp.NewBatch(len(toks), 1)
	defer batch.Close()
	for i, tok := range toks {
		batch.Add(tok, int32(i), 0, true)
	}
	if err := c.Decode(batch); err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, len(toks))
	for i := range toks {
		l, err := c.Logits(i)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = append([]float32(nil), l...)
	}
	return rows
}

// logSoftmaxAt is log p(tok) after temperature and an optional top-k.
func logSoftmaxAt(l []float32, tok int32, temp float32, topK int) float64 {
	keep := make([]bool, len(l))
	for i := range keep {
		keep[i] = true
	}
	if topK > 0 && topK < len(l) {
		// The k-th largest logit is the threshold.
		sorted := append([]float32(nil), l...)
		for i := range topK { // partial selection sort, k is small
			m := i
			for j := i + 1; j < len(sorted); j++ {
				if sorted[j] > sorted[m] {
					m = j
				}
			}
			sorted[i], sorted[m] = sorted[m], sorted[i]
		}
		th := sorted[topK-1]
		for i, v := range l {
			keep[i] = v >= th
		}
	}
	mx := math.Inf(-1)
	for i, v := range l {
		if keep[i] {
			mx = math.Max(mx, float64(v/temp))
		}
	}
	s := 0.0
	for i, v := range l {
		if keep[i] {
			s += math.Exp(float64(v/temp) - mx)
		}
	}
	return float64(l[tok]/temp) - mx - math.Log(s)
}

func TestStops(t *testing.T) {
	o := testOptions(t)
	o.Context = 64
	o.ignoreEOG = true // the random model may end early
	b := newBackend(t, o)
	p := prompt(t, b, "go")
	base := gen(t, b, inference.Request{Prompt: p, MaxTokens: 30, Sampling: inference.Sampling{Seed: 1, Temperature: 1}})[0]
	if len(base.Tokens) < 4 {
		t.Skipf("reply too short to test stops: %v", base.Tokens)
	}
	t.Run("max tokens", func(t *testing.T) {
		r := gen(t, b, inference.Request{Prompt: p, MaxTokens: 3, Sampling: inference.Sampling{Seed: 1, Temperature: 1}})[0]
		if len(r.Tokens) != 3 || r.Stop != inference.StopLength || !sameTokens(r.Tokens, base.Tokens[:3]) {
			t.Errorf("got %v stop %s, want %v stop length", r.Tokens, r.Stop, base.Tokens[:3])
		}
	})
	t.Run("stop token", func(t *testing.T) {
		r := gen(t, b, inference.Request{Prompt: p, MaxTokens: 30, StopTokens: []int32{base.Tokens[2]},
			Sampling: inference.Sampling{Seed: 1, Temperature: 1}})[0]
		first := 0
		for base.Tokens[first] != base.Tokens[2] {
			first++
		}
		if r.Stop != inference.StopString || len(r.Tokens) != first+1 {
			t.Errorf("got %d tokens stop %s, want %d stop %s", len(r.Tokens), r.Stop, first+1, inference.StopString)
		}
	})
	t.Run("stop string", func(t *testing.T) {
		piece := b.vocab.Piece(base.Tokens[3], false)
		if piece == "" {
			t.Skip("token 3 renders empty")
		}
		r := gen(t, b, inference.Request{Prompt: p, MaxTokens: 30, Stop: []string{piece},
			Sampling: inference.Sampling{Seed: 1, Temperature: 1}})[0]
		if r.Stop != inference.StopString || len(r.Tokens) > 4 {
			t.Errorf("got %d tokens %q stop %s, want ≤ 4 tokens ending in %q", len(r.Tokens), r.Text, r.Stop, piece)
		}
	})
	t.Run("context full", func(t *testing.T) {
		long := make([]int32, 0, 100)
		for len(long) < 100 {
			long = append(long, p...)
		}
		_, err := b.Generate(context.Background(), []inference.Request{{Prompt: long[:65]}})
		if !errors.Is(err, inference.ErrContextFull) {
			t.Errorf("prompt of 65 in a context of 64: got %v, want ErrContextFull", err)
		}
		// Generation that runs out of room stops with StopFull.
		r := gen(t, b, inference.Request{Prompt: long[:60], MaxTokens: 100, Sampling: inference.Sampling{Temperature: 1}})[0]
		if r.Stop != inference.StopFull || len(r.Tokens) != 5 {
			t.Errorf("got %d tokens stop %s, want 5 tokens stop full", len(r.Tokens), r.Stop)
		}
	})
}

func TestCancel(t *testing.T) {
	o := testOptions(t)
	o.ignoreEOG = true
	o.Context = 8192 // long enough that the cancel lands mid-generation
	// Beyond the tiny model's 4096 training positions: the reply's text
	// does not matter here.
	o.ContextBeyondTraining = true
	b := newBackend(t, o)
	p := prompt(t, b, "talk forever")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	_, err := b.Generate(ctx, []inference.Request{{Key: "k", Prompt: p, MaxTokens: 8000, Sampling: inference.Sampling{Temperature: 1}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	// The backend keeps working and the key's slot is usable again.
	r := gen(t, b, inference.Request{Key: "k", Prompt: p, MaxTokens: 3})[0]
	if len(r.Tokens) != 3 {
		t.Errorf("after cancel: got %d tokens", len(r.Tokens))
	}
	b.Close()
	if _, err := b.Generate(context.Background(), []inference.Request{{Prompt: p}}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
	if _, err := b.Tokenize("hi", false, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Tokenize after Close: got %v, want ErrClosed", err)
	}
	if _, err := b.SetAdapter(context.Background(), "", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("SetAdapter after Close: got %v, want ErrClosed", err)
	}
}

func TestAdapterSwap(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	lora := filepath.Join(t.TempDir(), "lora.gguf")
	c, err := model.PresetConfig("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	l, err := llamatest.RandomLoRA(c, 4, 8, 0.3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteLoRA(lora, l); err != nil {
		t.Fatal(err)
	}
	p := prompt(t, b, "deal?")
	req := inference.Request{Key: "s", Prompt: p, MaxTokens: 16, Sampling: inference.Sampling{Temperature: 1, Seed: 4}}
	base := gen(t, b, req)[0]
	if base.PolicyVersion != 0 {
		t.Errorf("base policy version %d", base.PolicyVersion)
	}
	v, err := b.SetAdapter(context.Background(), lora, 1)
	if err != nil || v != 1 {
		t.Fatalf("SetAdapter: version %d, err %v", v, err)
	}
	adapted := gen(t, b, req)[0]
	if adapted.PolicyVersion != 1 || adapted.ReusedTokens != 0 {
		t.Errorf("adapted: version %d, reused %d (the cache must be cleared)", adapted.PolicyVersion, adapted.ReusedTokens)
	}
	if sameTokens(adapted.Tokens, base.Tokens) && math.Abs(float64(adapted.RawLogprobs[0]-base.RawLogprobs[0])) < 1e-4 {
		t.Errorf("adapter did not change the reply")
	}
	if v, err := b.SetAdapter(context.Background(), "", 0); err != nil || v != 2 {
		t.Fatalf("remove adapter: version %d, err %v", v, err)
	}
	back := gen(t, b, req)[0]
	if !sameTokens(back.Tokens, base.Tokens) {
		t.Errorf("after removing the adapter: %v, base %v", back.Tokens, base.Tokens)
	}
	if _, err := b.SetAdapter(context.Background(), filepath.Join(t.TempDir(), "none.gguf"), 1); err == nil {
		t.Errorf("missing adapter file: got no error")
	}
	if b.PolicyVersion() != 2 {
		t.Errorf("failed swap changed the version to %d", b.PolicyVersion())
	}
}

// TestSeatsConversation plays several seats' multi-turn conversations
// concurrently through 3 slots (keys outnumber slots, so caches are evicted
// and rebuilt) and checks every turn against the same conversations run one
// seat at a time through a single slot.
func TestSeatsConversation(t *testing.T) {
	o := testOptions(t)
	o.Parallel = 3
	const seats, turns = 6, 4
	play := func(b *Backend, concurrent bool) [][]inference.Response {
		out := make([][]inference.Response, seats)
		run := func(s int) {
			key := fmt.Sprintf("ep1/seat%d", s)
			stream := prompt(t, b, fmt.Sprintf("you are seat %d", s))
			for turn := range turns {
				rs, err := b.Generate(context.Background(), []inference.Request{{Key: key, Prompt: stream, MaxTokens: 6,
					Sampling: inference.Sampling{Temperature: 1, Seed: uint64(s*100 + turn)}}})
				if err != nil { // t.Fatal is not allowed outside the test goroutine
					t.Errorf("seat %d turn %d: %v", s, turn, err)
					return
				}
				r := rs[0]
				out[s] = append(out[s], r)
				obs, _ := b.Tokenize(fmt.Sprintf("<|im_end|>\n<|im_start|>user\nturn %d<|im_end|>\n<|im_start|>assistant\n", turn), false, true)
				stream = append(append(stream, r.Tokens...), obs...)
			}
		}
		if !concurrent {
			for s := range seats {
				run(s)
			}
			return out
		}
		var wg sync.WaitGroup
		for s := range seats {
			wg.Go(func() { run(s) })
		}
		wg.Wait()
		return out
	}
	b := newBackend(t, o)
	got := play(b, true)
	o.Parallel = 1
	want := play(newBackend(t, o), false)
	reused := 0
	for s := range seats {
		if len(got[s]) != turns || len(want[s]) != turns {
			t.Fatalf("seat %d: %d and %d turns played, want %d", s, len(got[s]), len(want[s]), turns)
		}
		for turn := range turns {
			if !sameTokens(got[s][turn].Tokens, want[s][turn].Tokens) {
				t.Errorf("seat %d turn %d: concurrent %v, one at a time %v", s, turn, got[s][turn].Tokens, want[s][turn].Tokens)
			}
			// One seat at a time through one slot, every later turn reuses
			// the seat's cache; concurrently, eviction depends on timing.
			reused += want[s][turn].ReusedTokens
		}
	}
	if reused == 0 {
		t.Errorf("no prefix was reused in %d sequential turns", seats*turns)
	}
	if st := b.Stats(); st.GeneratedTokens == 0 || st.Steps == 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestAdapterSwapWaits: a swap requested mid-generation waits for the
// running sequence, which finishes under the old policy; requests that
// arrive meanwhile run under the new one.
func TestAdapterSwapWaits(t *testing.T) {
	o := testOptions(t)
	o.ignoreEOG = true
	o.Context = 2048
	b := newBackend(t, o)
	lora := filepath.Join(t.TempDir(), "lora.gguf")
	c, _ := model.PresetConfig("llama", "tiny")
	l, err := llamatest.RandomLoRA(c, 4, 8, 0.3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteLoRA(lora, l); err != nil {
		t.Fatal(err)
	}
	p := prompt(t, b, "long")
	long := make(chan inference.Response, 1)
	go func() {
		rs, err := b.Generate(context.Background(), []inference.Request{{Key: "long", Prompt: p, MaxTokens: 1500, Sampling: inference.Sampling{Temperature: 1}}})
		if err != nil {
			t.Error(err)
			close(long)
			return
		}
		long <- rs[0]
	}()
	for b.Stats().GeneratedTokens == 0 {
		time.Sleep(time.Millisecond)
	}
	swapped := make(chan int, 1)
	go func() {
		v, err := b.SetAdapter(context.Background(), lora, 1)
		if err != nil {
			t.Error(err)
		}
		swapped <- v
	}()
	for b.swapsWaiting.Load() == 0 { // the loop holds the swap
		time.Sleep(100 * time.Microsecond)
	}
	late := gen(t, b, inference.Request{Key: "late", Prompt: p, MaxTokens: 4})[0]
	r, ok := <-long
	if !ok {
		t.Fatal("long generation failed")
	}
	if r.PolicyVersion != 0 || len(r.Tokens) != 1500 {
		t.Errorf("running sequence: version %d, %d tokens; want version 0, 1500 tokens", r.PolicyVersion, len(r.Tokens))
	}
	if v := <-swapped; v != 1 {
		t.Errorf("swap returned version %d, want 1", v)
	}
	if late.PolicyVersion != 1 {
		t.Errorf("request made while the swap waited: version %d, want 1", late.PolicyVersion)
	}
}

// TestGenerateEach: requests submitted together are decoded as one
// Generate call decodes them (the same steps: logprobs equal to the bit),
// and a request with invalid sampling fails alone.
func TestGenerateEach(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	var reqs []inference.Request
	for i := range 3 {
		reqs = append(reqs, inference.Request{
			Key:       fmt.Sprintf("seat%d", i),
			Prompt:    prompt(t, b, fmt.Sprintf("seat %d votes for", i)),
			MaxTokens: 12,
			Sampling:  inference.Sampling{Temperature: 1, Seed: uint64(7 + i)},
		})
	}
	bad := reqs[1]
	bad.Sampling.Temperature = -1
	ctx := context.Background()
	got, errs := b.GenerateEach([]context.Context{ctx, ctx, ctx}, []inference.Request{reqs[0], bad, reqs[2]})
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("errors %v: want one for the request with temperature -1 only", errs)
	}
	want := gen(t, newBackend(t, o), reqs[0], reqs[2])
	for k, i := range []int{0, 2} {
		if !slices.Equal(got[i].Tokens, want[k].Tokens) || !slices.Equal(got[i].Logprobs, want[k].Logprobs) {
			t.Errorf("request %d: GenerateEach %v %v, Generate %v %v", i, got[i].Tokens, got[i].Logprobs, want[k].Tokens, want[k].Logprobs)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, errs = b.GenerateEach([]context.Context{ctx, cctx}, []inference.Request{reqs[0], reqs[2]})
	if errs[0] != nil || !errors.Is(errs[1], context.Canceled) {
		t.Errorf("errors %v: want none for the live request and context.Canceled for the cancelled one", errs)
	}
}

// TestSessions: the deterministic schedule. Nothing is decoded while an
// open session has no request in flight, and two sessions playing turns
// get the same tokens and logprobs, to the bit, whether one of them
// dawdles between its turns or not.
func TestSessions(t *testing.T) {
	o := testOptions(t)
	ctx := context.Background()

	b := newBackend(t, o)
	idle := b.Session(1)
	busy := b.Session(0)
	r := inference.Request{Key: "a", Prompt: prompt(t, b, "hello"), MaxTokens: 4, Sampling: inference.Sampling{Temperature: 1, Seed: 1}}
	done := make(chan struct{})
	go func() {
		busy.GenerateEach([]context.Context{ctx}, []inference.Request{r})
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a request was decoded while another session owed its submission")
	case <-time.After(50 * time.Millisecond):
	}
	idle.Close()
	<-done

	// A request from no session is not held back for ever by one that
	// owes its submission (a caller that asked outside its session).
	defer func(w time.Duration) { outsiderWait = w }(outsiderWait)
	outsiderWait = 20 * time.Millisecond
	if _, err := b.Generate(ctx, []inference.Request{r}); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().ScheduleBypasses; n != 1 {
		t.Errorf("%d bypasses, want 1", n)
	}
	busy.Close()

	// Three sessions: the second dawdles (or not), the third plays two
	// seats at once under a named adapter (mixed-adapter steps).
	lora := writeLoRA(t, 3)
	play := func(dawdle bool) map[int][]inference.Response {
		b := newBackend(t, o)
		if err := b.LoadAdapter(ctx, "other", lora, 1); err != nil {
			t.Fatal(err)
		}
		return playSessions(t, b, []int{0, 1, 2}, dawdle)
	}
	a, d := play(false), play(true)
	for k := range 3 {
		for turn := range a[k] {
			if !slices.Equal(a[k][turn].Tokens, d[k][turn].Tokens) || !slices.Equal(a[k][turn].Logprobs, d[k][turn].Logprobs) {
				t.Errorf("session %d turn %d: %v %v, with a dawdling session %v %v", k, turn,
					a[k][turn].Tokens, a[k][turn].Logprobs, d[k][turn].Tokens, d[k][turn].Logprobs)
			}
		}
	}
}

// playSessions plays a session of b for each of orders at once, four
// turns each: session k has 1+k%3/2 seats (several seats submit
// together), decodes under the named adapter "other" when k%3 == 2, and
// with dawdle, session k%3 == 1 sleeps before each turn. It returns each
// session's responses by order, in turn order. Every session is open
// before any plays, as the self-play lanes do: a session opened later
// would join the schedule at whatever step its opening met.
func playSessions(t *testing.T, b *Backend, orders []int, dawdle bool) map[int][]inference.Response {
	ctx := context.Background()
	out := make(map[int][]inference.Response)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sessions := make([]inference.Session, len(orders))
	for i, k := range orders {
		sessions[i] = b.Session(k)
	}
	for i, k := range orders {
		s := sessions[i]
		wg.Go(func() {
			defer s.Close()
			seats := 1 + k%3/2
			toks := make([][]int32, seats)
			for j := range toks {
				toks[j] = prompt(t, b, fmt.Sprintf("seat %d.%d opens the bidding at", k, j))
			}
			var mine []inference.Response
			defer func() {
				mu.Lock()
				out[k] = mine
				mu.Unlock()
			}()
			for turn := range 4 {
				if dawdle && k%3 == 1 {
					time.Sleep(time.Duration(5+7*turn) * time.Millisecond)
				}
				ctxs := make([]context.Context, seats)
				reqs := make([]inference.Request, seats)
				for j := range reqs {
					ctxs[j] = ctx
					reqs[j] = inference.Request{
						Key: fmt.Sprintf("s%d.%d", k, j), Prompt: slices.Clone(toks[j]), MaxTokens: 3 + 5*((turn+k+j)%2),
						Sampling: inference.Sampling{Temperature: 1, Seed: uint64(100*k + 10*j + turn)},
					}
					if k%3 == 2 {
						reqs[j].Adapter = "other"
					}
				}
				rs, errs := s.GenerateEach(ctxs, reqs)
				for j := range reqs {
					if errs[j] != nil {
						t.Error(errs[j])
						return
					}
					mine = append(mine, rs[j])
					toks[j] = append(toks[j], rs[j].Tokens...)
					toks[j] = append(toks[j], prompt(t, b, " and then")...)
				}
			}
		})
	}
	wg.Wait()
	return out
}
