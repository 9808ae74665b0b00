package train

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TestSaveAdapterBytes pins the exact bytes SaveAdapter writes for a fixed
// trainer state: self-play resume reloads adapters and relies on the same
// state giving the same file. The hashes were recorded before SaveAdapter
// moved onto the shared LoRA writer (gguf.WriteLoRA) and must not change
// unless the file layout is changed on purpose (then print the new sums
// with -v and replace them here).
func TestSaveAdapterBytes(t *testing.T) {
	tests := []struct {
		name, arch string
		opts       func(*Options)
		want       string
	}{
		{"llama_all_modules", "llama", func(o *Options) {}, "37882a62b6ed880b7dd99fde51ba4f8e061276d7ebca6671ef3ce7e6b213709a"},
		{"qwen3_two_modules", "qwen3", func(o *Options) {
			o.LoRARank, o.LoRAAlpha = 3, 2.5
			o.LoRAModules = []string{"ffn_down", "attn_q"}
		}, "7a2b76c69908d82a6eb8e392970c2f580fe58612d32b03f0a0ea86f7d8c4877b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			tt.opts(&o)
			tr := newTrainer(t, tt.arch, o)
			// Fill every adapter matrix (A and B) from a fixed stream so the
			// file depends only on the shapes, the order and the writer.
			r := rand.New(rand.NewPCG(11, 12))
			for _, l := range tr.loras {
				for _, p := range []int{l.pa, l.pb} {
					d := make([]float32, tr.params[p].n)
					for i := range d {
						d[i] = float32(r.NormFloat64() * 0.1)
					}
					llamacpp.SetF32(tr.params[p].t, d)
				}
			}
			path := filepath.Join(t.TempDir(), "adapter.gguf")
			if err := tr.SaveAdapter(path); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			got := hex.EncodeToString(sum[:])
			t.Logf("%s: %d bytes, sha256 %s", tt.name, len(b), got)
			if got != tt.want {
				t.Errorf("adapter sha256: got %s, want %s", got, tt.want)
			}
		})
	}
}
