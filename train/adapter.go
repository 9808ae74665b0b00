package train

import (
	"fmt"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// SaveAdapter writes the LoRA adapter as a GGUF that llama.cpp's
// llama_adapter_lora_init loads: general.type=adapter, adapter.type=lora,
// adapter.lora.alpha, and per adapted matrix blk.N.<module>.weight.lora_a
// [n_in, r] and .lora_b [r, n_out]. llama.cpp scales B·A·x by alpha/r, as the
// training graph does, so the adapted logits match. The file is written
// atomically.
func (t *Trainer) SaveAdapter(path string) error {
	w := gguf.NewWriter()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: t.hp.arch},
		{Key: "general.type", Value: "adapter"},
		{Key: "general.name", Value: "omar-lora"},
		{Key: "adapter.type", Value: "lora"},
		{Key: "adapter.lora.alpha", Value: t.opts.LoRAAlpha},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	for _, l := range t.loras {
		for _, p := range []int{l.pa, l.pb} {
			name, shape, data := t.paramData(p)
			if err := w.AddTensor(name, shape, gguf.F32, data); err != nil {
				return fmt.Errorf("train: %w", err)
			}
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("train: save adapter: %w", err)
	}
	return nil
}

// paramData copies parameter p out of the backend with its ggml shape.
func (t *Trainer) paramData(p int) (string, []uint64, []float32) {
	pr := t.params[p]
	data := make([]float32, pr.n)
	llamacpp.GetF32(pr.t, data)
	shape := []uint64{uint64(pr.t.Ne[0]), uint64(pr.t.Ne[1])}
	return pr.name, shape, data
}
