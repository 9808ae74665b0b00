package train

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/model"
)

// TestGraphSizeLongSequences: the training graph of a sequence as long as
// the model's context (a Werewolf transcript runs to ~4,000 tokens) fits
// its node capacity on the built-in model's shape, for every architecture
// — the causal attention blocks add nodes per block, and a graph past its
// capacity aborts in ggml — and a step on such a sequence runs.
func TestGraphSizeLongSequences(t *testing.T) {
	testLib(t)
	dir := t.TempDir()
	for _, arch := range model.Architectures {
		t.Run(arch, func(t *testing.T) {
			p := filepath.Join(dir, arch+".gguf")
			if err := model.WriteFile(p, model.Options{Arch: arch, Preset: "base", Seed: 3}); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(p)
			o := testOptions()
			o.BatchTokens = 8192
			tr, err := New(p, o)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			T := bucket(tr.hp.nCtx - 31)
			for _, kind := range []graphKind{kindBase, kindPolicy, kindTrain} {
				b, err := tr.build(graphKey{kind: kind, obj: tr.ppo, b: 1, t: T, k: 256})
				if err != nil {
					t.Fatal(err)
				}
				if n := b.g.NNodes(); 4*n > 3*b.size {
					t.Errorf("graph kind %d, T %d, %d blocks: %d nodes of capacity %d, want at most 3/4", kind, T, len(b.blocks), n, b.size)
				}
				b.free()
			}
			if arch != "llama" {
				return // one step is enough to run the regrown scheduler
			}
			seqs := randomSeqs(5, 1, tr.hp.nCtx-200, tr.hp.nCtx-100, tr.Vocab())
			if _, err := tr.Step(context.Background(), seqs); err != nil {
				t.Fatal(err)
			}
		})
	}
}
