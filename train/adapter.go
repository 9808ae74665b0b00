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

// LoadAdapter initialises the adapter from a LoRA GGUF written by
// SaveAdapter (or another llama.cpp LoRA of the same model), e.g. to start
// PPO from an `omar sft` warm-up. Its matrices must have this trainer's rank
// and shapes and adapt only modules this trainer adapts (modules it lacks
// keep their fresh initialisation, which leaves them inactive); a different
// alpha is absorbed by rescaling B. The value head and the optimizer state
// are not touched. Nothing changes when the file does not fit.
func (t *Trainer) LoadAdapter(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("train: load adapter: %w", err)
	}
	defer f.Close()
	for _, kv := range [][2]string{{"general.type", "adapter"}, {"adapter.type", "lora"}, {"general.architecture", t.hp.arch}} {
		if got, err := f.String(kv[0]); err != nil || got != kv[1] {
			return fmt.Errorf("train: load adapter %s: %s is %q, want %q", path, kv[0], got, kv[1])
		}
	}
	alpha, err := f.Float("adapter.lora.alpha")
	if err != nil || alpha <= 0 {
		return fmt.Errorf("train: load adapter %s: no positive adapter.lora.alpha", path)
	}
	byName := map[string]int{}
	for _, l := range t.loras {
		byName[t.params[l.pa].name] = l.pa
		byName[t.params[l.pb].name] = l.pb
	}
	values := map[int][]float32{}
	for _, ti := range f.Tensors {
		p, ok := byName[ti.Name]
		if !ok {
			return fmt.Errorf("train: load adapter %s: tensor %s is not adapted by this trainer (modules %v, rank %d)", path, ti.Name, t.moduleList(), t.opts.LoRARank)
		}
		want := []uint64{uint64(t.params[p].t.Ne[0]), uint64(t.params[p].t.Ne[1])}
		if len(ti.Shape) != 2 || ti.Shape[0] != want[0] || ti.Shape[1] != want[1] {
			return fmt.Errorf("train: load adapter %s: tensor %s has shape %v, want %v (rank %d)", path, ti.Name, ti.Shape, want, t.opts.LoRARank)
		}
		d, err := f.TensorFloat32(ti.Name)
		if err != nil {
			return fmt.Errorf("train: load adapter %s: %w", path, err)
		}
		values[p] = d
	}
	// The adapter adds (alpha/r)·B·A·x: keep the product when alphas differ.
	scale := float32(alpha) / t.opts.LoRAAlpha
	for _, l := range t.loras {
		_, hasA := values[l.pa]
		_, hasB := values[l.pb]
		if hasA != hasB {
			return fmt.Errorf("train: load adapter %s: %s has only one of lora_a, lora_b", path, t.params[l.pa].name)
		}
		if hasB && scale != 1 {
			for i := range values[l.pb] {
				values[l.pb][i] *= scale
			}
		}
	}
	for _, l := range t.loras {
		for _, p := range []int{l.pa, l.pb} {
			if d, ok := values[p]; ok {
				llamacpp.SetF32(t.params[p].t, d)
			}
		}
	}
	return nil
}
