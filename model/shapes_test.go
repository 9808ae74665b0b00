package model

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
)

// TestShapesMatchPublishedCounts: each real shape has the parameter count
// its model card publishes (Llama's rope_freqs factors, a tensor of
// head_dim/2 values that the converter adds, are not parameters there).
func TestShapesMatchPublishedCounts(t *testing.T) {
	for _, tc := range []struct {
		shape string
		want  int64
	}{
		{"qwen3-0.6b", 596_049_920},
		{"qwen3-1.7b", 1_720_574_976},
		{"qwen3-4b", 4_022_468_096},
		{"qwen3-8b", 8_190_735_360},
		{"llama3.2-1b", 1_235_814_400},
		{"llama3.2-3b", 3_212_749_824},
		{"llama3.1-8b", 8_030_261_248},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			s, err := FindShape(tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			c := s.Config()
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			got := c.Params()
			if c.RopeScaling.Factor > 0 {
				got -= int64(c.HeadDim / 2)
			}
			if got != tc.want {
				t.Errorf("got %d parameters, want %d", got, tc.want)
			}
		})
	}
}

func TestFindShapeRefuses(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"gemma3-1b", "architecture gemma3 is not supported"},
		{"qwen9-1b", `unknown shape "qwen9-1b"`},
	} {
		if _, err := FindShape(tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FindShape(%q): got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestLlama3RopeFactors: the factors of Llama 3.2's scaling (factor 32,
// original context 8192, theta 5e5, head_dim 64) keep the highest
// frequencies, divide the lowest by 32 and interpolate between.
func TestLlama3RopeFactors(t *testing.T) {
	f := Llama3RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}.Factors(64, 500000)
	if len(f) != 32 || f[0] != 1 || f[31] != 32 {
		t.Fatalf("got %v, want 32 factors from 1 to 32", f)
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factors not increasing at %d: %v", i, f)
		}
	}
}

func TestQuantizeQ8(t *testing.T) {
	data := make([]float32, 64)
	for i := range data {
		data[i] = float32(math.Sin(float64(i))) * float32(i%7)
	}
	b := quantizeQ8(data)
	if len(b) != 2*34 {
		t.Fatalf("got %d bytes, want 68", len(b))
	}
	for blk := 0; blk < 2; blk++ {
		d := gguf.Float16ToFloat32(uint16(b[blk*34]) | uint16(b[blk*34+1])<<8)
		for j := 0; j < 32; j++ {
			x := data[blk*32+j]
			got := d * float32(int8(b[blk*34+2+j]))
			if diff := math.Abs(float64(got - x)); diff > float64(d)*0.51+1e-3 {
				t.Errorf("block %d weight %d: got %g, want %g (scale %g)", blk, j, got, x, d)
			}
		}
	}
}

// A tokenizer.json in the shape of Qwen's, small enough to read.
const testTokenizerJSON = `{
 "added_tokens": [
  {"id": 262, "content": "<|endoftext|>", "special": true, "normalized": false},
  {"id": 263, "content": "<|im_start|>", "special": true, "normalized": false},
  {"id": 264, "content": "<|im_end|>", "special": true, "normalized": false},
  {"id": 265, "content": "<think>", "special": false, "normalized": false}
 ],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
 "post_processor": {"type": "ByteLevel"},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "byte_fallback": false, "vocab": VOCAB, "merges": [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["a b", "c"]]}
}`

const testTokenizerConfig = `{"add_bos_token": false, "bos_token": null, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
 "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}`

func testVocabJSON() string {
	var b strings.Builder
	b.WriteString("{")
	for i, s := range BPEVocab(nil) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `":` + strconv.Itoa(i))
	}
	for i, s := range []string{"Ġt", "he", "Ġthe", "abc", "x", "y"} {
		b.WriteString(`,"` + s + `":` + strconv.Itoa(256+i))
	}
	b.WriteString("}")
	return b.String()
}

