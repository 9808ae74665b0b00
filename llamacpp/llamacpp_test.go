package llamacpp

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

// testLib loads the libraries from lib/llama/cpu or skips the test when the
// install script has not run (make test runs it first, so there it never
// skips).
func testLib(t testing.TB) {
	t.Helper()
	dir := llamatest.LibDir()
	if dir == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	if err := Load(dir); err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
}

var tinyPath string

// testModel writes the tiny model once per test binary and loads it.
func testModel(t testing.TB) *Model {
	t.Helper()
	testLib(t)
	if tinyPath == "" {
		dir, err := os.MkdirTemp("", "llamacpp-test")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "tiny.gguf")
		if err := model.WriteFile(p, model.Options{Seed: 1}); err != nil {
			t.Fatal(err)
		}
		tinyPath = p
	}
	m, err := LoadModel(tinyPath, ModelOptions{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func tinyConfig(t testing.TB) model.Config {
	t.Helper()
	c, err := model.PresetConfig("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// specialID tokenizes a special token's text.
func specialID(t testing.TB, v *Vocab, s string) int32 {
	t.Helper()
	toks, err := v.Tokenize(s, false, true)
	if err != nil || len(toks) != 1 {
		t.Fatalf("special token %s: got %v, %v", s, toks, err)
	}
	return toks[0]
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyPath != "" {
		os.RemoveAll(filepath.Dir(tinyPath))
	}
	os.Exit(code)
}

// TestLoadErrors needs a process where Load has not succeeded yet, so it
// re-runs itself in a child test process.
func TestLoadErrors(t *testing.T) {
	if os.Getenv("LLAMACPP_TEST_LOAD_CHILD") != "1" {
		if llamatest.LibDir() == "" {
			t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoadErrors$", "-test.v")
		cmd.Env = append(os.Environ(), "LLAMACPP_TEST_LOAD_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestLoadErrors") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	lib := llamatest.LibDir()
	tmp := t.TempDir()
	wrong := filepath.Join(tmp, "wrong")
	os.MkdirAll(wrong, 0o755)
	os.WriteFile(filepath.Join(wrong, "libggml-base.so"), []byte("not an ELF file"), 0o644)
	tests := []struct {
		name, dir, want string
	}{
		{"missing dir", filepath.Join(tmp, "nope"), "install the libraries"},
		{"empty dir", tmp, "none of"},
		{"not a library", wrong, "open"},
	}
	// Another llama.cpp version: the real ggml libraries with a libllama
	// whose llama_version() says 0.4.2 (needs a C compiler).
	if cc, err := exec.LookPath("cc"); err == nil {
		old := filepath.Join(tmp, "old")
		os.MkdirAll(old, 0o755)
		for _, n := range []string{"libggml-base.so", "libggml.v0.5.0.so"} {
			os.Symlink(filepath.Join(lib, n), filepath.Join(old, n))
		}
		src := filepath.Join(tmp, "fake.c")
		os.WriteFile(src, []byte("const char * llama_version(void) { return \"0.4.2\"; }\nvoid llama_backend_init(void) {}\n"), 0o644)
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(old, "libllama.v0.5.0.so"), src).CombinedOutput(); err != nil {
			t.Fatalf("compile fake libllama: %v\n%s", err, out)
		}
		tests = append(tests, struct{ name, dir, want string }{"other version", old, `"0.4.2", want 0.5.0`})
		// The CUDA package's names (libggml.cuda.v0.5.0.so, …) are found
		// and opened: the version check is what refuses this one.
		cudaNames := filepath.Join(tmp, "cuda")
		os.MkdirAll(cudaNames, 0o755)
		os.Symlink(filepath.Join(lib, "libggml-base.so"), filepath.Join(cudaNames, "libggml-base.so"))
		os.Symlink(filepath.Join(lib, "libggml.v0.5.0.so"), filepath.Join(cudaNames, "libggml.cuda.v0.5.0.so"))
		os.Symlink(filepath.Join(old, "libllama.v0.5.0.so"), filepath.Join(cudaNames, "libllama.cuda.v0.5.0.so"))
		tests = append(tests, struct{ name, dir, want string }{"cuda package names", cudaNames, `"0.4.2", want 0.5.0`})
	} else {
		t.Log("no C compiler: the wrong-version case is not checked")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Load(tt.dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%s): got %v, want an error containing %q", tt.dir, err, tt.want)
			}
			if Loaded() {
				t.Errorf("Loaded after a failed Load")
			}
		})
	}
	// A successful load is still possible afterwards, and only once.
	if err := Load(lib); err != nil {
		t.Fatalf("Load(%s) after failures: %v", lib, err)
	}
	if err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("second Load with another dir: got %v, want already-loaded error", err)
	}
}

func TestVersionMatches(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"0.5.0", true}, {"0.5.0-dev", true}, {"0.5.1", false}, {"0.5.01", false}, {"0.4.9-dev", false}, {"", false}} {
		if got := versionMatches(tt.v); got != tt.want {
			t.Errorf("versionMatches(%q): got %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestModelFileErrors(t *testing.T) {
	m := testModel(t) // also writes tinyPath
	_ = m
	good, err := os.ReadFile(tinyPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := append([]byte{}, good...)
	copy(corrupt[24:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) // first key length
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), "no such file"},
		{"empty", write("empty.gguf", nil), "truncated"},
		{"bad magic", write("magic.gguf", []byte("GGML and some more bytes here")), "bad magic"},
		{"truncated header", write("hdr.gguf", good[:20]), "truncated"},
		{"truncated metadata", write("meta.gguf", good[:4000]), "left in the file"},
		{"truncated data", write("data.gguf", good[:len(good)-100]), "truncated"},
		{"corrupt length", write("corrupt.gguf", corrupt), "corrupt"},
		{"directory", dir, "directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadModel(tt.path, ModelOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if tt.name != "missing" && !errors.Is(err, ErrBadModelFile) {
				t.Errorf("got %v, want errors.Is ErrBadModelFile", err)
			}
		})
	}
}

