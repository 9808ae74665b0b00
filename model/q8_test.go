package model

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TestQuantizeQ8MatchesGGML: the Go Q8_0 encoder writes the same bytes as
// ggml's own quantizer (ggml_quantize_chunk), on weights drawn as
// Generate draws them plus edge cases (an all-zero block, a block of one
// large value, halves that round away from zero).
func TestQuantizeQ8MatchesGGML(t *testing.T) {
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
	const row = 256
	data := make([]float32, 64*row)
	for i := range data {
		data[i] = float32(math.Sin(float64(i)*0.37)*0.05 + math.Cos(float64(i*i%977))*0.01)
	}
	for i := 0; i < 32; i++ {
		data[i] = 0 // an all-zero block
	}
	data[40] = 3 // one large value in a block
	for i := 64; i < 96; i++ {
		data[i] = float32(i-64) * 127 / 31 / 2 // values at exact halves of the scale
	}
	want, err := llamacpp.Quantize(llamacpp.Type(8), data, row) // GGML_TYPE_Q8_0
	if err != nil {
		t.Fatal(err)
	}
	if got := quantizeQ8(data); !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("byte %d (block %d): got %#02x, want %#02x", i, i/34, got[i], want[i])
			}
		}
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}