func TestParseHFTokenizer(t *testing.T) {
	tj := strings.Replace(testTokenizerJSON, "VOCAB", testVocabJSON(), 1)
	tok, err := ParseHFTokenizer([]byte(tj), []byte(testTokenizerConfig))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Pre != "qwen2" {
		t.Errorf("pre: got %q, want qwen2", tok.Pre)
	}
	if got, want := tok.Merges[3], "aĠb c"; got != want {
		t.Errorf("merge with a space: got %q, want %q", got, want)
	}
	if tok.Size() != 266 || tok.Types[263] != TokenControl || tok.Types[265] != TokenUserDefined || tok.Types[100] != TokenNormal {
		t.Errorf("size %d, types of 263, 265, 100: %d %d %d; want 266, control, user-defined, normal", tok.Size(), tok.Types[263], tok.Types[265], tok.Types[100])
	}
	if tok.BOS != -1 || tok.EOS != 264 || tok.EOT != 264 || tok.PAD != 262 {
		t.Errorf("bos %d eos %d eot %d pad %d, want -1 264 264 262", tok.BOS, tok.EOS, tok.EOT, tok.PAD)
	}
	if tok.AddBOS == nil || *tok.AddBOS || tok.AddEOS != nil {
		t.Errorf("add_bos %v add_eos %v, want false and unset", tok.AddBOS, tok.AddEOS)
	}
	// The template is written verbatim, and the vocabulary padded to the
	// shape's rows with unused tokens.
	w, err := Generate(Options{Arch: "qwen3", Preset: "tiny", Tokenizer: tok, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.String("tokenizer.chat_template"); got != "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" {
		t.Errorf("chat template: got %q", got)
	}
	if toks, _ := f.Strings("tokenizer.ggml.tokens"); len(toks) != 266 || toks[263] != "<|im_start|>" {
		t.Errorf("tokens: %d, [263] = %q", len(toks), toks[263])
	}
	tw := gguf.NewWriter()
	if err := tok.write(tw, 300); err != nil {
		t.Fatal(err)
	}
	for _, kv := range tw.Metadata() {
		if kv.Key == "tokenizer.ggml.tokens" {
			toks := kv.Value.([]string)
			if len(toks) != 300 || toks[299] != "[PAD299]" {
				t.Errorf("padded tokens: %d, last %q", len(toks), toks[len(toks)-1])
			}
		}
	}
}

func TestParseHFTokenizerRefuses(t *testing.T) {
	base := strings.Replace(testTokenizerJSON, "VOCAB", testVocabJSON(), 1)
	for _, tc := range []struct{ name, from, to, want string }{
		{"spm", `"byte_fallback": false`, `"byte_fallback": true`, "byte_fallback"},
		{"unknown regex", `\\p{N}| ?`, `\\p{N}{1,4}| ?`, "not one llama.cpp is known to implement"},
		{"wordpiece", `"type": "BPE"`, `"type": "WordPiece"`, `model type "WordPiece"`},
		{"normalizer", `{"type": "NFC"}`, `{"type": "Lowercase"}`, `normalizer "Lowercase"`},
		{"decoder", `"decoder": {"type": "ByteLevel"}`, `"decoder": {"type": "Metaspace"}`, "not ByteLevel"},
		{"duplicate text", `"content": "<think>"`, `"content": "<|im_end|>"`, "both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := strings.Replace(base, tc.from, tc.to, 1)
			if tj == base {
				t.Fatalf("test case does not change the input")
			}
			_, err := ParseHFTokenizer([]byte(tj), []byte(testTokenizerConfig))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParseHFTokenizer: any input is a tokenizer or an error, never a panic.
func FuzzParseHFTokenizer(f *testing.F) {
	f.Add([]byte(strings.Replace(testTokenizerJSON, "VOCAB", `{"a": 0}`, 1)), []byte(testTokenizerConfig))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 5}, "merges": []}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, tj, cfg []byte) {
		if tok, err := ParseHFTokenizer(tj, cfg); err == nil {
			_ = tok.write(gguf.NewWriter(), tok.Size())
		}
	})
}

// TestStandInDeterministic: a shape with an imported tokenizer gives the
// same bytes for the same options, its vocabulary padded to the shape's
// rows, and another seed changes the weights only.
func TestStandInDeterministic(t *testing.T) {
	tj := strings.Replace(testTokenizerJSON, "VOCAB", testVocabJSON(), 1)
	tok, err := ParseHFTokenizer([]byte(tj), []byte(testTokenizerConfig))
	if err != nil {
		t.Fatal(err)
	}
	gen := func(seed uint64) []byte {
		w, err := Generate(Options{Shape: "qwen3-tiny", Tokenizer: tok, Seed: seed, Type: gguf.Q8_0})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b, c := gen(1), gen(1), gen(2)
	if !bytes.Equal(a, b) {
		t.Fatal("same options, different bytes")
	}
	if bytes.Equal(a, c) || len(a) != len(c) {
		t.Errorf("seeds 1 and 2: equal %v, sizes %d and %d; want different weights of one size", bytes.Equal(a, c), len(a), len(c))
	}
	f, err := gguf.Read(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	bos, _ := f.Uint("tokenizer.ggml.bos_token_id")
	if len(toks) != 151936 || toks[151935] != "[PAD151935]" || toks[bos] != "<|endoftext|>" {
		t.Errorf("tokens: %d, last %q, bos %q; want 151936, [PAD151935], <|endoftext|> (config.json's)", len(toks), toks[len(toks)-1], toks[bos])
	}
	if emb, ok := f.Tensor("token_embd.weight"); !ok || emb.Type != gguf.Q8_0 || emb.Shape[1] != 151936 {
		t.Errorf("token_embd: %+v", emb)
	}
}
