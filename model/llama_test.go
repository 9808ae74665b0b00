package model_test

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// llamaLib loads llama.cpp from the repository's lib/llama/cpu, or skips
// when scripts/install-llama.sh has not put the libraries there (make test
// runs it first, so there the test always runs).
func llamaLib(t *testing.T) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "lib", "llama", "cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "libllama*.so")); len(m) == 0 {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	if err := llamacpp.Load(dir); err != nil {
		t.Fatalf("load llama.cpp from %s: %v", dir, err)
	}
}

var llamaTexts = []string{
	"Hello, world!",
	"The buyer offered 180 dollars for the blue bicycle; the seller wanted 220.",
	"  two leading spaces, tabs\tand\nnew lines\n\n",
	`{"action": "vote", "target": "Carol"}`,
	"ünïcödé — 日本語 🙂 I'm sure they'll agree.",
	"<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
}

// TestLlamaCppLoads loads each generated architecture with llama.cpp and
// checks that its tokenizer agrees with ours, the chat template is
// recognised, decoding produces spread-out logits, and a LoRA adapter
// written by WriteLoRA loads and changes the output.
func TestLlamaCppLoads(t *testing.T) {
	llamaLib(t)
	for _, arch := range model.Architectures {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, arch+".gguf")
			if err := model.WriteFile(path, model.Options{Arch: arch, Preset: "tiny", Seed: 5}); err != nil {
				t.Fatal(err)
			}
			m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c, _ := model.PresetConfig(arch, "tiny")
			if got := m.NParams(); got != uint64(c.Params()) {
				t.Errorf("llama.cpp counts %d params, want %d", got, c.Params())
			}
			if m.NLayer() != c.BlockCount || m.NEmbd() != c.EmbeddingLength || m.NCtxTrain() != c.ContextLength {
				t.Errorf("shape: layers %d, embd %d, ctx %d; want %d, %d, %d", m.NLayer(), m.NEmbd(), m.NCtxTrain(), c.BlockCount, c.EmbeddingLength, c.ContextLength)
			}
			tok, err := model.NewModelTokenizer(c.VocabSize)
			if err != nil {
				t.Fatal(err)
			}
			v := m.Vocab()
			if v.NTokens() != c.VocabSize || v.EOS() != tok.EOS || v.EOT() != tok.EOT || !v.IsEOG(tok.ID(model.IMEnd)) || v.AddBOS() {
				t.Errorf("vocab: n %d eos %d eot %d eog(im_end) %v add_bos %v; want %d %d %d true false",
					v.NTokens(), v.EOS(), v.EOT(), v.IsEOG(tok.ID(model.IMEnd)), v.AddBOS(), c.VocabSize, tok.EOS, tok.EOT)
			}
			for _, s := range llamaTexts {
				got, err := v.Tokenize(s, false, true)
				if err != nil {
					t.Fatal(err)
				}
				if want := tok.Encode(s, true); !slices.Equal(got, want) {
					t.Errorf("Tokenize(%q): llama.cpp %v, Go %v", s, got, want)
				}
				back, err := v.Detokenize(got, false, true)
				if err != nil || back != s {
					t.Errorf("Detokenize: got %q (%v), want %q", back, err, s)
				}
			}
			tmpl, ok := m.ChatTemplate("")
			if !ok || tmpl != model.ChatTemplate {
				t.Fatalf("chat template: got %q, %v", tmpl, ok)
			}
			chat, err := llamacpp.ApplyChatTemplate(tmpl, []llamacpp.ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}, true)
			if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; err != nil || chat != want {
				t.Errorf("chat template: got %q (%v), want %q", chat, err, want)
			}

			base := decodeLogits(t, m, v, chat, nil)
			// Entropy of the next-token distribution: far from a constant
			// token, far from uniform.
			if h := entropy(base); h < 1 || h > math.Log(float64(c.VocabSize))-0.3 {
				t.Errorf("next-token entropy %.2f nats, want between 1 and %.2f", h, math.Log(float64(c.VocabSize))-0.3)
			}
			gen := greedy(t, m, v, chat, 8)
			t.Logf("entropy %.2f nats, greedy %v", entropy(base), gen)
			if len(slices.Compact(slices.Clone(gen))) < 2 {
				t.Errorf("greedy decoding repeats one token: %v", gen)
			}

			// A LoRA on attn_q and ffn_down with B ≠ 0 changes the logits.
			lora := gguf.LoRA{Arch: arch, Alpha: 8}
			for _, tc := range []struct {
				name    string
				in, out int
			}{{"blk.0.attn_q.weight", c.EmbeddingLength, c.HeadDim * c.HeadCount}, {"blk.1.ffn_down.weight", c.FeedForwardLength, c.EmbeddingLength}} {
				r := 4
				lt := gguf.LoRATensor{Base: tc.name, In: tc.in, Out: tc.out, Rank: r, A: make([]float32, r*tc.in), B: make([]float32, tc.out*r)}
				for i := range lt.A {
					lt.A[i] = float32(math.Sin(float64(i))) * 0.1
				}
				for i := range lt.B {
					lt.B[i] = float32(math.Cos(float64(i))) * 0.1
				}
				lora.Tensors = append(lora.Tensors, lt)
			}
			apath := filepath.Join(dir, "adapter.gguf")
			if err := gguf.WriteLoRA(apath, lora); err != nil {
				t.Fatal(err)
			}
			ad, err := llamacpp.LoadAdapter(m, apath)
			if err != nil {
				t.Fatal(err)
			}
			defer ad.Close()
			adapted := decodeLogits(t, m, v, chat, ad)
			var diff float64
			for i := range base {
				diff = max(diff, math.Abs(float64(base[i]-adapted[i])))
			}
			if diff < 1e-3 {
				t.Errorf("adapter changed logits by at most %g", diff)
			}
		})
	}
}