func TestModelInfo(t *testing.T) {
	m := testModel(t)
	c := tinyConfig(t)
	if got := m.Vocab().NTokens(); got != c.VocabSize {
		t.Errorf("n_vocab: got %d, want %d", got, c.VocabSize)
	}
	if got := m.NEmbd(); got != c.EmbeddingLength {
		t.Errorf("n_embd: got %d, want %d", got, c.EmbeddingLength)
	}
	if got := m.NLayer(); got != c.BlockCount {
		t.Errorf("n_layer: got %d, want %d", got, c.BlockCount)
	}
	if got, ok := m.Meta("general.name"); !ok || got != "omar-tiny-llama" {
		t.Errorf("general.name: got %q %v", got, ok)
	}
	if _, ok := m.Meta("no.such.key"); ok {
		t.Errorf("missing key reported present")
	}
	v := m.Vocab()
	imEnd := specialID(t, v, model.IMEnd)
	if !v.IsEOG(imEnd) {
		t.Errorf("<|im_end|> (%d) is not end-of-generation", imEnd)
	}
	if v.IsEOG(100) {
		t.Errorf("byte token 100 is end-of-generation")
	}
	// Ids outside the vocabulary would abort inside llama.cpp.
	for _, id := range []int32{-5, int32(v.NTokens()), 1 << 30} {
		if v.IsEOG(id) || v.IsControl(id) || v.Piece(id, true) != "" || v.Text(id) != "" {
			t.Errorf("token %d outside the vocabulary: got a result", id)
		}
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	m := testModel(t)
	v := m.Vocab()
	for _, text := range []string{
		"the quick brown fox",
		"i offer you three books and two hats.",
		"Ünïcödé — 日本語 🐺",
		"  leading spaces and\nnewlines\t",
		"",
	} {
		t.Run(text, func(t *testing.T) {
			toks, err := v.Tokenize(text, false, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Detokenize(toks, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if got != text {
				t.Errorf("round trip: got %q, want %q (tokens %v)", got, text, toks)
			}
			var b []byte
			for _, tok := range toks {
				b = v.AppendPiece(b, tok, false)
			}
			if string(b) != text {
				t.Errorf("pieces: got %q, want %q", b, text)
			}
		})
	}
	// Merges make common words shorter than their bytes.
	toks, _ := v.Tokenize(" the", false, false)
	if len(toks) != 1 {
		t.Errorf(`" the": got %d tokens %v, want 1 (merged)`, len(toks), toks)
	}
	// Special tokens parse only with parseSpecial.
	s := "<|im_start|>user"
	toks, _ = v.Tokenize(s, false, true)
	if toks[0] != specialID(t, v, model.IMStart) {
		t.Errorf("parse special: got %v", toks)
	}
	toks, _ = v.Tokenize(s, false, false)
	if len(toks) < 5 {
		t.Errorf("without parse special: got %v, want plain text tokens", toks)
	}
}

func TestChatTemplate(t *testing.T) {
	m := testModel(t)
	tmpl, ok := m.ChatTemplate("")
	if !ok || tmpl != model.ChatTemplate {
		t.Fatalf("chat template: got %q %v", tmpl, ok)
	}
	got, err := ApplyChatTemplate(tmpl, []ChatMessage{{"system", "be brief"}, {"user", "hi"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := ApplyChatTemplate("no template I know", []ChatMessage{{"user", "hi"}}, true); !errors.Is(err, ErrUnknownTemplate) {
		t.Errorf("unknown template: got %v, want ErrUnknownTemplate", err)
	}
}

// logSoftmax returns log p of every token.
func logSoftmax(l []float32) []float64 {
	mx := math.Inf(-1)
	for _, x := range l {
		mx = math.Max(mx, float64(x))
	}
	var s float64
	for _, x := range l {
		s += math.Exp(float64(x) - mx)
	}
	out := make([]float64, len(l))
	for i, x := range l {
		out[i] = float64(x) - mx - math.Log(s)
	}
	return out
}

func newTestLlamaContext(t *testing.T, m *Model, seqs int) *LlamaContext {
	t.Helper()
	o := ContextOptions{}.Defaults()
	o.NCtx, o.NSeqMax, o.NBatch, o.TypeK, o.TypeV = 256*seqs, seqs, 256, KVTypeF32, KVTypeF32
	o.Threads, o.ThreadsBatch = 1, 1 // spin-waiting threads collapse on a shared machine
	c, err := NewLlamaContext(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDecodeMemory checks decode, logits and the memory operations: a
// sequence copied with SeqCp continues exactly like the original, and
// SeqRm + re-decode reproduces the logits.
func TestDecodeMemory(t *testing.T) {
	m := testModel(t)
	c := newTestLlamaContext(t, m, 2)
	if c.NSeqMax() != 2 || c.NCtxSeq() != 256 {
		t.Fatalf("n_seq_max %d, n_ctx_seq %d", c.NSeqMax(), c.NCtxSeq())
	}
	b, err := NewBatch(64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	toks, _ := m.Vocab().Tokenize("the werewolf is among us", false, false)
	for i, tok := range toks {
		if _, err := b.Add(tok, int32(i), 0, i == len(toks)-1); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	l, err := c.Logits(len(toks) - 1)
	if err != nil {
		t.Fatal(err)
	}
	first := append([]float32(nil), l...)
	if _, err := c.Logits(0); err == nil {
		t.Errorf("logits of a token without the flag: got no error")
	}
	mem := c.Memory()
	if got := mem.SeqPosMax(0); got != int32(len(toks)-1) {
		t.Errorf("pos max: got %d, want %d", got, len(toks)-1)
	}
	if err := mem.SeqCp(0, 1, -1, -1); err != nil {
		t.Fatal(err)
	}
	if got := mem.SeqPosMax(1); got != int32(len(toks)-1) {
		t.Errorf("copied pos max: got %d, want %d", got, len(toks)-1)
	}
	// Remove the last token of seq 0 and decode it again.
	if err := mem.SeqRm(0, int32(len(toks)-1), -1); err != nil {
		t.Fatal(err)
	}
	b.Clear()
	b.Add(toks[len(toks)-1], int32(len(toks)-1), 0, true)
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	l, _ = c.Logits(0)
	for i := range l {
		if math.Abs(float64(l[i]-first[i])) > 1e-4 {
			t.Fatalf("logit %d after seq_rm + re-decode: got %v, want %v", i, l[i], first[i])
		}
	}
	// Both sequences continue with the same token: same logits.
	b.Clear()
	b.Add(toks[0], int32(len(toks)), 0, true)
	b.Add(toks[0], int32(len(toks)), 1, true)
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	l0, _ := c.Logits(0)
	l1, _ := c.Logits(1)
	for i := range l0 {
		if math.Abs(float64(l0[i]-l1[i])) > 1e-4 {
			t.Fatalf("logit %d: seq 0 %v, copied seq 1 %v", i, l0[i], l1[i])
		}
	}
	// Ids outside 0..n_seq_max-1 are errors in Go (llama.cpp would abort).
	if err := mem.SeqKeep(2); err == nil {
		t.Errorf("seq_keep(2) with 2 sequences: got no error")
	}
	if err := mem.SeqCp(0, 7, -1, -1); err == nil {
		t.Errorf("seq_cp to 7: got no error")
	}
	// A partial copy between streams would abort inside llama.cpp.
	if err := mem.SeqCp(0, 1, 2, -1); err == nil {
		t.Errorf("partial cross-stream seq_cp: got no error")
	}
	if err := mem.SeqRm(0, -1, -1); err != nil || mem.SeqPosMax(0) != -1 {
		t.Errorf("seq_rm whole sequence: err %v, pos max %d", err, mem.SeqPosMax(0))
	}
	// A position that does not follow the cache is an invalid batch, not a crash.
	b.Clear()
	b.Add(toks[0], 100, 1, true)
	if err := c.Decode(b); !errors.Is(err, ErrInvalidBatch) {
		t.Errorf("gap in positions: got %v, want ErrInvalidBatch", err)
	}
	b.Clear()
	b.Add(toks[0], 0, 5, true)
	if err := c.Decode(b); !errors.Is(err, ErrInvalidBatch) {
		t.Errorf("seq id ≥ n_seq_max: got %v, want ErrInvalidBatch", err)
	}
}

// TestUnifiedSeqKeep: with one KV stream shared by all sequences,
// seq_keep drops every other sequence's cells.
func TestUnifiedSeqKeep(t *testing.T) {
	m := testModel(t)
	o := ContextOptions{}.Defaults()
	o.NCtx, o.NSeqMax, o.NBatch, o.KVUnified = 256, 2, 64, true
	o.Threads, o.ThreadsBatch = 1, 1
	c, err := NewLlamaContext(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := NewBatch(16, 2)
	defer b.Close()
	toks, _ := m.Vocab().Tokenize("the deal", false, false)
	for i, tok := range toks {
		// Shared prompt: each token belongs to both sequences.
		if _, err := b.AddSeqs(tok, int32(i), []int32{0, 1}, i == len(toks)-1); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	mem := c.Memory()
	for seq := range int32(2) {
		if got := mem.SeqPosMax(seq); got != int32(len(toks)-1) {
			t.Errorf("seq %d pos max %d, want %d", seq, got, len(toks)-1)
		}
	}
	if err := mem.SeqKeep(1); err != nil {
		t.Fatal(err)
	}
	if got := mem.SeqPosMax(0); got != -1 {
		t.Errorf("after seq_keep(1): seq 0 pos max %d, want -1", got)
	}
	if got := mem.SeqPosMax(1); got != int32(len(toks)-1) {
		t.Errorf("after seq_keep(1): seq 1 pos max %d, want %d", got, len(toks)-1)
	}
}

func TestSamplers(t *testing.T) {
	m := testModel(t)
	c := newTestLlamaContext(t, m, 1)
	b, _ := NewBatch(16, 1)
	defer b.Close()
	toks, _ := m.Vocab().Tokenize("the deal", false, false)
	for i, tok := range toks {
		b.Add(tok, int32(i), 0, i == len(toks)-1)
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	logits, _ := c.Logits(-1)
	argmax := 0
	for i, l := range logits {
		if l > logits[argmax] {
			argmax = i
		}
	}
	t.Run("greedy", func(t *testing.T) {
		g := NewGreedySampler()
		defer g.Close()
		if got := g.Sample(c, -1); got != int32(argmax) {
			t.Errorf("got %d, want argmax %d", got, argmax)
		}
	})
	t.Run("seeded dist", func(t *testing.T) {
		draw := func(seed uint32) []int32 {
			s := NewDistSampler(seed)
			defer s.Close()
			var out []int32
			for range 20 {
				out = append(out, s.Sample(c, -1))
			}
			return out
		}
		a, b2, other := draw(7), draw(7), draw(8)
		if !equal(a, b2) {
			t.Errorf("same seed: %v vs %v", a, b2)
		}
		if equal(a, other) {
			t.Errorf("different seeds gave the same 20 draws %v", a)
		}
	})
	t.Run("chain top-k", func(t *testing.T) {
		ch, _ := NewSamplerChain()
		defer ch.Close()
		ch.Add(NewTopKSampler(3))
		ch.Add(NewTempSampler(0.7))
		if ch.Len() != 2 {
			t.Fatalf("chain length %d", ch.Len())
		}
		cand := NewCandidates(len(logits))
		cand.Fill(logits)
		cand.Apply(ch)
		d := cand.Data()
		if len(d) != 3 {
			t.Fatalf("top-k 3 left %d candidates", len(d))
		}
		for _, td := range d {
			if math.Abs(float64(td.Logit-logits[td.ID]/0.7)) > 1e-4 {
				t.Errorf("token %d: logit %v, want %v", td.ID, td.Logit, logits[td.ID]/0.7)
			}
		}
	})
	t.Run("grammar", func(t *testing.T) {
		for _, bad := range []string{"root ::= (", `other ::= "a"`, `root ::= undefined`, `root ::= root "a"`, ""} {
			if _, err := NewGrammarSampler(m.Vocab(), bad, "root"); !errors.Is(err, ErrGrammar) {
				t.Errorf("grammar %q: got %v, want ErrGrammar", bad, err)
			}
		}
		g, err := NewGrammarSampler(m.Vocab(), `root ::= "yes" | "no"`, "root")
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		cand := NewCandidates(len(logits))
		cand.Fill(logits)
		cand.Apply(g)
		for _, td := range cand.Data() {
			p := m.Vocab().Piece(td.ID, false)
			ok := !math.IsInf(float64(td.Logit), -1)
			allowed := p != "" && (strings.HasPrefix("yes", p) || strings.HasPrefix("no", p))
			if ok != allowed {
				t.Errorf("token %d %q: allowed %v, want %v", td.ID, p, ok, allowed)
			}
		}
	})
}

func equal(a, b []int32) bool {
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

func TestAdapterRoundTrip(t *testing.T) {
	m := testModel(t)
	c := newTestLlamaContext(t, m, 1)
	lp := filepath.Join(t.TempDir(), "lora.gguf")
	l, err := llamatest.RandomLoRA(tinyConfig(t), 4, 8, 0.2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteLoRA(lp, l); err != nil {
		t.Fatal(err)
	}
	a, err := LoadAdapter(m, lp)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got, ok := a.Meta("adapter.type"); !ok || got != "lora" {
		t.Errorf("adapter.type: got %q %v", got, ok)
	}
	b, _ := NewBatch(16, 1)
	defer b.Close()
	toks, _ := m.Vocab().Tokenize("the deal", false, false)
	logits := func() []float32 {
		c.Memory().Clear(true)
		b.Clear()
		for i, tok := range toks {
			b.Add(tok, int32(i), 0, i == len(toks)-1)
		}
		if err := c.Decode(b); err != nil {
			t.Fatal(err)
		}
		l, _ := c.Logits(-1)
		return append([]float32(nil), l...)
	}
	maxDiff := func(x, y []float32) float64 {
		d := 0.0
		for i := range x {
			d = math.Max(d, math.Abs(float64(x[i]-y[i])))
		}
		return d
	}
	base := logits()
	if err := c.SetAdapters([]*Adapter{a}, []float32{1}); err != nil {
		t.Fatal(err)
	}
	adapted := logits()
	if d := maxDiff(base, adapted); d < 1e-3 {
		t.Errorf("adapter changed the logits by only %g", d)
	}
	if err := c.SetAdapters(nil, nil); err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(base, logits()); d > 1e-5 {
		t.Errorf("after removing the adapter the logits differ from the base by %g", d)
	}
	// A model file is not an adapter.
	if _, err := LoadAdapter(m, tinyPath); err == nil {
		t.Errorf("loading the model as an adapter: got no error")
	}
}

// TestTokenizeInvalidUTF8 feeds bytes a grammar-constrained model can emit
// (a negated character class admits stray continuation bytes). llama.cpp's
// byte-level BPE aborts the process on them; Tokenize must not.
func TestTokenizeInvalidUTF8(t *testing.T) {
	v := testModel(t).Vocab()
	for _, text := range []string{"\xfa\x96\xa2\xa0", "ok \xff then", "trailing \xe2\x82", "\xc0\xaf"} {
		toks, err := v.Tokenize(text, false, false)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		got, err := v.Detokenize(toks, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.ToValidUTF8(text, "\uFFFD"); got != want {
			t.Errorf("%q: got %q, want %q", text, got, want)
		}
	}
}
