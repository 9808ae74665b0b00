package model

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// openGGUF opens a written file and closes it when the test ends.
func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func generateBytes(t testing.TB, opts Options) []byte {
	t.Helper()
	w, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readBytes(t testing.TB, data []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGenerateArchitectures(t *testing.T) {
	tests := []struct {
		arch       string
		wantTensor []string
		wantAbsent []string
	}{
		{"llama", []string{"output.weight", "blk.1.ffn_down.weight"}, []string{"blk.0.attn_q.bias", "blk.0.attn_q_norm.weight"}},
		{"qwen2", []string{"blk.0.attn_q.bias", "blk.1.attn_k.bias", "blk.1.attn_v.bias"}, []string{"output.weight", "blk.0.attn_q_norm.weight"}},
		{"qwen3", []string{"blk.0.attn_q_norm.weight", "blk.1.attn_k_norm.weight"}, []string{"output.weight", "blk.0.attn_q.bias"}},
	}
	for _, tt := range tests {
		t.Run(tt.arch, func(t *testing.T) {
			f := readBytes(t, generateBytes(t, Options{Arch: tt.arch, Preset: "tiny", Seed: 7}))
			if got, _ := f.String("general.architecture"); got != tt.arch {
				t.Errorf("architecture: got %q, want %q", got, tt.arch)
			}
			c, _ := PresetConfig(tt.arch, "tiny")
			for key, want := range map[string]uint64{
				"context_length": uint64(c.ContextLength), "embedding_length": 64, "block_count": 2,
				"feed_forward_length": 128, "attention.head_count": 4, "attention.head_count_kv": 2,
				"attention.key_length": 16, "attention.value_length": 16, "rope.dimension_count": 16,
			} {
				if got, err := f.Uint(tt.arch + "." + key); err != nil || got != want {
					t.Errorf("%s: got %d (%v), want %d", key, got, err, want)
				}
			}
			for _, key := range []string{"attention.layer_norm_rms_epsilon", "rope.freq_base"} {
				if _, err := f.Float(tt.arch + "." + key); err != nil {
					t.Errorf("%s: %v", key, err)
				}
			}
			for _, name := range tt.wantTensor {
				if _, ok := f.Tensor(name); !ok {
					t.Errorf("missing tensor %s", name)
				}
			}
			for _, name := range tt.wantAbsent {
				if _, ok := f.Tensor(name); ok {
					t.Errorf("unexpected tensor %s", name)
				}
			}
			emb, _ := f.Tensor("token_embd.weight")
			if want := []uint64{64, 512}; !slices.Equal(emb.Shape, want) {
				t.Errorf("token_embd shape: got %v, want %v", emb.Shape, want)
			}
			k, _ := f.Tensor("blk.0.attn_k.weight")
			if want := []uint64{64, 32}; !slices.Equal(k.Shape, want) {
				t.Errorf("attn_k shape: got %v, want %v (GQA: 2 KV heads of 16)", k.Shape, want)
			}
			var sum uint64
			for _, ti := range f.Tensors {
				sum += ti.Elements()
			}
			if got := uint64(c.Params()); got != sum {
				t.Errorf("Params: got %d, tensors hold %d", got, sum)
			}
			tok, err := TokenizerFromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if tok.VocabSize() != 512 || tok.EOS != tok.ID(IMEnd) || !tok.IsControl(tok.ID(IMStart)) {
				t.Errorf("tokenizer: vocab %d, eos %d, im_start control %v", tok.VocabSize(), tok.EOS, tok.IsControl(tok.ID(IMStart)))
			}
			if tmpl, _ := f.String("tokenizer.chat_template"); !strings.Contains(tmpl, "<|im_start|>") {
				t.Errorf("chat template %q lacks <|im_start|>", tmpl)
			}
		})
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a := generateBytes(t, Options{Arch: "qwen3", Seed: 3})
	b := generateBytes(t, Options{Arch: "qwen3", Seed: 3})
	c := generateBytes(t, Options{Arch: "qwen3", Seed: 4})
	if !bytes.Equal(a, b) {
		t.Error("same seed gave different files")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds gave the same file")
	}
}

// TestWeightScale checks the initialisation: matrices have the intended
// spread (so logits are not all ~0) and norms start at 1.
func TestWeightScale(t *testing.T) {
	f := readBytes(t, generateBytes(t, Options{Arch: "llama", Seed: 1}))
	tests := []struct {
		name     string
		min, max float64 // bounds on the standard deviation
	}{
		{"output.weight", 0.2, 0.3},           // 2/sqrt(64)
		{"blk.0.attn_q.weight", 0.1, 0.15},    // 1/sqrt(64)
		{"blk.0.ffn_down.weight", 0.24, 0.29}, // 3/sqrt(128)
		{"blk.0.attn_norm.weight", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := f.TensorFloat32(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			var s, s2 float64
			for _, x := range v {
				s += float64(x)
				s2 += float64(x) * float64(x)
			}
			mean := s / float64(len(v))
			std := s2/float64(len(v)) - mean*mean
			std = math.Sqrt(max(std, 0))
			if std < tt.min || std > tt.max {
				t.Errorf("std: got %.4f, want in [%g, %g]", std, tt.min, tt.max)
			}
			if tt.max == 0 && mean != 1 {
				t.Errorf("norm weights: got mean %v, want 1", mean)
			}
		})
	}
}

func TestPresetSizes(t *testing.T) {
	tests := []struct {
		preset   string
		min, max int64
	}{
		{"tiny", 100_000, 150_000},
		{"base", 1_000_000, 1_100_000},
		{"deep", 1_700_000, 1_900_000}, // base with twice the layers
		{"small", 10_000_000, 100_000_000},
	}
	for _, tt := range tests {
		for _, arch := range Architectures {
			c, err := PresetConfig(arch, tt.preset)
			if err != nil {
				t.Fatal(err)
			}
			if arch == "llama" || tt.preset == "small" {
				if p := c.Params(); p < tt.min || p > tt.max {
					t.Errorf("%s %s: got %d params, want %d..%d", arch, tt.preset, p, tt.min, tt.max)
				}
			}
		}
	}
	if len(tests) != len(Presets) {
		t.Errorf("%d presets tested, %d exist", len(tests), len(Presets))
	}
}

func TestOptionsErrors(t *testing.T) {
	tests := []Options{
		{Arch: "gpt5"}, {Preset: "huge"}, {ContextLength: -1}, {Type: gguf.Q4_0}, {Layers: -1}, {Layers: 3},
		{Shape: "qwen3-0.6b"}, {Shape: "qwen3-0.6b", Arch: "qwen3", Tokenizer: &HFTokenizer{}},
		{Shape: "gemma3-1b", Tokenizer: &HFTokenizer{}}, {Merges: []string{"a b"}, Tokenizer: &HFTokenizer{}},
	}
	for _, o := range tests {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			if _, err := Generate(o); err == nil {
				t.Error("got nil error, want one")
			}
		})
	}
}

func TestF16AndContext(t *testing.T) {
	f := readBytes(t, generateBytes(t, Options{Type: gguf.F16, ContextLength: 1024}))
	q, _ := f.Tensor("blk.0.attn_q.weight")
	n, _ := f.Tensor("blk.0.attn_norm.weight")
	if q.Type != gguf.F16 || n.Type != gguf.F32 {
		t.Errorf("types: got matrix %v, norm %v; want F16, F32", q.Type, n.Type)
	}
	if ctx, _ := f.Uint("llama.context_length"); ctx != 1024 {
		t.Errorf("context length: got %d, want 1024", ctx)
	}
	if ft, _ := f.Uint("general.file_type"); ft != 1 {
		t.Errorf("file type: got %d, want 1", ft)
	}
}

func TestWriteFileInspect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteFile(path, Options{Arch: "qwen2", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := Inspect(f)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := PresetConfig("qwen2", "tiny")
	want := Info{Arch: "qwen2", Name: "omar-tiny-qwen2", Type: "model", FileSize: f.Size, Params: uint64(c.Params()),
		TensorCount: len(f.Tensors), BlockCount: 2, ContextLength: 4096, EmbeddingSize: 64, FeedForward: 128,
		HeadCount: 4, HeadCountKV: 2, VocabSize: 512, TokenizerModel: "gpt2", PreTokenizer: "gpt-2",
		ChatTemplate: ChatTemplate, TiedEmbeddings: true,
		TensorTypes: []TypeCount{{gguf.F32, len(f.Tensors), uint64(c.Params())}}}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("Inspect:\ngot  %+v\nwant %+v", in, want)
	}
}

// TestGolden pins the bytes of the tiny models and the small vocabulary:
// a change to the corpus, the BPE trainer or the initialisation shows up
// here. Regenerate with go test ./model -run Golden -update.
func TestGolden(t *testing.T) {
	var b strings.Builder
	for _, arch := range Architectures {
		fmt.Fprintf(&b, "tiny %s seed 1: %x\n", arch, sha256.Sum256(generateBytes(t, Options{Arch: arch, Seed: 1})))
	}
	_, _, merges, err := Vocabulary(4096)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "small merges: %d %x\n", len(merges), sha256.Sum256([]byte(strings.Join(merges, "\n"))))
	golden := filepath.Join("testdata", "golden.txt")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func BenchmarkGenerateSmall(b *testing.B) {
	for b.Loop() {
		if _, err := Generate(Options{Preset: "small", Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestConfigFromGGUF(t *testing.T) {
	for _, arch := range Architectures {
		t.Run(arch, func(t *testing.T) {
			f := readBytes(t, generateBytes(t, Options{Arch: arch, Seed: 2, ContextLength: 2048}))
			got, err := ConfigFromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := PresetConfig(arch, "tiny")
			want.ContextLength = 2048
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	for _, tt := range []struct{ name, arch string }{{"unsupported architecture", "gpt2"}, {"missing keys", "llama"}} {
		w := gguf.NewWriter()
		w.Set("general.architecture", tt.arch)
		var buf bytes.Buffer
		w.WriteTo(&buf)
		if _, err := ConfigFromGGUF(readBytes(t, buf.Bytes())); err == nil {
			t.Errorf("%s: got nil error", tt.name)
		}
	}
}

// TestWriteTempAndSummary: a temporary model is written, described and
// removed with its directory.
func TestWriteTempAndSummary(t *testing.T) {
	o := Options{Preset: "tiny", Seed: 3}.Defaults()
	path, remove, err := WriteTemp(o, "tiny.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	c, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	got := o.Summary(c, "")
	for _, want := range []string{"llama tiny, ", " parameters, F32 weights, vocabulary ", "generated tokenizer", "seed 3"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	remove()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("the directory is still there: %v", err)
	}
}

func TestParseType(t *testing.T) {
	for name, want := range map[string]gguf.TensorType{"f32": gguf.F32, "F16": gguf.F16, "q8_0": gguf.Q8_0} {
		if got, err := ParseType(name); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ParseType("q4_0"); err == nil {
		t.Error("q4_0 parsed")
	}
}