func newContext(t *testing.T, m *llamacpp.Model) *llamacpp.LlamaContext {
	t.Helper()
	o := llamacpp.ContextOptions{}.Defaults()
	o.NCtx = 512
	ctx, err := llamacpp.NewLlamaContext(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// decodeLogits decodes prompt in a fresh context (with adapter when not
// nil) and returns a copy of the last position's logits.
func decodeLogits(t *testing.T, m *llamacpp.Model, v *llamacpp.Vocab, prompt string, adapter *llamacpp.Adapter) []float32 {
	t.Helper()
	ctx := newContext(t, m)
	defer ctx.Close()
	if adapter != nil {
		if err := ctx.SetAdapters([]*llamacpp.Adapter{adapter}, []float32{1}); err != nil {
			t.Fatal(err)
		}
		defer ctx.SetAdapters(nil, nil)
	}
	ids, err := v.Tokenize(prompt, false, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := llamacpp.NewBatch(len(ids), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, id := range ids {
		b.Add(id, int32(i), 0, i == len(ids)-1)
	}
	if err := ctx.Decode(b); err != nil {
		t.Fatal(err)
	}
	l, err := ctx.Logits(-1)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(l)
}

// greedy decodes n tokens greedily after prompt.
func greedy(t *testing.T, m *llamacpp.Model, v *llamacpp.Vocab, prompt string, n int) []int32 {
	t.Helper()
	ctx := newContext(t, m)
	defer ctx.Close()
	ids, _ := v.Tokenize(prompt, false, true)
	b, err := llamacpp.NewBatch(len(ids)+1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, id := range ids {
		b.Add(id, int32(i), 0, i == len(ids)-1)
	}
	var out []int32
	for pos := len(ids); len(out) < n; pos++ {
		if err := ctx.Decode(b); err != nil {
			t.Fatal(err)
		}
		l, _ := ctx.Logits(-1)
		next := int32(0)
		for i, x := range l {
			if x > l[next] {
				next = int32(i)
			}
		}
		out = append(out, next)
		b.Clear()
		b.Add(next, int32(pos), 0, true)
	}
	return out
}

func entropy(logits []float32) float64 {
	mx := float64(slices.Max(logits))
	var z float64
	for _, x := range logits {
		z += math.Exp(float64(x) - mx)
	}
	var h float64
	for _, x := range logits {
		p := math.Exp(float64(x)-mx) / z
		if p > 0 {
			h -= p * math.Log(p)
		}
	}
	return h
}

// TestLlamaCppF16 checks that an F16 file loads and computes nearly the same
// logits as the F32 file of the same seed.
func TestLlamaCppF16(t *testing.T) {
	llamaLib(t)
	dir := t.TempDir()
	prompt := "<|im_start|>user\nShall we split the books?<|im_end|>\n<|im_start|>assistant\n"
	var logits [][]float32
	for _, typ := range []gguf.TensorType{gguf.F32, gguf.F16} {
		path := filepath.Join(dir, typ.String()+".gguf")
		if err := model.WriteFile(path, model.Options{Arch: "qwen3", Seed: 9, Type: typ}); err != nil {
			t.Fatal(err)
		}
		m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, decodeLogits(t, m, m.Vocab(), prompt, nil))
		m.Close()
	}
	var diff float64
	for i := range logits[0] {
		diff = max(diff, math.Abs(float64(logits[0][i]-logits[1][i])))
	}
	if diff > 0.05 || diff == 0 {
		t.Errorf("F16 vs F32 logits differ by up to %g, want (0, 0.05]", diff)
	}
}

// TestSplitDigitsLlamaCpp fits merges that keep digits apart and checks
// that llama.cpp, reading them from the file, tokenizes numbers digit by
// digit exactly as the Go tokenizer does.
func TestSplitDigitsLlamaCpp(t *testing.T) {
	llamaLib(t)
	merges, err := model.TrainBPEWith(model.Corpus(), 509, model.BPEOptions{SplitDigits: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "digits.gguf")
	if err := model.WriteFile(path, model.Options{Preset: "tiny", Seed: 1, Merges: merges}); err != nil {
		t.Fatal(err)
	}
	m, err := llamacpp.LoadModel(path, llamacpp.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := model.MergesTokenizer(merges)
	if err != nil {
		t.Fatal(err)
	}
	v := m.Vocab()
	for _, s := range append(slices.Clone(llamaTexts), "PROPOSE: price=1280.50", "Round 3 of 4: 2024 items, $ 99 each") {
		got, err := v.Tokenize(s, false, true)
		if err != nil {
			t.Fatal(err)
		}
		if want := tok.Encode(s, true); !slices.Equal(got, want) {
			t.Errorf("Tokenize(%q): llama.cpp %v, Go %v", s, got, want)
		}
		for _, id := range got {
			piece, err := tok.Decode([]int32{id})
			if err != nil {
				t.Fatal(err)
			}
			if strings.ContainsAny(piece, "0123456789") && len(strings.TrimSpace(piece)) != 1 {
				t.Errorf("Tokenize(%q): token %d is %q, more than one digit", s, id, piece)
			}
		}
	}
}
