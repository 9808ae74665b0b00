package llamacpp

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/model"
)

// TestGGUFReader reads the tiny test model's header through ggml's parser
// and checks metadata, the tensor directory and that Offset/Size locate the
// tensor's bytes in the file.
func TestGGUFReader(t *testing.T) {
	testLib(t)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	cfg := tinyConfig(t)
	if err := model.WriteFile(path, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := f.String("general.architecture"); err != nil || got != "llama" {
		t.Errorf("architecture: got %q (%v), want llama", got, err)
	}
	if got, err := f.Int("llama.block_count"); err != nil || got != int64(cfg.BlockCount) {
		t.Errorf("block_count: got %d (%v), want %d", got, err, cfg.BlockCount)
	}
	if got, err := f.Float("llama.rope.freq_base"); err != nil || got != 10000 {
		t.Errorf("rope.freq_base: got %g (%v), want 10000", got, err)
	}
	if n, err := f.ArrayLen("tokenizer.ggml.tokens"); err != nil || n < 256 {
		t.Errorf("tokens: got %d (%v), want ≥ 256", n, err)
	}
	if _, err := f.Int("general.architecture"); err == nil {
		t.Error("Int of a string key: got no error")
	}
	if f.Has("no.such.key") {
		t.Error("Has(no.such.key) = true")
	}
	ts, err := f.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 + 9*cfg.BlockCount; len(ts) != want {
		t.Fatalf("got %d tensors, want %d", len(ts), want)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range ts {
		if ti.Name != "output_norm.weight" {
			continue
		}
		if ti.Type != TypeF32 || ti.Ne[0] != int64(cfg.EmbeddingLength) || ti.Size != int64(4*cfg.EmbeddingLength) {
			t.Errorf("output_norm: got %+v", ti)
		}
		// RMS norm weights are written as ones.
		if v := math.Float32frombits(binary.LittleEndian.Uint32(raw[ti.Offset:])); v != 1 {
			t.Errorf("output_norm[0] at offset %d: got %g, want 1", ti.Offset, v)
		}
	}
	if _, err := OpenGGUF(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("OpenGGUF of a missing file: got no error")
	}
}
